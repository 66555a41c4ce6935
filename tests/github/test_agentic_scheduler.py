"""Tests for autoloop_py/github/agentic_scheduler.py through upstream's path scripts/autoloop_scheduler.py: helper API,
return shapes and the bugs we fix."""

from __future__ import annotations

import importlib.util
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "autoloop_scheduler.py"


def _load_script() -> ModuleType:
    """Imports the script the way upstream's tests do (it is not part of the package)."""
    spec = importlib.util.spec_from_file_location("autoloop_scheduler", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


sched = _load_script()


def test_the_script_has_the_modules_api() -> None:
    from autoloop_py.github import agentic_scheduler

    assert sched.__all__ == agentic_scheduler.__all__
    assert all(callable(getattr(sched, name)) for name in sched.__all__)

STATE = """# Autoloop: alpha

🤖 *This file is maintained by the Autoloop agent. Maintainers may freely edit any section.*

---

## ⚙️ Machine State

> 🤖 *Updated automatically after each iteration. The pre-step scheduler reads this table — keep it parseable.*

| Field | Value |
|-------|-------|
| Last Run | 2026-05-01T10:00:00Z |
| Iteration Count | 12 |
| Best Metric | 0.364237 |
| Target Metric | — |
| Metric Direction | higher |
| Branch | `autoloop/alpha` |
| PR | #41 |
| Issue | — |
| Paused | false |
| Pause Reason | — |
| Completed | false |
| Completed Reason | — |
| Consecutive Errors | 1 |
| Recent Statuses | accepted, Rejected, error |

---

## 📋 Program Info

| Not | Machine |
|---|---|
| Paused | true |
"""


# -- parse_schedule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("every 6h", timedelta(hours=6)),
        ("Every 30m", timedelta(minutes=30)),
        ("every 6 hours", timedelta(hours=6)),
        ("  daily ", timedelta(hours=24)),
        ("weekly", timedelta(days=7)),
        ("every 1d", timedelta(days=1)),
        ("hourly", timedelta(hours=1)),
        (None, None),
        ("", None),
        ("   ", None),
    ],
)
def test_parse_schedule_reads_upstream_forms_and_a_superset(text: str | None, expected: timedelta | None) -> None:
    assert sched.parse_schedule(text) == expected


@pytest.mark.parametrize("text", ["sometimes", "every 1.5h", "every week"])
def test_parse_schedule_warns_about_garbage_and_returns_none(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert sched.parse_schedule(text) is None
    assert repr(text) in capsys.readouterr().err


def test_parse_schedule_keeps_upstreams_prefix_reading_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert sched.parse_schedule("every 6hamsters") == timedelta(hours=6)
    assert "'every 6hamsters'" in capsys.readouterr().err


def test_parse_schedule_zero_is_falsy_and_warned(capsys: pytest.CaptureFixture[str]) -> None:
    interval = sched.parse_schedule("every 0h")
    assert interval == timedelta(0) and not interval
    assert "always due" in capsys.readouterr().err


# -- parse_machine_state ----------------------------------------------------------------------------


def test_parse_machine_state_returns_upstreams_dict_shape() -> None:
    assert sched.parse_machine_state(STATE) == {
        "last_run": "2026-05-01T10:00:00Z",
        "iteration_count": 12,
        "best_metric": "0.364237",
        "target_metric": None,
        "metric_direction": "higher",
        "branch": "`autoloop/alpha`",
        "pr": "#41",
        "issue": None,
        "paused": False,
        "pause_reason": None,
        "completed": False,
        "completed_reason": None,
        "consecutive_errors": 1,
        "recent_statuses": ["accepted", "rejected", "error"],
    }


@pytest.mark.parametrize("heading", ["## ⚙\ufe0f Machine State", "## ⚙ Machine State", "## Machine State"])
def test_parse_machine_state_reads_the_heading_with_or_without_fe0f(heading: str) -> None:
    text = STATE.replace("## ⚙️ Machine State", heading)
    assert sched.parse_machine_state(text)["iteration_count"] == 12


def test_parse_machine_state_without_the_section_is_empty() -> None:
    assert sched.parse_machine_state("# Autoloop: x\n\n## 📋 Program Info\n\n| Paused | true |\n") == {}


def test_parse_machine_state_coerces_bad_counts_to_zero_and_absent_statuses_to_a_list() -> None:
    text = (
        "## ⚙️ Machine State\n\n| Field | Value |\n|---|---|\n"
        "| Iteration Count | lots |\n| Consecutive Errors | — |\n"
    )
    assert sched.parse_machine_state(text) == {"iteration_count": 0, "consecutive_errors": 0, "recent_statuses": []}


def test_parse_machine_state_reads_markup_that_upstream_misses() -> None:
    text = (
        "## ⚙️ Machine State\n\n| Field | Value | Note |\n|:---|---:|---|\n"
        "| **Paused** | `true` | by hand |\n| Completed | TRUE | |\n"
    )
    state = sched.parse_machine_state(text)
    assert state == {"paused": True, "completed": True, "recent_statuses": []}


# -- frontmatter ------------------------------------------------------------------------------------


def test_frontmatter_absent_gives_defaults() -> None:
    assert sched.parse_program_frontmatter("# Program\n\n## Goal\n") == (None, None, None, "higher", None)


def test_frontmatter_full() -> None:
    text = (
        "<!-- note -->\n<!-- more -->\n"
        "---\nschedule: every 2h\ntarget-metric: 0.95\nmetric_direction: Lower\n---\n# P\n"
    )
    assert sched.parse_program_frontmatter(text) == (timedelta(hours=2), 0.95, None, "lower", None)


def test_frontmatter_invalid_values_are_returned_for_the_warning() -> None:
    text = "---\ntarget-metric: high\nmetric-direction: sideways\n---\n"
    assert sched.parse_program_frontmatter(text) == (None, None, "high", "higher", "sideways")


def test_frontmatter_is_line_based_last_wins_and_ignores_commented_keys() -> None:
    text = "---\nschedule: daily\n# schedule: weekly\nschedule: every 3h\ntimeout-minutes: 30\n---\n"
    assert sched.parse_program_frontmatter(text)[0] == timedelta(hours=3)


def test_frontmatter_accepts_quotes_comments_and_underscore_keys() -> None:
    text = "---\nschedule: \"every 6h\"\ntarget_metric: '0.9'\nmetric-direction: lower  # loss\n---"
    assert sched.parse_program_frontmatter(text) == (timedelta(hours=6), 0.9, None, "lower", None)


def test_frontmatter_must_start_the_file() -> None:
    assert sched.parse_program_frontmatter("\n---\nschedule: daily\n---\n")[0] is None


def test_frontmatter_nan_target_is_invalid() -> None:
    assert sched.parse_program_frontmatter("---\ntarget-metric: nan\n---\n")[1:3] == (None, "nan")


# -- is_unconfigured --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<!-- AUTOLOOP:UNCONFIGURED -->\n# P\n", True),
        ("## Goal\nTODO: say what\n", True),
        ("## Goal\nREPLACE_WITH_GOAL\n", True),
        ("## Goal\nsee the REPLACEMENT policy\n", True),
        ("## Goal\nremove todo comments\n", False),
        ("## Goal\nMinimise loss.\n", False),
    ],
)
def test_is_unconfigured_follows_upstream(text: str, expected: bool) -> None:
    assert sched.is_unconfigured(text) is expected


# -- check_skip_conditions --------------------------------------------------------------------------


def test_skip_order_completed_then_paused_then_plateau() -> None:
    state = {"completed": True, "paused": True, "pause_reason": "x", "recent_statuses": ["rejected"] * 5}
    assert sched.check_skip_conditions(state) == (True, "completed: target metric reached")
    state["completed"] = False
    assert sched.check_skip_conditions(state) == (True, "paused: x")
    state["paused"] = False
    assert sched.check_skip_conditions(state) == (True, "plateau: 5 consecutive rejections")


def test_skip_plateau_needs_five_rejections_in_a_row() -> None:
    assert sched.check_skip_conditions({"recent_statuses": ["rejected"] * 4}) == (False, None)
    five_after_accept = ["accepted"] + ["rejected"] * 5
    assert sched.check_skip_conditions({"recent_statuses": five_after_accept})[0] is True
    broken = ["rejected"] * 2 + ["error"] + ["rejected"] * 2
    assert sched.check_skip_conditions({"recent_statuses": broken}) == (False, None)


def test_skip_paused_without_reason_says_unknown() -> None:
    assert sched.check_skip_conditions({"paused": True}) == (True, "paused: unknown")
    assert sched.check_skip_conditions({"paused": True, "pause_reason": None}) == (True, "paused: unknown")


def test_skip_reads_string_flags_by_value() -> None:
    assert sched.check_skip_conditions({"completed": "true"}) == (True, "completed: target metric reached")
    assert sched.check_skip_conditions({"paused": "false"}) == (False, None)
    assert sched.check_skip_conditions({}) == (False, None)


def test_skip_conditions_from_a_parsed_state() -> None:
    text = STATE.replace("| Paused | false |", "| Paused | true |")
    text = text.replace("| Pause Reason | — |", "| Pause Reason | consecutive errors |")
    assert sched.check_skip_conditions(sched.parse_machine_state(text)) == (True, "paused: consecutive errors")


# -- timestamps -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2025-01-15T12:00:00Z", datetime(2025, 1, 15, 12, tzinfo=timezone.utc)),
        ("2025-01-15T12:00:00", datetime(2025, 1, 15, 12, tzinfo=timezone.utc)),
        ("2025-01-15T14:00:00+02:00", datetime(2025, 1, 15, 12, tzinfo=timezone.utc)),
        ("2025-01-15T12:00:00.123Z", datetime(2025, 1, 15, 12, 0, 0, 123000, tzinfo=timezone.utc)),
        ("yesterday", None),
        ("—", None),
        (None, None),
    ],
)
def test_parse_timestamp_is_aware_utc(text: str | None, expected: datetime | None) -> None:
    parsed = sched.parse_timestamp(text)
    assert parsed == expected
    assert parsed is None or parsed.utcoffset() == timedelta(0)


# -- select_program ---------------------------------------------------------------------------------


def entry(name: str, last_run: str | None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "last_run": last_run, "file": f".autoloop/programs/{name}.md", **extra}


def test_select_never_run_first_then_oldest() -> None:
    due = [
        entry("b", "2026-01-02T00:00:00Z"),
        entry("a", "2026-01-01T00:00:00Z", target_metric=0.9, metric_direction="lower"),
        entry("new", None),
    ]
    assert sched.select_program(due) == ("new", ".autoloop/programs/new.md", None, None, "higher", ["a", "b"], None)
    assert sched.select_program(due[:2]) == ("a", ".autoloop/programs/a.md", None, 0.9, "lower", ["b"], None)


def test_select_nothing_due() -> None:
    assert sched.select_program([]) == (None, None, None, None, "higher", [], None)


def test_select_orders_timestamps_as_datetimes_not_strings() -> None:
    # 13:00+02:00 is 11:00Z, an hour older than 12:00Z, though it sorts after it as text.
    due = [entry("zulu", "2025-01-15T12:00:00Z"), entry("plus2", "2025-01-15T13:00:00+02:00")]
    assert sched.select_program(due)[0] == "plus2"


def test_select_accepts_a_naive_timestamp() -> None:
    due = [entry("aware", "2025-01-15T12:00:00Z"), entry("naive", "2025-01-15T11:00:00")]
    selected, *_, deferred, error = sched.select_program(due)
    assert (selected, deferred, error) == ("naive", ["aware"], None)


def test_select_reports_the_issue_of_an_issue_program() -> None:
    issues = {"speed": {"issue_number": 7, "file": "/tmp/x/speed.md", "title": "Speed"}}
    assert sched.select_program([entry("speed", None)], issue_programs=issues)[2] == 7
    assert sched.select_program([entry("speed", None)], issue_programs={"speed": 8})[2] == 8


def test_select_forced_bypasses_order_and_takes_settings_from_the_due_entry() -> None:
    due = [entry("a", None), entry("b", "2026-01-01T00:00:00Z", target_metric=1.5, metric_direction="lower")]
    programs = {"a": "a.md", "b": "b.md"}
    assert sched.select_program(due, "b", programs) == ("b", "b.md", None, 1.5, "lower", ["a"], None)


def test_select_forced_program_not_due_rereads_its_frontmatter(tmp_path: Path) -> None:
    (tmp_path / "p.md").write_text("---\ntarget-metric: 3\nmetric_direction: lower\n---\n# P\n")
    result = sched.select_program([entry("a", None)], "p", {"a": "a.md", "p": "p.md"}, root=tmp_path)
    assert result == ("p", "p.md", None, 3.0, "lower", ["a"], None)


def test_select_forced_unknown_is_an_error() -> None:
    result = sched.select_program([], "nope", {"a": "a.md", "b": "b.md"})
    error = "requested program 'nope' not found. Available programs: ['a', 'b']"
    assert result == (None, None, None, None, "higher", [], error)


def test_select_forced_unconfigured_is_an_error() -> None:
    result = sched.select_program([], "t", {"t": "t.md"}, ["t"])
    assert result[:6] == (None, None, None, None, "higher", [])
    assert result[6] == "requested program 't' is unconfigured (has placeholders)."


# -- find_existing_pr_for_branch --------------------------------------------------------------------


class FakeHttp:
    """Answers GETs from a table of URL substrings; records every URL asked for."""

    def __init__(self, answers: list[tuple[str, Any, str | None]]) -> None:
        self.answers = answers
        self.urls: list[str] = []

    def __call__(self, url: str, headers: Any) -> tuple[Any, str | None]:
        self.urls.append(url)
        assert headers["Authorization"] == "token tok"
        for needle, body, link in self.answers:
            if needle in url:
                return body, link
        return [], None


def test_existing_pr_by_head_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_API_URL", "http://api.test")
    http = FakeHttp([("head=", [{"number": 7}], None)])
    assert sched.find_existing_pr_for_branch("o/r", "alpha", "tok", http_get_json=http) == 7
    assert http.urls == ["http://api.test/repos/o/r/pulls?head=o%3Aautoloop%2Falpha&state=open"]


@pytest.mark.parametrize(
    "pr, expected",
    [
        ({"number": 3, "head": {"ref": "autoloop/alpha-1a2b3c"}, "title": "x"}, 3),
        ({"number": 4, "head": {"ref": "feature"}, "title": "[Autoloop: alpha] Iteration 2"}, 4),
        ({"number": 5, "head": {"ref": "autoloop/alpha-feature"}, "title": "x"}, None),
        ({"number": 6, "head": {"ref": "autoloop/alphabet"}, "title": "[Autoloop: alphabet]"}, None),
    ],
)
def test_existing_pr_by_scanning_open_prs(pr: dict[str, Any], expected: int | None) -> None:
    http = FakeHttp([("head=", [], None), ("state=open&per_page=100", [pr], None)])
    assert sched.find_existing_pr_for_branch("o/r", "alpha", "tok", http_get_json=http) == expected


def test_existing_pr_scan_follows_link_pages() -> None:
    second = [{"number": 9, "head": {"ref": "autoloop/alpha"}, "title": "t"}]
    http = FakeHttp(
        [
            ("head=", None, None),
            ("page=2", second, None),
            ("per_page=100", [{"number": 1, "head": {"ref": "x"}}], '<https://api.test/p?page=2>; rel="next"'),
        ]
    )
    assert sched.find_existing_pr_for_branch("o/r", "alpha", "tok", http_get_json=http) == 9
    assert len(http.urls) == 3


def test_existing_pr_errors_mean_none() -> None:
    def broken(url: str, headers: Any) -> tuple[Any, str | None]:
        raise OSError("network down")

    assert sched.find_existing_pr_for_branch("o/r", "alpha", "tok", http_get_json=broken) is None
    assert sched.find_existing_pr_for_branch("o/r", "alpha", "tok", http_get_json=lambda u, h: (None, None)) is None


def test_existing_pr_needs_repo_name_and_token() -> None:
    http = FakeHttp([])
    assert sched.find_existing_pr_for_branch("o/r", "alpha", "", http_get_json=http) is None
    assert http.urls == []


# -- names, slugs, links ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, name",
    [
        (".autoloop/programs/circle_packing/program.md", "circle_packing"),
        (".autoloop/programs/coverage.md", "coverage"),
        ("/tmp/gh-aw/issue-programs/reduce-latency.md", "reduce-latency"),
        ("program.md", "program"),
        (Path(".autoloop/programs/x/program.md"), "x"),
    ],
)
def test_get_program_name(path: str | Path, name: str) -> None:
    assert sched.get_program_name(path) == name


@pytest.mark.parametrize(
    "title, number, slug",
    [
        ("Reduce Latency!", 3, "reduce-latency"),
        ("  --Faster__Build  v2-- ", 3, "faster-build-v2"),
        ("Café ☕ speed", 3, "caf-speed"),
        ("", 12, "issue-12"),
        ("!!!", None, "issue"),
    ],
)
def test_slugify_issue_title(title: str, number: int | None, slug: str) -> None:
    assert sched.slugify_issue_title(title, number) == slug


def test_issue_slug_collisions_get_the_issue_number() -> None:
    assert sched.assign_slugs([(4, "Speed up"), (9, "speed-up"), (11, "")], taken=["coverage"]) == {
        4: "speed-up",
        9: "speed-up-9",
        11: "issue-11",
    }


@pytest.mark.parametrize(
    "header, expected",
    [
        (
            '<https://api.github.com/repositories/1/issues?page=2>; rel="next", '
            '<https://api.github.com/repositories/1/issues?page=5>; rel="last"',
            "https://api.github.com/repositories/1/issues?page=2",
        ),
        ('<https://x/p?page=1>; rel="prev", <https://x/p?page=3>; rel="next"', "https://x/p?page=3"),
        ('<https://x/p?page=1>; rel="first"', None),
        ("", None),
        (None, None),
    ],
)
def test_parse_link_header(header: str | None, expected: str | None) -> None:
    assert sched.parse_link_header(header) == expected


# -- state files ------------------------------------------------------------------------------------


def test_read_program_state_and_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "alpha.md").write_text(STATE, encoding="utf-8")
    assert sched.read_program_state("alpha", tmp_path)["pr"] == "#41"
    assert sched.get_state_file_size("alpha", str(tmp_path)) == len(STATE.encode())
    assert sched.read_program_state("beta", tmp_path) == {}
    assert "beta: no state file found (first run)" in capsys.readouterr().out
    assert sched.get_state_file_size("beta", tmp_path) == 0


def test_state_helpers_default_to_the_memory_dir_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOLOOP_MEMORY_DIR", str(tmp_path))
    (tmp_path / "alpha.md").write_text(STATE, encoding="utf-8")
    assert sched.read_program_state("alpha")["iteration_count"] == 12
    assert sched.get_state_file_size("alpha") > 0


# -- one source of truth: the file stands alone, and the package's own copies of its rules agree ----------


def test_the_scheduler_imports_the_standard_library_only() -> None:
    import ast

    from autoloop_py.github import agentic_scheduler

    tree = ast.parse(Path(agentic_scheduler.__file__).read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__"}
    assert imported and imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


@pytest.mark.parametrize("text", [
    None, "", "   ", "every 6h", "Every 6H", "every  30 m", "30 minutes", "2 days", "every 1d", "hourly", "DAILY",
    "weekly", "every 0h", "every 6hamsters", "bogus", "monthly", "every 6", "90 min", "every 3 hr",
])
def test_the_schedule_grammar_is_the_packages(text: str | None) -> None:
    from autoloop_py.program.interval import parse_schedule

    def outcome(parse: Any) -> object:
        try:
            return parse(text)
        except ValueError as err:
            return type(err)

    assert outcome(sched.parse_interval) == outcome(parse_schedule)


@pytest.mark.parametrize("fields", [
    {}, {"completed": "true"}, {"paused": "true", "pause_reason": "flaky"}, {"paused": "true"},
    {"recent_statuses": "rejected, rejected, rejected, rejected, rejected"},
    {"recent_statuses": "rejected, rejected, rejected, rejected"},
    {"recent_statuses": "accepted, rejected, rejected, rejected, rejected, rejected"},
    {"recent_statuses": "rejected, rejected, rejected, rejected, rejected, accepted"},
    {"completed": "true", "paused": "true", "pause_reason": "x"},
])
def test_the_skip_rules_are_the_packages(fields: dict[str, str]) -> None:
    from autoloop_py.loop.tick import schedule

    snapshot = sched.machine_snapshot(fields)
    assert sched.skip_reason(snapshot) == schedule.skip_reason(snapshot)
    assert sched.PLATEAU_LENGTH == schedule.PLATEAU_LENGTH


def test_discovery_sentinel_and_headings_are_the_packages(tmp_path: Path) -> None:
    from autoloop_py import markdown
    from autoloop_py.github import client
    from autoloop_py.program import model

    for rel in ("b/program.md", "a/program.md", "c.md", "a.md", "empty/notes.md", "nested/deeper/program.md"):
        (tmp_path / ".autoloop/programs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / ".autoloop/programs" / rel).write_text("# p\n")
    assert sched.discover(tmp_path) == model.discover(tmp_path)
    assert sched.UNCONFIGURED_SENTINEL == model.UNCONFIGURED_SENTINEL
    assert sched.WRITE_ASSOCIATIONS == client.WRITE_ASSOCIATIONS
    for heading in ("⚙️ Machine State", "⚙ Machine State", "**Machine** `State`", "machine_state", "Machine  State 🧬"):
        assert sched.normalize_heading(heading) == markdown.normalize_heading(heading)


@pytest.mark.parametrize("text", [
    STATE,
    "```\n## ⚙️ Machine State\n| Paused | true |\n```\n\n## ⚙️ Machine State\n\n| Paused | false |\n",
    "# ⚙️ Machine State\n| Paused | true |\n## Next\n| Paused | false |\n",
    "## Machine State ##\n| Completed | true |\n### Sub\n| Paused | true |\n## Other\n| Paused | false |\n",
    "~~~md\n## Machine State\n~~~\n| Paused | true |\n",
    "    ## Machine State\n| Paused | true |\n",
])
def test_the_machine_state_section_is_found_as_the_packages_markdown_finds_it(text: str) -> None:
    from autoloop_py import markdown

    section = next((s for s in markdown.split_sections(text) if s.key == "machine state"), None)
    assert sched._section_body(text, "machine state") == (section.body if section else None)
