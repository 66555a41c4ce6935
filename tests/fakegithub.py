"""A loopback fake of the GitHub REST API for tests: the real PyGithub (or urllib) talks to it over HTTP.

Usage::

    with FakeGitHub() as gh:
        gh.add_issue("o/r", 1, "Speed up", body="...")
        client = github.Github(base_url=gh.url, retry=None, seconds_between_requests=None)
        ...
        assert gh.requests[0].path == "/repos/o/r/issues"

Extend it by adding data helpers and routes: `gh.route("POST", r"/repos/(?P<repo>[^/]+/[^/]+)/issues", handler)`;
a handler takes `(fake, request, match)` and returns a `Response`. Later routes win over earlier ones.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

REPO = r"(?P<repo>[^/]+/[^/]+)"
DEFAULT_PER_PAGE = 30


@dataclass(frozen=True)
class Request:
    """One request the fake received.

    Attributes:
      method: HTTP method.
      path: URL path without the query.
      query: query parameters (first value of each).
      headers: request headers, keys lowercased.
      body: the decoded JSON body (None when empty or not JSON).
    """

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any = None


@dataclass(frozen=True)
class Response:
    """What a route answers: status, a JSON-serialisable body and extra headers."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[["FakeGitHub", Request, "re.Match[str]"], Response]


class FakeGitHub:
    """In-memory GitHub (repos, issues, pulls) served on 127.0.0.1 with a request log."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token
        self.issues: dict[str, list[dict[str, Any]]] = {}
        self.pulls: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[Request] = []
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.route("GET", rf"/repos/{REPO}", _get_repo)
        self.route("GET", rf"/repos/{REPO}/issues", _list_issues)
        self.route("GET", rf"/repos/{REPO}/issues/(?P<number>\d+)", _get_issue)
        self.route("GET", rf"/repos/{REPO}/pulls", _list_pulls)
        self.route("GET", rf"/repos/{REPO}/pulls/(?P<number>\d+)", _get_pull)
        self._install_thread_routes()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeGitHub:
        """Starts serving on a free loopback port."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(self))
        self._server.daemon_threads = True
        # A short poll keeps stop() (which waits for the next poll) fast.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops the server and waits for its thread."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Returns the API base URL (what `GITHUB_API_URL` / PyGithub's `base_url` should be)."""
        assert self._server is not None, "call start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- routes ----------------------------------------------------------------------------------

    def route(self, method: str, pattern: str, handler: Handler) -> None:
        """Adds a route; a later route for the same request wins over an earlier one."""
        self.routes.insert(0, (method.upper(), re.compile(pattern + r"/?"), handler))

    def fail(self, method: str, pattern: str, status: int = 500, message: str = "fake failure") -> None:
        """Makes every matching request answer an error status."""
        self.route(method, pattern, lambda _f, _r, _m: Response(status, {"message": message}))

    def dispatch(self, request: Request) -> Response:
        """Returns the answer of the newest route matching the request (404 when none does)."""
        self.requests.append(request)
        if self.token is not None and not _authorized(request, self.token):
            return Response(401, {"message": "Bad credentials"})
        for method, pattern, handler in self.routes:
            match = pattern.fullmatch(request.path)
            if method == request.method and match:
                return handler(self, request, match)
        return Response(404, {"message": "Not Found"})

    def requests_to(self, path: str, method: str = "GET") -> list[Request]:
        """Returns the logged requests with exactly this path and method."""
        return [r for r in self.requests if r.path == path and r.method == method]

    # -- data ------------------------------------------------------------------------------------

    def add_issue(
        self,
        repo: str,
        number: int,
        title: str,
        body: str | None = "",
        labels: tuple[str, ...] = ("autoloop-program",),
        state: str = "open",
        pull_request: bool = False,
        login: str = "octocat",
        association: str = "OWNER",
    ) -> dict[str, Any]:
        """Stores an issue (or, with pull_request=True, a PR as the issues API lists it), opened by `login`."""
        when = self.tick()
        issue: dict[str, Any] = {
            "id": 1000 + number,
            "number": number,
            "title": title,
            "body": body,
            "state": state,
            "labels": [{"name": name} for name in labels],
            "user": {"login": login, "type": "User"},
            "author_association": association,
            "created_at": when,
            "updated_at": when,
            "url": f"{self.url}/repos/{repo}/issues/{number}",
            "html_url": f"https://github.com/{repo}/issues/{number}",
        }
        if pull_request:
            # As GitHub lists a PR in the issues API: a pull_request key and a /pull/ html_url.
            issue["pull_request"] = {"url": f"{self.url}/repos/{repo}/pulls/{number}"}
            issue["html_url"] = f"https://github.com/{repo}/pull/{number}"
        self.issues.setdefault(repo, []).append(issue)
        return issue

    def add_pull(
        self, repo: str, number: int, title: str, head_ref: str, state: str = "open", draft: bool = True
    ) -> dict[str, Any]:
        """Stores a pull request whose head is `head_ref` in the repository itself."""
        owner = repo.split("/", 1)[0]
        pull: dict[str, Any] = {
            "id": 2000 + number,
            "number": number,
            "title": title,
            "state": state,
            "draft": draft,
            "head": {"ref": head_ref, "label": f"{owner}:{head_ref}", "sha": f"{number:040x}"},
            "base": {"ref": "main", "label": f"{owner}:main"},
            "url": f"{self.url}/repos/{repo}/pulls/{number}",
            "html_url": f"https://github.com/{repo}/pull/{number}",
        }
        self.pulls.setdefault(repo, []).append(pull)
        return pull

    def paginate(self, request: Request, items: list[dict[str, Any]]) -> Response:
        """Returns one page of items (`per_page`, `page`) with GitHub's `Link` header."""
        per_page = int(request.query.get("per_page", DEFAULT_PER_PAGE))
        page = int(request.query.get("page", 1))
        last = max(1, -(-len(items) // per_page))
        links = [f'<{self._page_url(request, n)}>; rel="{rel}"' for rel, n in _neighbours(page, last)]
        headers = {"Link": ", ".join(links)} if links else {}
        return Response(200, items[(page - 1) * per_page : page * per_page], headers)

    def _page_url(self, request: Request, page: int) -> str:
        return f"{self.url}{request.path}?{urlencode({**request.query, 'page': str(page)})}"

    # -- program thread API (github.py): comments, labels, issue/PR writes, checks, permissions ---

    def _install_thread_routes(self) -> None:
        """Adds the endpoints autoloop_py/github/client.py uses and the data they serve."""
        self.comments: dict[str, dict[int, list[dict[str, Any]]]] = {}
        self.labels: dict[str, list[dict[str, Any]]] = {}
        self.check_runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.statuses: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.permissions: dict[tuple[str, str], str] = {}
        # Body revisions per issue, as GraphQL's userContentEdits lists them, and issue events.
        self.edits: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.events: dict[tuple[str, int], list[dict[str, Any]]] = {}
        # The login the token belongs to (GET /user); comments created through the API are its.
        self.login = "autoloop-bot"
        # Every created object gets the next minute of this clock; tests may set it.
        self.now = datetime(2025, 1, 1, tzinfo=timezone.utc)
        self._next_id = 5000
        number = r"(?P<number>\d+)"
        self.route("POST", rf"/repos/{REPO}/issues", _create_issue)
        self.route("PATCH", rf"/repos/{REPO}/issues/{number}", _edit_issue)
        self.route("GET", rf"/repos/{REPO}/issues/{number}/comments", _list_comments)
        self.route("POST", rf"/repos/{REPO}/issues/{number}/comments", _create_comment)
        self.route("PATCH", rf"/repos/{REPO}/issues/comments/(?P<id>\d+)", _edit_comment)
        self.route("POST", rf"/repos/{REPO}/issues/{number}/labels", _add_labels)
        self.route("DELETE", rf"/repos/{REPO}/issues/{number}/labels/(?P<name>[^/]+)", _remove_label)
        self.route("GET", rf"/repos/{REPO}/labels", _list_labels)
        self.route("POST", rf"/repos/{REPO}/labels", _create_label)
        self.route("POST", rf"/repos/{REPO}/pulls", _create_pull)
        self.route("PATCH", rf"/repos/{REPO}/pulls/{number}", _edit_pull)
        self.route("GET", rf"/repos/{REPO}/commits/(?P<ref>[^/]+)/check-runs", _list_check_runs)
        self.route("GET", rf"/repos/{REPO}/commits/(?P<ref>[^/]+)/status", _combined_status)
        self.route("GET", rf"/repos/{REPO}/collaborators/(?P<user>[^/]+)/permission", _permission)
        self.route("GET", rf"/repos/{REPO}/issues/{number}/events", _list_events)
        self.route("POST", r"/graphql", _graphql)
        self.route("GET", r"/user", lambda f, _r, _m: Response(200, {"login": f.login, "id": 1, "type": "Bot"}))

    def edit_body(self, repo: str, number: int, body: str, editor: str | None) -> None:
        """Replaces an issue's body as `editor` would (None: a deleted account), keeping the revision history."""
        issue = self.find_issue(repo, number)
        assert issue is not None
        history = self.edits.setdefault((repo, number), [])
        if not history:
            # GitHub lists the original text as the oldest revision once the body has been edited.
            history.append({"editedAt": issue["created_at"], "editor": {"login": issue["user"]["login"]}})
        when = self.tick()
        history.append({"editedAt": when, "editor": {"login": editor} if editor else None})
        issue["body"], issue["updated_at"] = body, when

    def add_event(self, repo: str, number: int, event: str, actor: str, label: str | None = None) -> dict[str, Any]:
        """Stores an issue event (e.g. `labeled` by `actor`), created now."""
        self._next_id += 1
        found: dict[str, Any] = {
            "id": self._next_id,
            "event": event,
            "actor": {"login": actor, "type": "User"},
            "created_at": self.tick(),
            "url": f"{self.url}/repos/{repo}/issues/events/{self._next_id}",
        }
        if label is not None:
            found["label"] = {"name": label, "color": "ededed"}
        self.events.setdefault((repo, number), []).append(found)
        return found

    def tick(self) -> str:
        """Returns the fake clock as GitHub writes times, then advances it one minute."""
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")
        self.now += timedelta(minutes=1)
        return stamp

    def next_number(self, repo: str) -> int:
        """Returns the next issue/PR number of a repository (they share one sequence, as on GitHub)."""
        taken = [i["number"] for i in self.issues.get(repo, [])] + [p["number"] for p in self.pulls.get(repo, [])]
        return max(taken, default=0) + 1

    def find_issue(self, repo: str, number: int) -> dict[str, Any] | None:
        """Returns the stored issue (not a PR's issue entry) with this number."""
        return next((i for i in self.issues.get(repo, []) if i["number"] == number), None)

    def add_comment(
        self,
        repo: str,
        number: int,
        body: str,
        login: str = "octocat",
        association: str = "NONE",
        created_at: str | None = None,
        user_type: str = "User",
    ) -> dict[str, Any]:
        """Stores a comment on issue `number` (created now, or at `created_at` as `YYYY-MM-DDTHH:MM:SSZ`)."""
        self._next_id += 1
        when = created_at or self.tick()
        comment: dict[str, Any] = {
            "id": self._next_id,
            "body": body,
            "user": {"login": login, "id": abs(hash(login)) % 10**6, "type": user_type},
            "author_association": association,
            "created_at": when,
            "updated_at": when,
            "url": f"{self.url}/repos/{repo}/issues/comments/{self._next_id}",
            "html_url": f"https://github.com/{repo}/issues/{number}#issuecomment-{self._next_id}",
            "issue_url": f"{self.url}/repos/{repo}/issues/{number}",
        }
        self.comments.setdefault(repo, {}).setdefault(number, []).append(comment)
        return comment

    def add_check_run(
        self,
        repo: str,
        ref: str,
        name: str,
        status: str = "completed",
        conclusion: str | None = "success",
        summary: str | None = None,
        text: str | None = None,
    ) -> dict[str, Any]:
        """Stores a check run of commit `ref`."""
        self._next_id += 1
        run: dict[str, Any] = {
            "id": self._next_id,
            "name": name,
            "head_sha": ref,
            "status": status,
            "conclusion": conclusion,
            "url": f"{self.url}/repos/{repo}/check-runs/{self._next_id}",
            "html_url": f"https://github.com/{repo}/runs/{self._next_id}",
            "details_url": f"https://github.com/{repo}/runs/{self._next_id}",
            "output": {"title": None, "summary": summary, "text": text, "annotations_count": 0},
        }
        self.check_runs.setdefault((repo, ref), []).append(run)
        return run

    def add_status(
        self, repo: str, ref: str, context: str, state: str, description: str = "", target_url: str | None = None
    ) -> dict[str, Any]:
        """Stores a commit status (the older statuses API) of commit `ref`."""
        self._next_id += 1
        status = {
            "id": self._next_id,
            "context": context,
            "state": state,
            "description": description,
            "target_url": target_url,
        }
        self.statuses.setdefault((repo, ref), []).append(status)
        return status

    def labels_of(self, repo: str, number: int) -> list[str]:
        """Returns the label names of an issue."""
        issue = self.find_issue(repo, number)
        return [label["name"] for label in issue["labels"]] if issue else []


def _neighbours(page: int, last: int) -> list[tuple[str, int]]:
    found = []
    if page < last:
        found += [("next", page + 1), ("last", last)]
    if page > 1:
        found += [("first", 1), ("prev", page - 1)]
    return found


def _authorized(request: Request, token: str) -> bool:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() in ("token", "bearer") and value == token


def _get_repo(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    owner, name = match["repo"].split("/")
    return Response(
        200,
        {
            "id": 1,
            "name": name,
            "full_name": match["repo"],
            "owner": {"login": owner},
            "default_branch": "main",
            "url": f"{fake.url}/repos/{match['repo']}",
        },
    )


def _list_issues(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    state = request.query.get("state", "open")
    wanted = {name for name in request.query.get("labels", "").split(",") if name}
    issues = [
        issue
        for issue in fake.issues.get(match["repo"], [])
        if state in ("all", issue["state"]) and wanted <= {label["name"] for label in issue["labels"]}
    ]
    return fake.paginate(request, issues)


def _get_issue(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    for issue in fake.issues.get(match["repo"], []):
        if issue["number"] == int(match["number"]):
            return Response(200, issue)
    return Response(404, {"message": "Not Found"})


def _list_pulls(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    state = request.query.get("state", "open")
    head = request.query.get("head")
    pulls = [
        pull
        for pull in fake.pulls.get(match["repo"], [])
        if state in ("all", pull["state"]) and head in (None, pull["head"]["label"])
    ]
    return fake.paginate(request, pulls)


def _get_pull(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    for pull in fake.pulls.get(match["repo"], []):
        if pull["number"] == int(match["number"]):
            return Response(200, pull)
    return Response(404, {"message": "Not Found"})

# -- program thread API handlers (see FakeGitHub._install_thread_routes) ------------------------


def _label(fake: FakeGitHub, repo: str, name: str, color: str = "ededed") -> dict[str, Any]:
    """Returns the repository label `name`, creating it as GitHub does when a label is applied."""
    known = fake.labels.setdefault(repo, [])
    for label in known:
        if label["name"] == name:
            return label
    label = {"id": len(known) + 1, "name": name, "color": color, "url": f"{fake.url}/repos/{repo}/labels/{name}"}
    known.append(label)
    return label


def _create_issue(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    body = request.body or {}
    if not body.get("title"):
        return Response(422, {"message": "Validation Failed", "errors": [{"field": "title", "code": "missing"}]})
    repo = match["repo"]
    names = [_label(fake, repo, name)["name"] for name in body.get("labels", [])]
    issue = fake.add_issue(repo, fake.next_number(repo), body["title"], body.get("body"), labels=tuple(names))
    issue["created_at"] = issue["updated_at"] = fake.tick()
    return Response(201, issue)


def _edit_issue(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    issue = fake.find_issue(match["repo"], int(match["number"]))
    if issue is None:
        return Response(404, {"message": "Not Found"})
    for key in ("title", "body", "state"):
        if key in (request.body or {}):
            issue[key] = request.body[key]
    if "labels" in (request.body or {}):
        issue["labels"] = [_label(fake, match["repo"], name) for name in request.body["labels"]]
    return Response(200, issue)


def _list_comments(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    if fake.find_issue(match["repo"], int(match["number"])) is None:
        return Response(404, {"message": "Not Found"})
    since = request.query.get("since", "")
    # GitHub's `since` keeps comments *updated* at or after the time; ISO-8601 Z strings sort as times.
    found = [c for c in fake.comments.get(match["repo"], {}).get(int(match["number"]), []) if c["updated_at"] >= since]
    return fake.paginate(request, found)


def _create_comment(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    if fake.find_issue(match["repo"], int(match["number"])) is None:
        return Response(404, {"message": "Not Found"})
    body = (request.body or {}).get("body")
    if not body:
        return Response(422, {"message": "Validation Failed", "errors": [{"field": "body", "code": "missing"}]})
    comment = fake.add_comment(match["repo"], int(match["number"]), body, fake.login, "NONE", user_type="Bot")
    return Response(201, comment)


def _edit_comment(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    for comments in fake.comments.get(match["repo"], {}).values():
        for comment in comments:
            if comment["id"] == int(match["id"]):
                comment["body"] = (request.body or {}).get("body", comment["body"])
                comment["updated_at"] = fake.tick()
                return Response(200, comment)
    return Response(404, {"message": "Not Found"})


def _add_labels(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    issue = fake.find_issue(match["repo"], int(match["number"]))
    if issue is None:
        return Response(404, {"message": "Not Found"})
    # The API takes a bare list or {"labels": [...]}; PyGithub sends the bare list.
    names = request.body.get("labels", []) if isinstance(request.body, dict) else request.body or []
    for name in names:
        if name not in fake.labels_of(match["repo"], issue["number"]):
            issue["labels"].append(_label(fake, match["repo"], name))
    return Response(200, issue["labels"])


def _remove_label(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    issue = fake.find_issue(match["repo"], int(match["number"]))
    name = unquote(match["name"])
    if issue is None or name not in fake.labels_of(match["repo"], issue["number"]):
        return Response(404, {"message": "Label does not exist"})
    issue["labels"] = [label for label in issue["labels"] if label["name"] != name]
    return Response(200, issue["labels"])


def _list_labels(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    return fake.paginate(request, fake.labels.get(match["repo"], []))


def _create_label(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    body = request.body or {}
    if any(label["name"] == body.get("name") for label in fake.labels.get(match["repo"], [])):
        return Response(422, {"message": "Validation Failed", "errors": [{"code": "already_exists"}]})
    return Response(201, _label(fake, match["repo"], body["name"], body.get("color", "ededed")))


def _create_pull(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    repo, body = match["repo"], request.body or {}
    owner = repo.split("/", 1)[0]
    head = body.get("head", "").split(":")[-1]
    if any(p["state"] == "open" and p["head"]["ref"] == head for p in fake.pulls.get(repo, [])):
        message = f"A pull request already exists for {owner}:{head}."
        errors = [{"resource": "PullRequest", "code": "custom", "message": message}]
        return Response(422, {"message": "Validation Failed", "errors": errors})
    number = fake.next_number(repo)
    pull = fake.add_pull(repo, number, body.get("title", ""), head, draft=bool(body.get("draft")))
    pull["base"] = {"ref": body.get("base", "main"), "label": f"{owner}:{body.get('base', 'main')}"}
    pull["body"] = body.get("body")
    # GitHub lists every PR in the issues API too.
    fake.add_issue(repo, number, pull["title"], pull["body"], labels=(), pull_request=True)
    return Response(201, pull)


def _edit_pull(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    repo, number = match["repo"], int(match["number"])
    pull = next((p for p in fake.pulls.get(repo, []) if p["number"] == number), None)
    if pull is None:
        return Response(404, {"message": "Not Found"})
    for key in ("title", "body", "state"):
        if key in (request.body or {}):
            pull[key] = request.body[key]
            for issue in fake.issues.get(repo, []):
                if issue["number"] == number:
                    issue[key] = request.body[key]
    return Response(200, pull)


def _list_check_runs(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    runs = fake.check_runs.get((match["repo"], match["ref"]), [])
    page = fake.paginate(request, runs)
    return Response(page.status, {"total_count": len(runs), "check_runs": page.body}, page.headers)


def _combined_status(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    statuses = fake.statuses.get((match["repo"], match["ref"]), [])
    states = {s["state"] for s in statuses}
    # As on GitHub: "pending" also when there are no statuses at all.
    state = "failure" if states & {"failure", "error"} else "success" if states == {"success"} else "pending"
    body = {"state": state, "sha": match["ref"], "total_count": len(statuses), "statuses": statuses}
    return Response(200, body)


def _permission(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    user = unquote(match["user"])
    permission = fake.permissions.get((match["repo"], user), "none")
    return Response(200, {"permission": permission, "user": {"login": user}})


def _list_events(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    if fake.find_issue(match["repo"], int(match["number"])) is None:
        return Response(404, {"message": "Not Found"})
    return fake.paginate(request, fake.events.get((match["repo"], int(match["number"])), []))


def _graphql(fake: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
    """Answers the one GraphQL query autoloop sends: an issue's userContentEdits (the newest `last: 100`)."""
    body = request.body or {}
    variables = body.get("variables") or {}
    if "userContentEdits" not in body.get("query", ""):
        return Response(200, {"errors": [{"message": "the fake answers only userContentEdits"}]})
    repo, number = f"{variables.get('owner')}/{variables.get('name')}", int(variables.get("number", 0))
    if fake.find_issue(repo, number) is None:
        return Response(200, {"data": {"repository": {"issue": None}},
                              "errors": [{"type": "NOT_FOUND", "message": "Could not resolve to an Issue"}]})
    # GraphQL lists edits newest first.
    history = list(reversed(fake.edits.get((repo, number), [])))
    edits = {"totalCount": len(history), "nodes": history[:100]}
    return Response(200, {"data": {"repository": {"issue": {"userContentEdits": edits}}}})


def _handler_class(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    """Returns a request handler class bound to one fake."""

    class _Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            request = Request(
                method=self.command,
                path=parts.path,
                query={k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
                headers={k.lower(): v for k, v in self.headers.items()},
                body=_json_or_none(raw),
            )
            response = fake.dispatch(request)
            payload = b"" if response.body is None else json.dumps(response.body).encode()
            self.send_response(response.status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            for key, value in response.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            """Keeps test output quiet (the request log replaces the access log)."""

    return _Handler


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
