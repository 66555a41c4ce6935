"""Autoloop scheduler: picks the one program an Agentic Workflows run should iterate on.

Run it as `python3 -m autoloop_py.github.agentic_scheduler` (what `autoloop init` writes into autoloop.md) or
through the upstream path `scripts/autoloop_scheduler.py`, a shim over this module.

A drop-in replacement for upstream's `workflows/scripts/autoloop_scheduler.py` (githubnext/autoloop
438782f): same environment, same output file and keys, same exit codes, and the same importable
helpers with the same signatures and return shapes. The rules come from `autoloop_py.loop.schedule`.

Inputs (environment):
  GITHUB_TOKEN, GITHUB_REPOSITORY   issue-based programs and the existing-PR lookup (skipped without them)
  AUTOLOOP_PROGRAM                  force this program (bypasses schedule and skip conditions)
  GITHUB_API_URL                    API base (default https://api.github.com)
  AUTOLOOP_MEMORY_DIR               state files `<name>.md` (default /tmp/gh-aw/repo-memory/autoloop)
  AUTOLOOP_OUTPUT                   the JSON written (default /tmp/gh-aw/autoloop.json)
  AUTOLOOP_ISSUE_PROGRAMS_DIR       where issue bodies are written (default /tmp/gh-aw/issue-programs)
  --repo-root DIR                   the repository (default: the current directory)

Output: the JSON file with keys selected, selected_file, selected_issue, selected_target_metric,
selected_metric_direction, state_file_size_bytes, state_file_max_bytes, issue_programs, deferred,
skipped, unconfigured, no_programs, not_due, head_branch, existing_pr.

Exit codes: 0 when a program is selected, when unconfigured programs need attention, or when there are
no programs at all; 1 when nothing is due (the workflow skips the agent) or a forced program is unknown
or unconfigured (then no JSON file exists).

Differences from upstream:
  1. Naive `Last Run` timestamps are read as UTC; upstream crashes on aware-minus-naive subtraction.
  2. Programs are ordered by `Last Run` as datetimes; upstream sorts the raw strings, so a `+02:00`
     timestamp sorted against a `Z` one came out in the wrong order. An unparseable `Last Run` warns
     on stderr and counts as never run (upstream: due, sorted by its text).
  3. `not_due` is written (upstream documents it but never emits it): true when configured programs
     exist and none was selected.
  4. The output file is removed at start, so a failed forced selection (exit 1) leaves no stale JSON
     from an earlier run behind.
  5. `parse_schedule` accepts a superset (`every 1d`, `every 30 minutes`, `hourly`, `2 days`...) and
     returns None for None or ''. Anything else it cannot read returns None (always due) as upstream,
     but prints a warning naming the value to stderr; a value upstream reads only by its prefix
     (`every 6hamsters` -> 6h) is still read so, with a warning. `every 0h` warns that it means always due.
  6. Two programs with one name (`<name>/program.md` and `<name>.md`): upstream schedules both. Ours
     prints `ERROR: two programs named ...` to stderr and skips both, listing the name in `skipped`
     with reason `duplicate name: <paths>`; forcing that name fails.
  7. Issue programs are read through PyGithub (pagination via `Link`). Issues titled `[Autoloop: ...]`
     (autoloop's own program issues, upstream bug #50) are not programs, and an issue whose slug equals
     a file program's name gets `-<number>` appended like an issue-to-issue collision. Without
     GITHUB_TOKEN or GITHUB_REPOSITORY no API call is made.
  8. Machine State: the heading is found with or without U+FE0F (or the emoji); upstream reads `{}`
     without it, which revived paused and completed programs. Keys and true/false values may carry
     `**`/backticks; table separator rows are not keys; a 3-column row reads its first two cells.
  9. A paused program whose Pause Reason is `—` is skipped as `paused: unknown` (upstream: `paused: None`);
     `paused`/`completed` given as strings count only when they say `true`.
 10. Frontmatter: quoted values, trailing `# comments`, `target_metric`, keys in any case and a closing
     `---` at the end of the file are accepted; a NaN target is invalid. Other upstream rules are kept (line based,
     last occurrence wins, leading HTML comments skipped, `#`-commented keys ignored).
 11. A forced program is not also listed in `skipped`.
 12. The `example.md` bootstrap is not written when `.autoloop/program.md` or `program.md` exists, so
     those fallbacks (which upstream only reads when nothing else is found) can be reached at all. Its
     text is ours (`autoloop_py/templates/example_program.md.j2`); like upstream's it has the sentinel.
 13. The no-programs JSON carries the full key set (plus upstream's `due: []`).
 14. `select_program` takes an optional keyword `root` to re-read a forced program's frontmatter
     relative to the repository; `read_program_state`/`get_state_file_size` default to
     AUTOLOOP_MEMORY_DIR. `main(argv=None)` reads no command line unless given one; it raises
     SystemExit for a non-zero exit code as upstream, and returns normally for exit code 0 (upstream
     raises SystemExit(0) when there are no programs).
 15. `selected_file` is relative to the repository root (upstream: to the working directory, which is
     the root in the workflow). The existing-PR lookup uses GITHUB_API_URL and stops after 50 pages.
Kept as upstream: TODO/REPLACE anywhere marks a program unconfigured; `.autoloop/program.md` is named
`.autoloop`; `consecutive_errors` is never a skip reason; a plateau skip is permanent.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeAlias

from autoloop_py import markdown as md
from autoloop_py.github.issue_programs import IssueProgram, discover_issue_programs, slugify_issue_title
from autoloop_py.loop import schedule
from autoloop_py.program.model import UNCONFIGURED_SENTINEL, discover
from autoloop_py.render import render

PROGRAMS_DIR = ".autoloop/programs"
TEMPLATE_FILE = os.path.join(PROGRAMS_DIR, "example.md")
FALLBACK_PROGRAMS = (".autoloop/program.md", "program.md")
REPO_MEMORY_DIR = "/tmp/gh-aw/repo-memory/autoloop"
ISSUE_PROGRAMS_DIR = "/tmp/gh-aw/issue-programs"
OUTPUT_DIR = "/tmp/gh-aw"
OUTPUT_FILE = os.path.join(OUTPUT_DIR, "autoloop.json")
DEFAULT_API_URL = "https://api.github.com"
# repo-memory's `max-file-size`: a larger state file is rejected by the memory push.
STATE_FILE_MAX_BYTES = 30720
MAX_PR_PAGES = 50

HttpGetJson = Callable[[str, Mapping[str, str]], "tuple[Any, str | None]"]
# (selected, selected_file, selected_issue, target_metric, metric_direction, deferred, error)
Selection: TypeAlias = "tuple[str | None, str | None, int | None, float | None, str, list[str], str | None]"

__all__ = [
    "parse_machine_state",
    "parse_schedule",
    "get_program_name",
    "slugify_issue_title",
    "parse_link_header",
    "parse_program_frontmatter",
    "is_unconfigured",
    "check_skip_conditions",
    "parse_timestamp",
    "machine_snapshot",
    "read_program_state",
    "get_state_file_size",
    "find_existing_pr_for_branch",
    "select_program",
    "main",
]

_EMPTY_VALUES = ("—", "-", "")
_INT_FIELDS = ("iteration_count", "consecutive_errors")
_SEPARATOR_CELL_RE = re.compile(r"^:?-+:?$")
_CELL_SPLIT_RE = re.compile(r"(?<!\\)\|")
_PLACEHOLDER_RE = re.compile(r"\bTODO\b|\bREPLACE")
_LEADING_COMMENTS_RE = re.compile(r"\A(?:\s*<!--.*?-->\s*\n)*", re.DOTALL)
_FRONTMATTER_RE = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)
_UPSTREAM_SCHEDULE_RES = ((re.compile(r"every\s+(\d+)\s*h"), "hours"), (re.compile(r"every\s+(\d+)\s*m"), "minutes"))
_LINK_NEXT_RE = re.compile(r'^<([^>]+)>\s*;(?:.*;)?\s*rel="?next"?\s*(?:;.*)?$')


@dataclass(frozen=True)
class MachineSnapshot:
    """The scheduling fields of an upstream Machine State dict, typed for `autoloop_py.loop.schedule`.

    Attributes:
      last_run: when the program last ran (aware, UTC), or None.
      paused: whether a person or the agent paused it.
      pause_reason: why (None when unknown).
      completed: whether the target metric was reached.
      recent_statuses: the latest iteration outcomes, oldest first, lowercased.
    """

    last_run: datetime | None
    paused: bool
    pause_reason: str | None
    completed: bool
    recent_statuses: tuple[str, ...]


@dataclass(frozen=True)
class Settings:
    """Where the scheduler reads and writes, and what it may ask GitHub.

    Attributes:
      root: the repository root (program paths in the output are relative to it).
      memory_dir: folder of the state files `<name>.md`.
      output: the JSON file to write.
      issue_dir: folder the issue program bodies are written to.
      api_url: GitHub REST API base URL.
      token: GITHUB_TOKEN ('' when absent).
      repo: GITHUB_REPOSITORY as owner/name ('' when absent).
      forced: AUTOLOOP_PROGRAM, stripped ('' when absent).
    """

    root: Path
    memory_dir: Path
    output: Path
    issue_dir: Path
    api_url: str
    token: str
    repo: str
    forced: str


@dataclass(frozen=True)
class Survey:
    """Every discovered program sorted into due, skipped and unconfigured.

    Attributes:
      due: upstream-shaped entries {name, last_run, file, target_metric, metric_direction}.
      skipped: upstream-shaped entries {name, reason, next_due?}.
      unconfigured: names of template programs.
      all_programs: name -> program file, for every program with a unique name.
      duplicates: name -> program files, for names used by more than one program.
    """

    due: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    unconfigured: list[str]
    all_programs: dict[str, str]
    duplicates: dict[str, list[str]]


# ---------------------------------------------------------------------------------------------------
# Pure helpers (upstream's importable API)
# ---------------------------------------------------------------------------------------------------


def parse_machine_state(content: str) -> dict[str, Any]:
    """Returns the Machine State table as upstream's dict ({} when the file has no such section)."""
    section = next((s for s in md.split_sections(content) if s.key == "machine state"), None)
    if section is None:
        return {}
    state: dict[str, Any] = {}
    for key, value in _table_pairs(section.body):
        state[key] = None if value in _EMPTY_VALUES else value
    return _coerce_state(state)


def _table_pairs(text: str) -> Iterable[tuple[str, str]]:
    """Yields (key, raw value) of each body row of the pipe tables in text."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("|"):
            continue
        cells = [c.strip() for c in _CELL_SPLIT_RE.split(stripped.strip("|"))]
        if len(cells) < 2 or all(_SEPARATOR_CELL_RE.match(c) for c in cells if c):
            continue
        key = _plain(cells[0]).lower().replace(" ", "_")
        if key and key != "field":
            yield key, cells[1]


def _coerce_state(state: dict[str, Any]) -> dict[str, Any]:
    for name in _INT_FIELDS:
        if name in state:
            state[name] = _to_int(state[name])
    for name in ("paused", "completed"):
        if name in state:
            state[name] = _is_true(state[name])
    raw = state.get("recent_statuses") or ""
    state["recent_statuses"] = [s.strip().lower() for s in str(raw).split(",") if s.strip()]
    return state


def _plain(text: str) -> str:
    """Returns a cell without surrounding markdown emphasis or code marks."""
    return text.strip().strip("*`_").strip()


def _to_int(value: Any) -> int:
    try:
        return int(_plain(str(value)))
    except ValueError:
        return 0


def _is_true(value: Any) -> bool:
    if isinstance(value, str):
        return _plain(value).lower() == "true"
    return bool(value)


def parse_schedule(s: str | None) -> timedelta | None:
    """Returns the interval of a schedule string; None (always due) for none or an unreadable one."""
    if s is None or not str(s).strip():
        return None
    try:
        interval = schedule.parse_schedule(str(s))
    except ValueError:
        interval = _upstream_schedule(str(s))
        if interval is None:
            _warn(f"unreadable schedule {s!r}: the program is always due; write e.g. `every 6h` or `daily`")
            return None
        _warn(f"schedule {s!r} read as every {interval} by its prefix; write e.g. `every 6h`")
    if interval is not None and not interval:
        _warn(f"schedule {s!r} is zero: the program is always due")
    return interval


def _upstream_schedule(text: str) -> timedelta | None:
    """Returns what upstream's prefix rules read in text (`every 6hamsters` -> 6h), or None."""
    value = text.strip().lower()
    for pattern, unit in _UPSTREAM_SCHEDULE_RES:
        match = pattern.match(value)
        if match:
            return timedelta(**{unit: int(match.group(1))})
    return None


def get_program_name(pf: str | os.PathLike[str]) -> str:
    """Returns a program's name: the folder of a `…/program.md`, otherwise the file stem."""
    path = PurePosixPath(Path(pf).as_posix())
    if path.name == "program.md" and path.parent.name:
        return path.parent.name
    return path.stem


def parse_link_header(header: str | None) -> str | None:
    """Returns the `rel="next"` URL of a GitHub `Link` header, or None."""
    if not header:
        return None
    for part in header.split(","):
        match = _LINK_NEXT_RE.match(part.strip())
        if match:
            return match.group(1)
    return None


def parse_program_frontmatter(content: str) -> tuple[timedelta | None, float | None, str | None, str, str | None]:
    """Returns (schedule, target_metric, invalid target text, metric_direction, invalid direction text)."""
    found: dict[str, str] = {}
    for line in _frontmatter_lines(content):
        key, sep, value = line.strip().partition(":")
        key = key.strip().lower().replace("_", "-")
        if sep and key in ("schedule", "target-metric", "metric-direction"):
            found[key] = value.strip()
    target, bad_target = _parse_target(found.get("target-metric"))
    direction, bad_direction = _parse_direction(found.get("metric-direction"))
    return parse_schedule(_clean_value(found.get("schedule"))), target, bad_target, direction, bad_direction


def _frontmatter_lines(content: str) -> list[str]:
    text = _LEADING_COMMENTS_RE.sub("", content.replace("\r\n", "\n"), count=1)
    match = _FRONTMATTER_RE.match(text)
    return match.group(1).split("\n") if match else []


def _clean_value(raw: str | None) -> str | None:
    """Returns a frontmatter value without a trailing `# comment` and surrounding quotes."""
    if raw is None:
        return None
    value = raw.strip()
    if value[:1] in ("'", '"') and value[0] in value[1:]:
        return value[1 : value.index(value[0], 1)]
    return re.split(r"\s+#", value, maxsplit=1)[0].strip()


def _parse_target(raw: str | None) -> tuple[float | None, str | None]:
    if raw is None:
        return None, None
    try:
        value = float(_clean_value(raw) or "")
    except ValueError:
        return None, raw
    return (None, raw) if math.isnan(value) else (value, None)


def _parse_direction(raw: str | None) -> tuple[str, str | None]:
    if raw is None:
        return "higher", None
    value = (_clean_value(raw) or "").lower()
    return (value, None) if value in ("higher", "lower") else ("higher", value)


def is_unconfigured(content: str) -> bool:
    """Returns whether a program is still a template: the sentinel, or TODO/REPLACE anywhere (as upstream)."""
    return UNCONFIGURED_SENTINEL in content or _PLACEHOLDER_RE.search(content) is not None


def parse_timestamp(value: str | datetime | None) -> datetime | None:
    """Returns an ISO timestamp as an aware UTC datetime (naive means UTC); None when absent or unreadable."""
    if isinstance(value, datetime):
        return schedule.as_utc(value)
    text = _plain(str(value or ""))
    if not text or text in _EMPTY_VALUES:
        return None
    try:
        moment = datetime.fromisoformat(re.sub(r"[Zz]$", "+00:00", text))
    except ValueError:
        return None
    return schedule.as_utc(moment)


def machine_snapshot(state: Mapping[str, Any]) -> MachineSnapshot:
    """Returns the typed scheduling view of an upstream Machine State dict."""
    statuses = state.get("recent_statuses") or ()
    if isinstance(statuses, str):
        statuses = statuses.split(",")
    reason = state.get("pause_reason")
    return MachineSnapshot(
        last_run=parse_timestamp(state.get("last_run")),
        paused=_is_true(state.get("paused")),
        pause_reason=None if reason is None or str(reason).strip() in _EMPTY_VALUES else str(reason),
        completed=_is_true(state.get("completed")),
        recent_statuses=tuple(str(s).strip().lower() for s in statuses if str(s).strip()),
    )


def check_skip_conditions(state: Mapping[str, Any]) -> tuple[bool, str | None]:
    """Returns (skip, reason): completed, then paused, then a plateau of 5 rejections."""
    reason = schedule.skip_reason(machine_snapshot(state))
    return reason is not None, reason


# ---------------------------------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------------------------------


def select_program(
    due: Sequence[Mapping[str, Any]],
    forced_program: str | None = None,
    all_programs: Mapping[str, str] | None = None,
    unconfigured: Iterable[str] | None = None,
    issue_programs: Mapping[str, Any] | None = None,
    *,
    root: str | os.PathLike[str] | None = None,
) -> Selection:
    """Returns (selected, file, issue, target_metric, metric_direction, deferred, error)."""
    issues = issue_programs or {}
    if forced_program:
        return _select_forced(due, forced_program, all_programs or {}, list(unconfigured or []), issues, root)
    if not due:
        return _unselected(None)
    first, *rest = sorted(due, key=_overdue_key)
    name, target, direction = first["name"], first.get("target_metric"), first.get("metric_direction") or "higher"
    return name, first["file"], _issue_number(issues, name), target, direction, [p["name"] for p in rest], None


def _unselected(error: str | None) -> Selection:
    return None, None, None, None, "higher", [], error


def _select_forced(
    due: Sequence[Mapping[str, Any]],
    forced: str,
    all_programs: Mapping[str, str],
    unconfigured: list[str],
    issues: Mapping[str, Any],
    root: str | os.PathLike[str] | None,
) -> Selection:
    if forced not in all_programs:
        return _unselected(f"requested program '{forced}' not found. Available programs: {list(all_programs.keys())}")
    if forced in unconfigured:
        return _unselected(f"requested program '{forced}' is unconfigured (has placeholders).")
    entry = next((p for p in due if p["name"] == forced), {})
    target, direction = entry.get("target_metric"), entry.get("metric_direction")
    if target is None or direction is None:
        _, file_target, _, file_direction, _ = _frontmatter_of(Path(root or ".") / all_programs[forced])
        target = file_target if target is None else target
        direction = direction or file_direction
    deferred = [p["name"] for p in due if p["name"] != forced]
    return forced, all_programs[forced], _issue_number(issues, forced), target, direction, deferred, None


def _overdue_key(entry: Mapping[str, Any]) -> tuple[int, datetime]:
    """Orders never-run (or unreadable) programs first, then the oldest Last Run."""
    last_run = parse_timestamp(entry.get("last_run"))
    return (0, datetime.min.replace(tzinfo=timezone.utc)) if last_run is None else (1, last_run)


def _issue_number(issue_programs: Mapping[str, Any], name: str) -> int | None:
    info = issue_programs.get(name)
    if isinstance(info, Mapping):
        return info.get("issue_number")
    return info if isinstance(info, int) else None


def _frontmatter_of(path: Path) -> tuple[timedelta | None, float | None, str | None, str, str | None]:
    try:
        return parse_program_frontmatter(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None, None, None, "higher", None


# ---------------------------------------------------------------------------------------------------
# I/O helpers
# ---------------------------------------------------------------------------------------------------


def read_program_state(program_name: str, repo_memory_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Returns the program's Machine State dict from the memory folder ({} when it has no state file)."""
    path = _memory_dir(repo_memory_dir) / f"{program_name}.md"
    if not path.is_file():
        print(f"  {program_name}: no state file found (first run)")
        return {}
    return parse_machine_state(path.read_text(encoding="utf-8", errors="replace"))


def get_state_file_size(program_name: str, repo_memory_dir: str | os.PathLike[str] | None = None) -> int:
    """Returns the size in bytes of the program's state file (0 when missing)."""
    try:
        return (_memory_dir(repo_memory_dir) / f"{program_name}.md").stat().st_size
    except OSError:
        return 0


def _memory_dir(given: str | os.PathLike[str] | None) -> Path:
    return Path(given if given is not None else os.environ.get("AUTOLOOP_MEMORY_DIR") or REPO_MEMORY_DIR)


def _http_get_json(url: str, headers: Mapping[str, str], timeout: float = 30) -> tuple[Any, str | None]:
    """Returns (parsed JSON body, Link header) of a GET, or (None, None) on any HTTP or network error."""
    try:
        request = urllib.request.Request(url, headers=dict(headers))
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8")), response.headers.get("Link")
    except (urllib.error.URLError, ValueError, OSError):
        return None, None


def find_existing_pr_for_branch(
    repo: str, program_name: str, github_token: str, http_get_json: HttpGetJson = _http_get_json
) -> int | None:
    """Returns the number of the open PR of `autoloop/{program_name}` (or a legacy suffixed branch), or None."""
    if not repo or not program_name or not github_token:
        return None
    headers = {"Authorization": f"token {github_token}", "Accept": "application/vnd.github.v3+json"}

    def get(url: str) -> tuple[Any, str | None]:
        try:
            return http_get_json(url, headers)
        except Exception:  # noqa: BLE001 -- the lookup is best effort: any failure means "no PR known"
            return None, None

    return _pr_by_head(repo, program_name, get) or _pr_by_scan(repo, program_name, get)


def _pr_by_head(repo: str, name: str, get: Callable[[str], tuple[Any, str | None]]) -> int | None:
    head = urllib.parse.quote(f"{repo.split('/', 1)[0]}:autoloop/{name}", safe="")
    body, _ = get(f"{_api_url()}/repos/{repo}/pulls?head={head}&state=open")
    if isinstance(body, list) and body and isinstance(body[0], dict) and body[0].get("number"):
        return int(body[0]["number"])
    return None


def _pr_by_scan(repo: str, name: str, get: Callable[[str], tuple[Any, str | None]]) -> int | None:
    """Returns the first open PR whose head is `autoloop/{name}[-hex]` or whose title starts `[Autoloop: {name}]`."""
    branch_re = re.compile(rf"^autoloop/{re.escape(name)}(-[0-9a-f]{{6,40}})?$")
    title_prefix = f"[Autoloop: {name}]"
    url: str | None = f"{_api_url()}/repos/{repo}/pulls?state=open&per_page=100"
    seen: set[str] = set()
    while url and url not in seen and len(seen) < MAX_PR_PAGES:
        seen.add(url)
        body, link = get(url)
        if not isinstance(body, list):
            return None
        for pr in (p for p in body if isinstance(p, dict)):
            head, title = pr.get("head"), pr.get("title")
            ref = (head.get("ref") or "") if isinstance(head, dict) else ""
            if branch_re.match(ref) or (isinstance(title, str) and title.startswith(title_prefix)):
                return pr.get("number")
        url = parse_link_header(link)
    return None


def _api_url() -> str:
    return (os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")


def _warn(message: str) -> None:
    print(f"WARNING: {message}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------------------


def _bootstrap_template_if_missing(root: Path) -> None:
    """Writes an unconfigured `example.md` (left uncommitted) when the programs folder is missing."""
    folder = root / PROGRAMS_DIR
    if folder.is_dir() or any((root / f).is_file() for f in FALLBACK_PROGRAMS):
        return
    folder.mkdir(parents=True, exist_ok=True)
    text = render("example_program.md.j2", sentinel=UNCONFIGURED_SENTINEL, programs_dir=PROGRAMS_DIR)
    (root / TEMPLATE_FILE).write_text(text, encoding="utf-8")
    print(f"BOOTSTRAPPED: created {TEMPLATE_FILE} locally (agent will create a draft PR)")


def _collect_programs(settings: Settings) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Returns program files in upstream order (folders, bare files, issues, fallbacks) and the issue programs."""
    files = [p.as_posix() for p in discover(settings.root)]
    issue_files, issue_programs = _fetch_issue_programs(settings, {get_program_name(f) for f in files})
    files += issue_files
    if not files:
        files = [f for f in FALLBACK_PROGRAMS if (settings.root / f).is_file()][:1]
    return files, issue_programs


def _fetch_issue_programs(settings: Settings, taken: set[str]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Returns the issue programs' files and {slug: info}; any API failure is only a warning."""
    if not settings.token or not settings.repo:
        print("  GITHUB_TOKEN or GITHUB_REPOSITORY not set: not looking for issue-based programs")
        return [], {}
    try:
        import github  # imported here: runs without a token never pay for it

        client = github.Github(
            auth=github.Auth.Token(settings.token),
            base_url=settings.api_url,
            per_page=100,
            timeout=30,
            seconds_between_requests=None,
            lazy=True,
        )
        return _write_issue_programs(discover_issue_programs(client, settings.repo, taken), settings.issue_dir)
    except Exception as err:  # noqa: BLE001 -- as upstream: an API failure must not block file programs
        print(f"  Warning: could not fetch issue-based programs: {err}")
        return [], {}


def _write_issue_programs(
    programs: Sequence[IssueProgram], folder: Path
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Writes each issue body to `{folder}/{slug}.md`; returns the files and upstream's {slug: info}."""
    folder.mkdir(parents=True, exist_ok=True)
    files: list[str] = []
    found: dict[str, dict[str, Any]] = {}
    for program in programs:
        path = folder / f"{program.slug}.md"
        path.write_text(program.body, encoding="utf-8")
        files.append(str(path))
        found[program.slug] = {"issue_number": program.number, "file": str(path), "title": program.title}
        print(f"  Found issue-based program: '{program.slug}' (issue #{program.number})")
    return files, found


def _duplicates(files: Sequence[str]) -> dict[str, list[str]]:
    by_name: dict[str, list[str]] = {}
    for f in files:
        by_name.setdefault(get_program_name(f), []).append(f)
    return {name: paths for name, paths in by_name.items() if len(paths) > 1}


def _survey(files: Sequence[str], settings: Settings, now: datetime) -> Survey:
    """Sorts every program into due, skipped or unconfigured."""
    duplicates = _duplicates(files)
    due: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    unconfigured: list[str] = []
    for name, paths in duplicates.items():
        print(f"ERROR: two programs named '{name}': {', '.join(paths)}; rename one (both skipped)", file=sys.stderr)
        skipped.append({"name": name, "reason": f"duplicate name: {', '.join(paths)}"})
    unique = {get_program_name(pf): pf for pf in files if get_program_name(pf) not in duplicates}
    for name, pf in unique.items():
        content = (settings.root / pf).read_text(encoding="utf-8", errors="replace")
        if is_unconfigured(content):
            unconfigured.append(name)
            continue
        outcome = _assess(name, pf, content, settings, now)
        (due if "file" in outcome else skipped).append(outcome)
    return Survey(due, skipped, unconfigured, unique, duplicates)


def _assess(name: str, pf: str, content: str, settings: Settings, now: datetime) -> dict[str, Any]:
    """Returns the program's `due` entry, or its `skipped` entry."""
    interval, target, bad_target, direction, bad_direction = parse_program_frontmatter(content)
    if bad_target is not None:
        print(f"  Warning: {name} has invalid target-metric value: {bad_target}")
    if bad_direction is not None:
        print(f"  Warning: {name} has invalid metric_direction value: {bad_direction!r} "
              "(must be 'higher' or 'lower'); defaulting to 'higher'")
    state = read_program_state(name, settings.memory_dir)
    if state:
        print(f"  {name}: last_run={state.get('last_run')}, iteration_count={state.get('iteration_count')}")
    raw_last_run = state.get("last_run")
    last_run = parse_timestamp(raw_last_run)
    if raw_last_run and last_run is None:
        _warn(f"{name}: Last Run {raw_last_run!r} is not an ISO timestamp; treating the program as never run")
    skip, reason = check_skip_conditions(state)
    if skip:
        return {"name": name, "reason": reason}
    if interval and last_run and now - last_run < interval:
        return {"name": name, "reason": "not due yet", "next_due": (last_run + interval).isoformat()}
    return {"name": name, "last_run": raw_last_run, "file": pf, "target_metric": target, "metric_direction": direction}


# ---------------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------------


def _settings(argv: Sequence[str]) -> Settings:
    parser = argparse.ArgumentParser(description="Pick the Autoloop program due now; write the selection as JSON.")
    parser.add_argument("--repo-root", type=Path, default=None, help="the repository (default: current directory)")
    args = parser.parse_args(list(argv))
    env = os.environ
    return Settings(
        root=(args.repo_root or Path.cwd()).resolve(),
        memory_dir=_memory_dir(None),
        output=Path(env.get("AUTOLOOP_OUTPUT") or OUTPUT_FILE),
        issue_dir=Path(env.get("AUTOLOOP_ISSUE_PROGRAMS_DIR") or ISSUE_PROGRAMS_DIR),
        api_url=_api_url(),
        token=env.get("GITHUB_TOKEN", ""),
        repo=env.get("GITHUB_REPOSITORY", ""),
        forced=env.get("AUTOLOOP_PROGRAM", "").strip(),
    )


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)


def _empty_result() -> dict[str, Any]:
    return {
        "selected": None,
        "selected_file": None,
        "selected_issue": None,
        "selected_target_metric": None,
        "selected_metric_direction": "higher",
        "state_file_size_bytes": 0,
        "state_file_max_bytes": STATE_FILE_MAX_BYTES,
        "issue_programs": {},
        "deferred": [],
        "skipped": [],
        "unconfigured": [],
        "no_programs": False,
        "not_due": False,
        "head_branch": None,
        "existing_pr": None,
    }


def run(argv: Sequence[str] = ()) -> int:
    """Runs the scheduler and returns its exit code."""
    settings = _settings(argv)
    settings.output.unlink(missing_ok=True)
    _bootstrap_template_if_missing(settings.root)
    files, issue_programs = _collect_programs(settings)
    if not files:
        print("NO_PROGRAMS_FOUND")
        _write_json(settings.output, {**_empty_result(), "due": [], "no_programs": True})
        return 0
    survey = _survey(files, settings, datetime.now(timezone.utc))
    result = _select(settings, survey, issue_programs)
    if result is None:
        return 1
    _write_json(settings.output, result)
    _print_summary(result)
    if not result["selected"] and not result["unconfigured"]:
        print("\nNo programs due this run. Exiting early.")
        return 1
    return 0


def _select(settings: Settings, survey: Survey, issue_programs: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Returns the output for the chosen program, or None (after printing ERROR) when forcing failed."""
    if settings.forced in survey.duplicates:
        print(f"ERROR: requested program '{settings.forced}' has two program files "
              f"({', '.join(survey.duplicates[settings.forced])}); rename one.")
        return None
    forced = settings.forced or None
    selected, selected_file, issue, target, direction, deferred, error = select_program(
        survey.due, forced, survey.all_programs, survey.unconfigured, issue_programs, root=settings.root
    )
    if error:
        print(f"ERROR: {error}")
        return None
    if settings.forced:
        print(f"FORCED: running program '{selected}' (manual dispatch)")
    skipped = [s for s in survey.skipped if s["name"] != selected]
    return {
        **_empty_result(),
        "selected": selected,
        "selected_file": selected_file,
        "selected_issue": issue,
        "selected_target_metric": target,
        "selected_metric_direction": direction,
        "state_file_size_bytes": get_state_file_size(selected, settings.memory_dir) if selected else 0,
        "issue_programs": {name: info["issue_number"] for name, info in issue_programs.items()},
        "deferred": deferred,
        "skipped": skipped,
        "unconfigured": survey.unconfigured,
        "not_due": selected is None and bool(skipped),
        "head_branch": f"autoloop/{selected}" if selected else None,
        "existing_pr": find_existing_pr_for_branch(settings.repo, selected, settings.token) if selected else None,
    }


def _print_summary(result: Mapping[str, Any]) -> None:
    print("=== Autoloop Program Check ===")
    print(f"Selected program:      {result['selected'] or '(none)'} ({result['selected_file'] or 'n/a'})")
    print(f"Deferred (next run):   {result['deferred'] or '(none)'}")
    print(f"Programs skipped:      {[s['name'] for s in result['skipped']] or '(none)'}")
    print(f"Programs unconfigured: {result['unconfigured'] or '(none)'}")


def main(argv: Sequence[str] | None = None) -> None:
    """Runs the scheduler like upstream's main(): returns on success, raises SystemExit otherwise."""
    code = run(argv or ())
    if code:
        sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
