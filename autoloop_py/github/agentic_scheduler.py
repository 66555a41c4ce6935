#!/usr/bin/env python3
"""Autoloop scheduler: picks the one program an Agentic Workflows run should iterate on.

Run it as `python3 -m autoloop_py.github.agentic_scheduler` (what `autoloop init` writes into autoloop.md) or
as upstream's `scripts/autoloop_scheduler.py`, which is this very file (a test keeps the two identical).

It uses the Python standard library only, so the file runs with a bare `python3` where autoloop_py is not
installed. It is the source of the rules it shares with the package: issue_programs.py takes its issue
slugs, its rule of which issue bodies a writer stands behind and the API calls that read them from here
(`issue_programs`, through PyGithub's transport). The rules the package's lower layers keep for themselves
(the schedule grammar in program/interval.py, the skip rules in loop/tick/schedule.py, program discovery
in program/model.py, the Machine State heading in markdown.py) are held to this file's by tests.

A drop-in replacement for upstream's `workflows/scripts/autoloop_scheduler.py` (githubnext/autoloop
438782f): same environment, same output file and keys, same exit codes, and the same importable
helpers with the same signatures and return shapes. The rules come from `autoloop_py.loop.tick.schedule`.

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
  7. Issue programs are read through the REST API (pagination via `Link`). Issues titled `[Autoloop: ...]`
     (autoloop's own program issues, upstream bug #50) are not programs, and an issue whose slug equals
     a file program's name gets `-<number>` appended like an issue-to-issue collision. Only an issue
     whose body a writer stands behind is a program (see `refusal`); the others are skipped with a
     warning. Without GITHUB_TOKEN or GITHUB_REPOSITORY no API call is made.
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
     text is ours (EXAMPLE_PROGRAM, kept here rather than in a template so that the file stands alone);
     like upstream's it has the sentinel.
 13. The no-programs JSON carries the full key set (plus upstream's `due: []`).
 14. `select_program` takes an optional keyword `root` to re-read a forced program's frontmatter
     relative to the repository; `read_program_state`/`get_state_file_size` default to
     AUTOLOOP_MEMORY_DIR. `main(argv=None)` reads no command line unless given one; it raises
     SystemExit for a non-zero exit code as upstream, and returns normally for exit code 0 (upstream
     raises SystemExit(0) when there are no programs).
 15. `selected_file` is relative to the repository root (upstream: to the working directory, which is
     the root in the workflow). The existing-PR lookup uses GITHUB_API_URL and stops after 50 pages.
 16. The file loads through importlib's `spec_from_file_location` + `exec_module` without being put in
     `sys.modules` (as a test harness may load upstream's script). That is why it has no `__future__`
     import of annotations: dataclasses looks string annotations up in `sys.modules`.
Kept as upstream: TODO/REPLACE anywhere marks a program unconfigured; `.autoloop/program.md` is named
`.autoloop`; `consecutive_errors` is never a skip reason; a plateau skip is permanent.
"""

import argparse
import json
import logging
import math
import os
import re
import sys
import unicodedata
import urllib.parse
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeAlias

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
MAX_LIST_PAGES = 50
UNCONFIGURED_SENTINEL = "<!-- AUTOLOOP:UNCONFIGURED -->"
PLATEAU_LENGTH = 5
PROGRAM_LABEL = "autoloop-program"
# The program issue autoloop opens for a file program carries PROGRAM_LABEL too; reading it back as
# a program would schedule `autoloop-x` beside `x` (upstream bug #50).
OWN_ISSUE_PREFIX = "[Autoloop: "
WRITE_ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR")
WRITE_PERMISSIONS = ("admin", "maintain", "write")
APPROVE_COMMAND = "/autoloop approve"
EDITS_QUERY = """
query($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    issue(number: $number) {
      userContentEdits(last: 100) { totalCount nodes { editedAt editor { login } } }
    }
  }
}
"""
EXAMPLE_PROGRAM = """{sentinel}
<!-- Autoloop skips this program until the line above is deleted. -->
<!-- The file name without .md is the program name: rename this file (e.g. to coverage.md)
     or move it to {programs_dir}/<name>/program.md to keep code beside it. -->
---
schedule: every 6h
# target-metric: 0.95
# metric_direction: higher
---

# Autoloop program

## Goal

REPLACE_ME: what should get better, and what "better" means.

## Target

Only modify these files:
- `REPLACE_ME/path/to/file.py`

Do not modify:
- the evaluation command, the tests, or any file not listed above.

## Evaluation

```bash
REPLACE_ME: a command that prints one JSON object such as {{"score": 0.73}}
```

The metric is `score`. Higher is better.
"""

logger = logging.getLogger(__name__)

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
_INTERVAL_UNITS = {"m": 1, "min": 1, "minute": 1, "minutes": 1, "h": 60, "hr": 60, "hour": 60, "hours": 60,
                   "d": 1440, "day": 1440, "days": 1440}
_NAMED_INTERVALS = {"hourly": timedelta(hours=1), "daily": timedelta(days=1), "weekly": timedelta(weeks=1)}
_EVERY_RE = re.compile(r"^(?:every\s+)?(\d+)\s*([a-z]+)$")
_ATX_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_NON_SLUG_RE = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class MachineSnapshot:
    """The scheduling fields of an upstream Machine State dict, typed for `autoloop_py.loop.tick.schedule`.

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
    body = _section_body(content, "machine state")
    if body is None:
        return {}
    state: dict[str, Any] = {}
    for key, value in _table_pairs(body):
        state[key] = None if value in _EMPTY_VALUES else value
    return _coerce_state(state)


def normalize_heading(text: str) -> str:
    """Returns a heading reduced for matching: no emoji or variation selectors, lowercase, single spaces."""
    text = unicodedata.normalize("NFKC", text).replace("\ufe0f", "")
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("So", "Sk", "Cf", "Mn"))
    text = text.replace("*", "").replace("`", "").replace("_", " ")
    return " ".join(text.lower().split())


def _headings(lines: Sequence[str]) -> Iterator[tuple[int, int, str]]:
    """Yields (line index, level, text) of each ATX heading outside fenced code blocks."""
    fence = ""
    for index, line in enumerate(lines):
        opened = _FENCE_RE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) \
                    and not line.strip()[len(opened.group(1)):].strip():
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        heading = _ATX_HEADING_RE.match(line)
        if heading:
            yield index, len(heading.group(1)), heading.group(2) or ""


def _section_body(content: str, key: str, level: int = 2) -> str | None:
    """Returns the text under the first heading (level 1 to `level`) whose normalised text is `key`, or None."""
    lines = content.splitlines(keepends=True)
    cuts = [(i, text) for i, depth, text in _headings(lines) if depth <= level]
    for n, (start, text) in enumerate(cuts):
        if normalize_heading(text) == key:
            end = cuts[n + 1][0] if n + 1 < len(cuts) else len(lines)
            return "".join(lines[start + 1:end])
    return None


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
        interval = parse_interval(str(s))
    except ValueError:
        interval = _upstream_schedule(str(s))
        if interval is None:
            _warn(f"unreadable schedule {s!r}: the program is always due; write e.g. `every 6h` or `daily`")
            return None
        _warn(f"schedule {s!r} read as every {interval} by its prefix; write e.g. `every 6h`")
    if interval is not None and not interval:
        _warn(f"schedule {s!r} is zero: the program is always due")
    return interval


def parse_interval(text: str | None) -> timedelta | None:
    """Returns the interval of a schedule (`every 6h`, `30 minutes`, `daily`...); None for no schedule.

    Raises ValueError for text it cannot read, and for a zero interval.
    """
    if text is None or not str(text).strip():
        return None
    value = " ".join(str(text).strip().lower().split())
    if value in _NAMED_INTERVALS:
        return _NAMED_INTERVALS[value]
    match = _EVERY_RE.match(value)
    if match and match.group(2) in _INTERVAL_UNITS:
        if int(match.group(1)) == 0:
            raise ValueError(f"schedule {text!r} is zero; give an interval of at least 1 minute, or no schedule")
        return timedelta(minutes=int(match.group(1)) * _INTERVAL_UNITS[match.group(2)])
    raise ValueError(f"unparseable schedule {text!r}; use `every N m|h|d`, `N hours`, `hourly`, `daily` or `weekly`")


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
        return as_utc(value)
    text = _plain(str(value or ""))
    if not text or text in _EMPTY_VALUES:
        return None
    try:
        moment = datetime.fromisoformat(re.sub(r"[Zz]$", "+00:00", text))
    except ValueError:
        return None
    return as_utc(moment)


def as_utc(moment: datetime) -> datetime:
    """Returns an aware UTC datetime (a naive one is taken as UTC)."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


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
    reason = skip_reason(machine_snapshot(state))
    return reason is not None, reason


def skip_reason(machine: MachineSnapshot) -> str | None:
    """Returns why a program must not run: completed, paused, or a plateau of 5 rejections in a row (None: it may)."""
    if machine.completed:
        return "completed: target metric reached"
    if machine.paused:
        return f"paused: {machine.pause_reason or 'unknown'}"
    recent = machine.recent_statuses[-PLATEAU_LENGTH:]
    if len(recent) == PLATEAU_LENGTH and all(s == "rejected" for s in recent):
        return f"plateau: {PLATEAU_LENGTH} consecutive rejections"
    return None


def slugify_issue_title(title: str, number: int | None = None) -> str:
    """Returns the program name for an issue title: lowercase runs of [a-z0-9] joined by single hyphens."""
    slug = _NON_SLUG_RE.sub("-", (title or "").lower()).strip("-")
    if slug:
        return slug
    return f"issue-{number}" if number is not None else "issue"


def assign_slugs(issues: Sequence[tuple[int, str]], taken: Iterable[str] = ()) -> dict[int, str]:
    """Returns a unique slug per issue number; a slug already used gets `-{number}` appended."""
    used = set(taken)
    slugs: dict[int, str] = {}
    for number, title in issues:
        base = slugify_issue_title(title, number)
        slug = base
        while slug in used:
            slug = f"{slug}-{number}"
        if slug != base:
            logger.warning("program name '%s' of issue #%s is taken; using '%s'", base, number, slug)
        used.add(slug)
        slugs[number] = slug
    return slugs


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
    first, *rest = sorted(due, key=lambda entry: overdue_key(entry.get("last_run")))
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


def overdue_key(last_run: str | datetime | None) -> tuple[int, datetime]:
    """Orders never-run (or unreadable) programs first, then the oldest Last Run (loop/tick/schedule.py's order too)."""
    moment = parse_timestamp(last_run)
    return (0, datetime.min.replace(tzinfo=timezone.utc)) if moment is None else (1, moment)


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
    import urllib.request  # here: the package imports this module's rules, and a run makes no such call

    try:
        request = urllib.request.Request(url, headers=dict(headers))
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8")), response.headers.get("Link")
    except (OSError, ValueError):
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
# Issue programs: who may define one (pure rules)
# ---------------------------------------------------------------------------------------------------
# An issue program's `## Evaluation` command runs in CI, so its body must come from someone with write
# access. The body is trusted from the moment a writer stands behind it, and distrusted from the
# moment anyone else could have put words in it:
# - an issue opened by a writer (author association OWNER, MEMBER or COLLABORATOR) is trusted from the
#   start; one opened by anyone else is distrusted from its creation;
# - each edit of the body by someone without write access (GitHub's edit history) distrusts it again
#   from that edit on; an edit by a writer changes nothing;
# - a writer approves the body as it stands by commenting `/autoloop approve` or by (re-)applying the
#   `autoloop-program` label; an approval counts when it is newer than the last distrusting event.
# When the edit history cannot be read, the program is not run (fail closed).


@dataclass(frozen=True)
class IssueProgram:
    """A program defined by a GitHub issue: its number, title, unique slug (the program name) and body."""

    number: int
    title: str
    slug: str
    body: str


@dataclass(frozen=True)
class Edit:
    """One revision of an issue body: who wrote it (None: a deleted account) and when."""

    editor: str | None
    at: datetime


@dataclass(frozen=True)
class Approval:
    """A writer standing behind the body as it was at `at`; `how`: "comment" or "label"."""

    by: str
    at: datetime
    how: str


@dataclass(frozen=True)
class IssueFacts:
    """What GitHub says about an issue program's body.

    Attributes:
      number: the issue number.
      author: the author's login.
      author_writes: whether the author has write access (by author association).
      created_at: when the issue was opened.
      edits: the body's revisions, any order.
      edits_complete: False when GitHub listed only the newest of more revisions.
      approvals: writers' approvals (comments, labels), any order.
    """

    number: int
    author: str
    author_writes: bool
    created_at: datetime
    edits: tuple[Edit, ...] = ()
    edits_complete: bool = True
    approvals: tuple[Approval, ...] = ()


def distrusted_since(facts: IssueFacts, is_writer: Callable[[str], bool]) -> datetime | None:
    """Returns the time of the last event that put words in the body without a writer (None: never happened)."""
    times = [] if facts.author_writes else [facts.created_at]
    times += [edit.at for edit in facts.edits if edit.editor is None or not is_writer(edit.editor)]
    if not facts.edits_complete and facts.edits:
        # Older revisions were not listed: one of them may be a stranger's.
        times.append(min(edit.at for edit in facts.edits))
    return max(times, default=None)


def refusal(facts: IssueFacts, is_writer: Callable[[str], bool]) -> str | None:
    """Returns why the issue program may not run, None when a writer stands behind its current body."""
    since = distrusted_since(facts, is_writer)
    if since is None or any(approval.at > since for approval in facts.approvals):
        return None
    why = "its author has no write access" if not facts.author_writes else "someone without write access edited it"
    return (f"issue #{facts.number} is not run: {why} (since {since:%Y-%m-%d %H:%M} UTC); a maintainer approves "
            f"the body as it stands by commenting `{APPROVE_COMMAND}` "
            "or by applying the `autoloop-program` label again")


def is_approval(body: str | None, association: str | None) -> bool:
    """Returns whether a comment approves the issue body: `/autoloop approve` on its first line, from a writer."""
    first = (body or "").strip().splitlines()[0].strip() if (body or "").strip() else ""
    return first.lower() == APPROVE_COMMAND and (association or "").upper() in WRITE_ASSOCIATIONS


def _is_program_issue(issue: Mapping[str, Any], note: Callable[[str], None]) -> bool:
    """Returns whether a listed issue is a program: not a pull request, not autoloop's own program issue."""
    if str(issue.get("title") or "").startswith(OWN_ISSUE_PREFIX):
        note(f"skipping issue #{issue.get('number')}: it is autoloop's program issue, not a program")
        return False
    return not issue.get("pull_request") and "/pull/" not in str(issue.get("html_url") or "")


# ---------------------------------------------------------------------------------------------------
# Issue programs: the GitHub REST and GraphQL calls (standard library only)
# ---------------------------------------------------------------------------------------------------


class ApiError(Exception):
    """A GitHub API call failed (HTTP error, network error, or an answer of the wrong shape)."""


class RestApi:
    """The few GitHub calls the scheduler makes, through urllib with a token."""

    per_page = 100

    def __init__(self, api_url: str, token: str, timeout: float = 30) -> None:
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        self._headers = {"Authorization": f"token {token}", "Accept": "application/vnd.github.v3+json",
                         "User-Agent": "autoloop-scheduler"}

    def request(self, url: str, payload: Mapping[str, Any] | None = None) -> tuple[Any, str | None]:
        """Returns (JSON body, Link header) of a GET (or a POST of `payload`); raises ApiError on any failure."""
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        headers = {**self._headers, **({"Content-Type": "application/json"} if data else {})}
        import urllib.request

        try:
            with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers),
                                        timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8")), response.headers.get("Link")
        except (OSError, ValueError) as err:
            raise ApiError(f"{url}: {err}") from err

    def pages(self, path: str) -> Iterator[dict[str, Any]]:
        """Yields the items of a paginated list (`Link: rel="next"`), at most MAX_LIST_PAGES pages."""
        sep = "&" if "?" in path else "?"
        url: str | None = f"{self.api_url}{path}{sep}per_page={self.per_page}"
        seen: set[str] = set()
        while url and url not in seen and len(seen) < MAX_LIST_PAGES:
            seen.add(url)
            body, link = self.request(url)
            if not isinstance(body, list):
                raise ApiError(f"{url}: expected a list")
            yield from (item for item in body if isinstance(item, dict))
            url = parse_link_header(link)

    def graphql(self, query: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        """Returns the `data` of a GraphQL query; raises ApiError on errors."""
        base = self.api_url[: -len("/v3")] if self.api_url.endswith("/api/v3") else self.api_url
        body, _ = self.request(f"{base}/graphql", {"query": query, "variables": dict(variables)})
        if not isinstance(body, dict) or body.get("errors") or not isinstance(body.get("data"), dict):
            raise ApiError(f"GraphQL: {body.get('errors') if isinstance(body, dict) else body}")
        return body["data"]


def _when(text: Any) -> datetime:
    moment = parse_timestamp(str(text or ""))
    if moment is None:
        raise ApiError(f"not a timestamp: {text!r}")
    return moment


def _login(user: Any) -> str | None:
    return user.get("login") if isinstance(user, dict) else None


class RepoWriters:
    """Answers "has this login write access to the repository?", one API call per login."""

    def __init__(self, api: RestApi, repo: str) -> None:
        self._api, self._repo = api, repo
        self._known: dict[str, bool] = {}

    def __call__(self, login: str) -> bool:
        if login not in self._known:
            try:
                body, _ = self._api.request(
                    f"{self._api.api_url}/repos/{self._repo}/collaborators/{urllib.parse.quote(login)}/permission")
                permission = body.get("permission") if isinstance(body, dict) else None
            except ApiError:
                permission = "none"
            self._known[login] = permission in WRITE_PERMISSIONS
        return self._known[login]


def issue_facts(api: RestApi, repo: str, issue: Mapping[str, Any], writers: Callable[[str], bool]) -> IssueFacts:
    """Returns what GitHub says about an issue's body: its author, its edit history and writers' approvals."""
    number = int(issue["number"])
    owner, name = repo.split("/", 1)
    data = api.graphql(EDITS_QUERY, {"owner": owner, "name": name, "number": number})
    found = ((data.get("repository") or {}).get("issue") or {}).get("userContentEdits")
    if not isinstance(found, dict):
        raise ApiError(f"issue #{number}: no edit history")
    nodes = [n for n in found.get("nodes") or [] if isinstance(n, dict)]
    edits = tuple(Edit(_login(n.get("editor")), _when(n.get("editedAt"))) for n in nodes)
    approvals = [Approval(_login(c.get("user")) or "", _when(c.get("created_at")), "comment")
                 for c in api.pages(f"/repos/{repo}/issues/{number}/comments")
                 if is_approval(c.get("body"), c.get("author_association"))]
    approvals += [Approval(_login(e.get("actor")) or "", _when(e.get("created_at")), "label")
                  for e in api.pages(f"/repos/{repo}/issues/{number}/events")
                  if e.get("event") == "labeled" and isinstance(e.get("label"), dict)
                  and e["label"].get("name") == PROGRAM_LABEL
                  and _login(e.get("actor")) and writers(_login(e["actor"]))]
    return IssueFacts(
        number=number,
        author=_login(issue.get("user")) or "",
        author_writes=str(issue.get("author_association") or "").upper() in WRITE_ASSOCIATIONS,
        created_at=_when(issue.get("created_at")),
        edits=edits,
        edits_complete=int(found.get("totalCount") or 0) <= len(edits),
        approvals=tuple(approvals),
    )


def issue_programs(
    api: RestApi, repo: str, taken: Iterable[str] = (), note: Callable[[str], None] = print
) -> tuple[list[IssueProgram], list[str]]:
    """Returns (the open `autoloop-program` issues a writer stands behind, as programs in API order, why each other
    labelled issue is not run); `note` hears which listed issues are no programs at all.

    Slugs are assigned over every labelled issue, so that approving one later renames no other. The package calls
    this with PyGithub's transport (github/issue_programs.py): the rules and the calls are one.
    """
    query = urllib.parse.urlencode({"state": "open", "labels": PROGRAM_LABEL})
    issues = [i for i in api.pages(f"/repos/{repo}/issues?{query}") if _is_program_issue(i, note)]
    slugs = assign_slugs([(int(i["number"]), str(i.get("title") or "")) for i in issues], taken)
    writers = RepoWriters(api, repo)
    trusted, refused = [], []
    for issue in issues:
        try:
            why = refusal(issue_facts(api, repo, issue, writers), writers)
        except (ApiError, KeyError, TypeError, ValueError) as err:
            why = f"issue #{issue['number']} is not run: its edit history and approvals could not be read ({err})"
        if why is None:
            number = int(issue["number"])
            title, body = str(issue.get("title") or ""), str(issue.get("body") or "")
            trusted.append(IssueProgram(number, title, slugs[number], body))
        else:
            refused.append(why)
    return trusted, refused


# ---------------------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------------------


def _bootstrap_template_if_missing(root: Path) -> None:
    """Writes an unconfigured `example.md` (left uncommitted) when the programs folder is missing."""
    folder = root / PROGRAMS_DIR
    if folder.is_dir() or any((root / f).is_file() for f in FALLBACK_PROGRAMS):
        return
    folder.mkdir(parents=True, exist_ok=True)
    text = EXAMPLE_PROGRAM.format(sentinel=UNCONFIGURED_SENTINEL, programs_dir=PROGRAMS_DIR)
    (root / TEMPLATE_FILE).write_text(text, encoding="utf-8")
    print(f"BOOTSTRAPPED: created {TEMPLATE_FILE} locally (agent will create a draft PR)")


def discover(root: Path) -> list[Path]:
    """Returns program.md paths (relative to root) in upstream order: folders, then bare files."""
    base = root / PROGRAMS_DIR
    if not base.is_dir():
        return []
    folders = sorted(p for p in base.iterdir() if (p / "program.md").is_file())
    bare = sorted(p for p in base.glob("*.md") if p.is_file())
    return [p.relative_to(root) for p in [f / "program.md" for f in folders] + bare]


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
        api = RestApi(settings.api_url, settings.token)
        trusted, refused = issue_programs(api, settings.repo, taken, lambda text: print(f"  {text}"))
        for why in refused:
            print(f"  Warning: {why}")
        return _write_issue_programs(trusted, settings.issue_dir)
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
