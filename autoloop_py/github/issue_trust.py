"""Who may define an issue program: its author's write access, who edited its body since, and writers' approvals.

An issue program's `## Evaluation` command runs in CI, so its body must come from someone with write
access. The rule: the body is trusted from the moment a writer stands behind it, and distrusted from
the moment anyone else could have put words in it.

- An issue opened by a writer (author association OWNER, MEMBER or COLLABORATOR) is trusted from the
  start; one opened by anyone else is distrusted from its creation.
- Each edit of the body by someone without write access (read from GitHub's edit history) distrusts
  it again from that edit on; an edit by a writer changes nothing.
- A writer approves the body as it stands by commenting `/autoloop approve` or by (re-)applying the
  `autoloop-program` label; an approval counts when it is newer than the last distrusting event.

When the edit history cannot be read, the program is not run (fail closed).

The rule itself (`refusal` and the facts it reads) is agentic_scheduler.py's, which must stand alone;
this module reads the facts through PyGithub for the package's commands.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:  # PyGithub loads only when a command talks to GitHub
    import github

from autoloop_py.github.agentic_scheduler import (  # the rule lives in the standalone scheduler, which applies it too
    APPROVE_COMMAND,
    EDITS_QUERY,
    WRITE_ASSOCIATIONS,
    WRITE_PERMISSIONS,
    Approval,
    Edit,
    IssueFacts,
    distrusted_since,
    is_approval,
    refusal,
)
from autoloop_py.state.parts import utc

log = logging.getLogger(__name__)

__all__ = ["APPROVE_COMMAND", "EDITS_QUERY", "WRITE_PERMISSIONS", "Approval", "Edit", "IssueFacts", "Writers",
           "distrusted_since", "facts_of", "is_approval", "refusal"]


# ---------------------------------------------------------------- GitHub (effects)


class Writers:
    """Answers "has this login write access to the repository?", one API call per login."""

    def __init__(self, repo: Any) -> None:
        self._repo = repo
        self._known: dict[str, bool] = {}

    def __call__(self, login: str) -> bool:
        if login not in self._known:
            import github

            try:
                permission = self._repo.get_collaborator_permission(login)
            except github.GithubException as err:
                log.info("no permission for %s (%s): not a writer", login, err.status)
                permission = "none"
            self._known[login] = permission in WRITE_PERMISSIONS
        return self._known[login]


def facts_of(gh: github.Github, repo: Any, issue: Any, label: str, writers: Writers) -> IssueFacts:
    """Returns what GitHub says about an issue's body: its author, its edit history and writers' approvals."""
    edits, complete = _edits(gh, repo.full_name, issue.number)
    approvals = [
        Approval(c.user.login, utc(c.created_at), "comment")
        for c in issue.get_comments()
        if is_approval(c.body, c.author_association)
    ]
    approvals += [
        Approval(e.actor.login, utc(e.created_at), "label")
        for e in issue.get_events()
        if e.event == "labeled" and e.label is not None and e.label.name == label and e.actor is not None
        and writers(e.actor.login)
    ]
    return IssueFacts(
        number=int(issue.number),
        author=issue.user.login if issue.user else "",
        author_writes=(issue.author_association or "").upper() in WRITE_ASSOCIATIONS,
        created_at=utc(issue.created_at),
        edits=tuple(edits),
        edits_complete=complete,
        approvals=tuple(approvals),
    )


def _edits(gh: github.Github, full_name: str, number: int) -> tuple[list[Edit], bool]:
    """Returns the body's revisions from GitHub's GraphQL edit history, and whether all were listed."""
    owner, name = full_name.split("/", 1)
    _, data = gh.requester.graphql_query(EDITS_QUERY, {"owner": owner, "name": name, "number": number})
    found = data["data"]["repository"]["issue"]["userContentEdits"]
    nodes: Sequence[dict[str, Any]] = found.get("nodes") or []
    edits = [
        Edit((node.get("editor") or {}).get("login"), utc(datetime.fromisoformat(node["editedAt"].replace("Z", "+00:00"))))
        for node in nodes
    ]
    return edits, int(found.get("totalCount") or 0) <= len(edits)
