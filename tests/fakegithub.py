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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlencode, urlsplit

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
    ) -> dict[str, Any]:
        """Stores an issue (or, with pull_request=True, a PR as the issues API lists it)."""
        issue: dict[str, Any] = {
            "id": 1000 + number,
            "number": number,
            "title": title,
            "body": body,
            "state": state,
            "labels": [{"name": name} for name in labels],
            "user": {"login": "octocat"},
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
