"""Tests for program.py: discovery, frontmatter, sections, Target allowlist and errors with lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.program.frontmatter import parse_size
from autoloop_py.errors import ProgramError
from autoloop_py.program.model import check_all, discover, load_program, load_programs
from autoloop_py.program.target import glob_match, target_files

PROGRAM = """\
---
schedule: every 6h
target-metric: 1.4
metric_direction: higher
evaluation-timeout: 30
repeats: 3
min-delta: 0.001
seed: 7
proposer: tune
custom-key: kept
---

# Demo

## Goal

Make it faster.

## Target

Only modify:
- `code/search.py` — the search
- `code/lib/*.py`

Do NOT modify:
- `code/evaluate.py`

## Evaluation

```bash
python3 code/evaluate.py
```

The metric is `combined_score`.

## Evolution Strategy

Plain hill climbing.
"""


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write(tmp_path, ".autoloop/programs/demo/program.md", PROGRAM)
    write(tmp_path, ".autoloop/programs/demo/code/search.py", "x = 1\n")
    write(tmp_path, ".autoloop/programs/demo/code/evaluate.py", "print('{}')\n")
    write(tmp_path, ".autoloop/programs/demo/code/lib/util.py", "y = 2\n")
    return tmp_path


def test_parses_frontmatter_sections_and_target(repo: Path) -> None:
    program = load_program(repo, Path(".autoloop/programs/demo/program.md"))
    assert program.name == "demo"
    assert program.goal == "Make it faster."
    assert program.config.schedule == "every 6h"
    assert program.config.target_metric == 1.4
    assert program.config.repeats == 3 and program.config.seed == 7 and program.config.min_delta == 0.001
    assert program.config.evaluation_timeout == 30.0
    assert program.config.extra == {"custom-key": "kept"}
    assert program.direction == "higher"
    assert program.evaluation is not None
    assert program.evaluation.command == "python3 code/evaluate.py"
    assert program.evaluation.metric == "combined_score"
    assert program.strategy_text == "Plain hill climbing."
    assert program.target.include == (".autoloop/programs/demo/code/search.py", ".autoloop/programs/demo/code/lib/*.py")
    assert program.target.exclude == (".autoloop/programs/demo/code/evaluate.py",)
    assert not program.unconfigured


def test_target_allows(repo: Path) -> None:
    target = load_program(repo, Path(".autoloop/programs/demo/program.md")).target
    assert target.allows(".autoloop/programs/demo/code/search.py")
    assert target.allows(".autoloop/programs/demo/code/lib/new.py")
    assert not target.allows(".autoloop/programs/demo/code/evaluate.py")
    assert not target.allows(".autoloop/programs/demo/program.md")
    assert not target.allows(".autoloop/programs/demo/code/lib/../../program.md")
    assert not target.allows("/etc/passwd")
    assert target_files(target, repo) == [
        ".autoloop/programs/demo/code/lib/util.py",
        ".autoloop/programs/demo/code/search.py",
    ]


def test_lower_is_better_from_prose(repo: Path) -> None:
    text = PROGRAM.replace("metric_direction: higher\n", "").replace("`combined_score`.", "`loss`. Lower is better.")
    write(repo, ".autoloop/programs/demo/program.md", text)
    assert load_program(repo, Path(".autoloop/programs/demo/program.md")).direction == "lower"


def test_nested_do_not_modify_list(repo: Path) -> None:
    text = PROGRAM.replace("Do NOT modify:\n- `code/evaluate.py`", "- Do NOT modify:\n  - `code/evaluate.py`")
    write(repo, ".autoloop/programs/demo/program.md", text)
    target = load_program(repo, Path(".autoloop/programs/demo/program.md")).target
    assert target.exclude == (".autoloop/programs/demo/code/evaluate.py",)


def test_bare_program_paths_are_repo_relative(repo: Path) -> None:
    write(repo, "src/app.py", "a = 1\n")
    write(repo, ".autoloop/programs/bare.md", PROGRAM.replace("`code/search.py`", "`src/app.py`").replace("- `code/lib/*.py`\n", ""))
    program = load_program(repo, Path(".autoloop/programs/bare.md"))
    assert program.directory is None
    assert program.target.include == ("src/app.py",)


@pytest.mark.parametrize(
    "edit, message, line",
    [
        (("repeats: 3", "repeats: three"), "frontmatter `repeats`: must be a whole number >= 1, got 'three'", 6),
        (("schedule: every 6h", "schedule: [every"), "invalid YAML frontmatter", None),
        (("The metric is `combined_score`.", "Score printed."), "does not name the metric", 28),
        (("`combined_score`.", "`error`."), "the metric cannot be named `error`: an evaluation's `error` key", 34),
        (("`combined_score`.", "`Feedback`."), "the metric cannot be named `Feedback`", 34),
        (("```bash\npython3 code/evaluate.py\n```", "run it"), "no ```bash code block", 28),
        (("- `code/search.py` — the search", "- `code/nothing.py`"), "Target `code/nothing.py` matches nothing", 22),
    ],
)
def test_errors_name_file_and_line(repo: Path, edit: tuple[str, str], message: str, line: int | None) -> None:
    write(repo, ".autoloop/programs/demo/program.md", PROGRAM.replace(*edit))
    _, problems = check_all(repo)
    assert problems, "expected a problem"
    assert message in problems[0].message
    assert problems[0].path == Path(".autoloop/programs/demo/program.md")
    if line is not None:
        assert problems[0].line == line
    assert str(problems[0]).startswith(".autoloop/programs/demo/program.md:")


def test_missing_sections_all_reported(repo: Path) -> None:
    write(repo, ".autoloop/programs/demo/program.md", "# Demo\n\nNothing here.\n")
    _, problems = check_all(repo)
    messages = " | ".join(p.message for p in problems)
    assert "missing `## Target`" in messages
    assert "missing `## Evaluation`" in messages
    assert "missing `## Goal`" in messages


def test_unconfigured_template(repo: Path) -> None:
    write(repo, ".autoloop/programs/example.md", "<!-- AUTOLOOP:UNCONFIGURED -->\n# Example\n\n## Goal\n\nTODO\n")
    programs, problems = check_all(repo)
    assert not problems
    assert [p.name for p in programs if p.unconfigured] == ["example"]


def test_discovery_order_and_duplicate_names(repo: Path) -> None:
    write(repo, ".autoloop/programs/alpha/program.md", PROGRAM)
    write(repo, ".autoloop/programs/zeta.md", PROGRAM)
    assert [p.as_posix() for p in discover(repo)] == [
        ".autoloop/programs/alpha/program.md",
        ".autoloop/programs/demo/program.md",
        ".autoloop/programs/zeta.md",
    ]
    write(repo, ".autoloop/programs/demo.md", PROGRAM)
    with pytest.raises(ProgramError, match="two programs are named 'demo'"):
        load_programs(repo)


@pytest.mark.parametrize("second", [".autoloop/programs/demo.md", ".autoloop/programs/Demo/program.md"])
def test_a_name_used_twice_loads_neither_program(repo: Path, second: str) -> None:
    write(repo, second, PROGRAM)
    write(repo, ".autoloop/programs/other.md", PROGRAM.replace("`code/search.py`", "`.autoloop/programs/demo/code/search.py`")
          .replace("- `code/lib/*.py`\n", "").replace("`code/evaluate.py`", "`.autoloop/programs/demo/code/evaluate.py`"))
    programs, problems = check_all(repo)
    assert [p.name for p in programs] == ["other"]
    assert sorted(p.path.as_posix() for p in problems) == sorted([".autoloop/programs/demo/program.md", second])
    assert all("two programs are named" in p.message and "neither runs" in p.message for p in problems)


@pytest.mark.parametrize(
    "name, reason",
    [
        ("worktrees", "reserved"),
        ("Locks", "reserved"),
        ("HEAD", "reserved"),
        ("a..b", "`..`"),
        ("nightly.lock", "`.lock`"),
        ("-dash", "outside letters"),
        ("spa ce", "outside letters"),
        ("ünïcode", "outside letters"),
        ("x" * 65, "longer than 64"),
    ],
)
def test_unsafe_program_names_are_an_error_naming_the_file(tmp_path: Path, name: str, reason: str) -> None:
    write(tmp_path, f".autoloop/programs/{name}/program.md", PROGRAM)
    write(tmp_path, f".autoloop/programs/{name}/code/search.py", "x = 1\n")
    write(tmp_path, f".autoloop/programs/{name}/code/lib/util.py", "y = 2\n")
    programs, problems = check_all(tmp_path)
    assert programs == [] and len(problems) == 1
    assert reason in problems[0].message and "rename the folder" in problems[0].message
    assert problems[0].path == Path(f".autoloop/programs/{name}/program.md")


@pytest.mark.parametrize("name", ["demo", "a.b_c-1", "X9"])
def test_safe_program_names_load(tmp_path: Path, name: str) -> None:
    write(tmp_path, f".autoloop/programs/{name}/program.md", PROGRAM)
    write(tmp_path, f".autoloop/programs/{name}/code/search.py", "x = 1\n")
    write(tmp_path, f".autoloop/programs/{name}/code/lib/util.py", "y = 2\n")
    assert [p.name for p in load_programs(tmp_path)] == [name]


@pytest.mark.parametrize(
    "edit, message",
    [
        (("evaluation-timeout: 30", "evaluation-timeout: .inf"), "frontmatter `evaluation-timeout`: must be a finite number"),
        (("evaluation-timeout: 30", "evaluation-timeout: 0"), "frontmatter `evaluation-timeout`: must be a number above 0"),
        (("evaluation-timeout: 30", "evaluation-timeout: -5"), "must be a number above 0"),
        (("min-delta: 0.001", "min-delta: .nan"), "must be a finite number"),
        (("schedule: every 6h", "schedule: every 0m"), "frontmatter `schedule`: schedule 'every 0m' is zero"),
        (("schedule: every 6h", "schedule: sometimes"), "frontmatter `schedule`: unparseable schedule 'sometimes'"),
        (("seed: 7", "max-file-bytes: 0"), "frontmatter `max-file-bytes`: must be a whole number >= 1"),
    ],
)
def test_frontmatter_numbers_must_be_usable(repo: Path, edit: tuple[str, str], message: str) -> None:
    write(repo, ".autoloop/programs/demo/program.md", PROGRAM.replace(*edit))
    programs, problems = check_all(repo)
    assert programs == [] and message in problems[0].message, problems
    assert str(problems[0]).startswith(".autoloop/programs/demo/program.md:")


def test_max_file_bytes_defaults_to_one_mebibyte_and_can_be_set(repo: Path) -> None:
    assert load_program(repo, Path(".autoloop/programs/demo/program.md")).config.max_file_bytes == 1 << 20
    write(repo, ".autoloop/programs/demo/program.md", PROGRAM.replace("seed: 7", "max-file-bytes: 2048"))
    assert load_program(repo, Path(".autoloop/programs/demo/program.md")).config.max_file_bytes == 2048


@pytest.mark.parametrize(
    "path, message",
    [
        ("../../../outside.py", "holds `..`"),
        ("code/../../demo/code/search.py", "holds `..`"),
        ("/etc/passwd", "is an absolute path"),
        ("code/link.py", "leads outside the repository through a symbolic link (.autoloop/programs/demo/code/link.py)"),
        ("code/linked/*.py", "leads outside the repository through a symbolic link"),
    ],
)
def test_target_paths_that_leave_the_repository_are_an_error(repo: Path, tmp_path_factory: pytest.TempPathFactory,
                                                             path: str, message: str) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.py").write_text("token = 1\n")
    (repo / ".autoloop/programs/demo/code/link.py").symlink_to(outside / "secret.py")
    (repo / ".autoloop/programs/demo/code/linked").symlink_to(outside, target_is_directory=True)
    write(repo, "outside.py", "x = 1\n")
    write(repo, ".autoloop/programs/demo/program.md", PROGRAM.replace("`code/lib/*.py`", f"`{path}`"))
    programs, problems = check_all(repo)
    assert programs == []
    assert len(problems) == 1 and problems[0].message.startswith(f"Target `{path}` {message}"), problems
    assert problems[0].line == 23  # the line of `- `<path>`` in program.md


@pytest.mark.parametrize(
    "pattern, path, expected",
    [
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/sub/a.py", False),
        ("src/**/*.py", "src/sub/a.py", True),
        ("src/**/*.py", "src/a.py", True),
        ("tests/**", "tests/x/y.txt", True),
        ("a?.py", "ab.py", True),
    ],
)
def test_glob_match(pattern: str, path: str, expected: bool) -> None:
    assert glob_match(pattern, path) is expected


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_PIECES = st.sampled_from(
    ["---\n", "schedule: every 6h\n", "repeats: [\n", "## Goal\n", "## Target\n", "- `code/search.py`\n",
     "## Evaluation\n", "```bash\n", "```\n", "The metric is `x`.\n", "Do NOT modify:\n", "<!-- AUTOLOOP:UNCONFIGURED -->\n",
     "\x00\x01\xff", "\r\n", "# Title\n", "|a|b|\n"]
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=400), st.lists(_PIECES, max_size=25).map("".join)))
def test_random_program_text_parses_or_names_the_problem(tmp_path: Path, text: str) -> None:
    write(tmp_path, ".autoloop/programs/fuzz/code/search.py", "x = 1\n")
    write(tmp_path, ".autoloop/programs/fuzz/program.md", text)
    programs, problems = check_all(tmp_path)
    assert all(isinstance(p, ProgramError) for p in problems)
    assert len(programs) + len({str(p.path) for p in problems}) >= 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_random_bytes_give_a_program_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / ".autoloop/programs/fuzz/program.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    _, problems = check_all(tmp_path)
    assert all(isinstance(p, ProgramError) and p.path is not None for p in problems)


def test_binary_program_md_is_reported(tmp_path: Path) -> None:
    write(tmp_path, ".autoloop/programs/fuzz/code/x.py", "")
    (tmp_path / ".autoloop/programs/fuzz/program.md").write_bytes(b"# T\n\xff\xfe\x00junk")
    _, problems = check_all(tmp_path)
    assert [str(p) for p in problems] == [".autoloop/programs/fuzz/program.md: not UTF-8 text (byte 4); save the file as UTF-8"]


# --- upstream autoloop's program format -------------------------------------------------------


def test_lenient_upstream_values_are_warnings_saying_what_was_assumed(repo: Path) -> None:
    text = PROGRAM.replace("metric_direction: higher", "metric_direction: sideways")
    text = text.replace("target-metric: 1.4", "target-metric: soon")
    write(repo, ".autoloop/programs/demo/program.md", text)
    programs, problems = check_all(repo)
    assert problems == []
    (program,) = programs
    assert program.direction == "higher" and program.config.target_metric is None
    lenient = [w for w in program.warnings if "unknown frontmatter key" not in w]
    direction, target = sorted(lenient, key=lambda w: "metric_direction" not in w)
    assert direction.startswith(".autoloop/programs/demo/program.md:4: frontmatter `metric_direction`")
    assert "sideways" in direction and "assuming" in direction and "higher" in direction
    assert target.startswith(".autoloop/programs/demo/program.md:3: frontmatter `target-metric`")
    assert "never completes" in target


def test_an_infinite_target_metric_is_ignored_with_a_warning(repo: Path) -> None:
    write(repo, ".autoloop/programs/demo/program.md", PROGRAM.replace("target-metric: 1.4", "target-metric: -.inf"))
    programs, problems = check_all(repo)
    assert problems == [] and programs[0].config.target_metric is None
    assert any("frontmatter `target-metric`" in w and "never completes" in w for w in programs[0].warnings)


def test_an_unusable_timeout_minutes_is_ignored_with_a_warning_as_upstream(repo: Path) -> None:
    # The CI job's limit, not ours to enforce: upstream reads it leniently, and so do we.
    write(repo, ".autoloop/programs/demo/program.md", PROGRAM.replace("evaluation-timeout: 30", "timeout-minutes: 0"))
    programs, problems = check_all(repo)
    assert problems == []
    (program,) = programs
    assert program.config.timeout_minutes is None
    assert any("frontmatter `timeout-minutes`" in w and "ignoring it" in w for w in program.warnings), program.warnings


@pytest.mark.parametrize(
    ("lines", "seconds"),
    [
        ("timeout-minutes: 10", 600.0),  # upstream's programs give only the job's limit: the evaluation may use it
        ("timeout_minutes: 0.5", 30.0),
        ("timeout-minutes: 10\nevaluation-timeout: 45", 45.0),  # ours, when given, is the evaluation's
        ("evaluation-timeout: 45\ntimeout-minutes: 10", 45.0),
        ("timeout-minutes: 0", 300.0),  # unusable: ignored, so the default stands
        ("schedule: daily", 300.0),
    ],
)
def test_timeout_minutes_is_the_evaluation_timeout_unless_one_is_given(repo: Path, lines: str, seconds: float) -> None:
    write(repo, ".autoloop/programs/demo/program.md", PROGRAM.replace("evaluation-timeout: 30", lines))
    programs, problems = check_all(repo)
    assert problems == [] and programs[0].config.evaluation_timeout == seconds


def test_sideways_direction_defers_to_the_evaluation_prose(repo: Path) -> None:
    text = PROGRAM.replace("metric_direction: higher", "metric_direction: sideways")
    write(repo, ".autoloop/programs/demo/program.md", text.replace("`combined_score`.", "`loss`. Lower is better."))
    assert load_program(repo, Path(".autoloop/programs/demo/program.md")).direction == "lower"


def test_headings_match_by_their_leading_words(repo: Path) -> None:
    text = PROGRAM.replace("## Evolution Strategy", "## Evolution Strategy (inspired by OpenEvolve)")
    text = text.replace("## Target", "## Target files")
    write(repo, ".autoloop/programs/demo/program.md", text.replace("## Goal", "## Goal: speed"))
    program = load_program(repo, Path(".autoloop/programs/demo/program.md"))
    assert program.strategy_text == "Plain hill climbing."
    assert program.goal == "Make it faster."
    assert program.target.include[0] == ".autoloop/programs/demo/code/search.py"


def test_a_longer_word_is_not_a_leading_word(repo: Path) -> None:
    write(repo, ".autoloop/programs/demo/program.md", PROGRAM.replace("## Goal", "## Goalkeeping"))
    _, problems = check_all(repo)
    assert [p.message for p in problems] == ["missing `## Goal` section (what should improve?)"]


def test_marker_names_and_code_in_target_bullets_are_not_paths(repo: Path) -> None:
    bullets = (
        "- `code/search.py` -- the search (only code between `EVOLVE-BLOCK-START` and `EVOLVE-BLOCK-END`)\n"
        "- `code/lib/*.py`\n"
    )
    excluded = "- `code/evaluate.py`\n- The `run_search` and `f(x, y)` helpers outside the block in `search.py`\n"
    text = PROGRAM.replace("- `code/search.py` — the search\n- `code/lib/*.py`\n", bullets)
    write(repo, ".autoloop/programs/demo/program.md", text.replace("- `code/evaluate.py`\n", excluded))
    programs, problems = check_all(repo)
    assert problems == []
    target = programs[0].target
    assert target.include == (".autoloop/programs/demo/code/search.py", ".autoloop/programs/demo/code/lib/*.py")
    assert target.exclude == (".autoloop/programs/demo/code/evaluate.py", ".autoloop/programs/demo/search.py")


def test_root_relative_target_paths_of_a_folder_program(repo: Path) -> None:
    text = PROGRAM.replace("`code/search.py`", "`.autoloop/programs/demo/code/search.py`")
    write(repo, ".autoloop/programs/demo/program.md", text)
    target = load_program(repo, Path(".autoloop/programs/demo/program.md")).target
    assert target.include[0] == ".autoloop/programs/demo/code/search.py"


def test_prose_target_naming_a_directory(repo: Path) -> None:
    write(repo, "tests/test_a.py", "def test_a():\n    pass\n")
    write(repo, "src/app.py", "a = 1\n")
    target_section = (
        "## Target\n\nOnly modify or create files in the test directory (e.g., `tests/`).\n\n"
        "Do NOT modify:\n- Source code (only tests)\n- CI/CD workflows\n\n"
    )
    start, end = PROGRAM.index("## Target"), PROGRAM.index("## Evaluation")
    write(repo, ".autoloop/programs/coverage.md", PROGRAM[:start] + target_section + PROGRAM[end:])
    program = load_program(repo, Path(".autoloop/programs/coverage.md"))
    assert program.target.include == ("tests/",)
    assert program.target.allows("tests/test_new.py") and program.target.allows("tests/unit/test_b.py")
    assert not program.target.allows("src/app.py") and not program.target.allows("tests_other.py")
    assert target_files(program.target, repo) == ["tests/test_a.py"]


def test_unparseable_target_is_still_an_error_with_its_line(repo: Path) -> None:
    start, end = PROGRAM.index("## Target"), PROGRAM.index("## Evaluation")
    text = PROGRAM[:start] + "## Target\n\nWhatever seems best, e.g. `EVOLVE-BLOCK-START`.\n\n" + PROGRAM[end:]
    write(repo, ".autoloop/programs/demo/program.md", text)
    _, problems = check_all(repo)
    assert [(p.message, p.line) for p in problems] == [("`## Target` lists no backticked file paths or globs", 19)]


def test_parallel_is_unset_by_default_and_takes_whole_slots(repo: Path) -> None:
    path = Path(".autoloop/programs/demo/program.md")
    assert load_program(repo, path).config.parallel is None
    write(repo, str(path), PROGRAM.replace("seed: 7", "parallel: 4"))
    assert load_program(repo, path).config.parallel == 4
    for bad, message in (("parallel: 0", "must be a whole number >= 1"), ("parallel: 65", "must be at most 64 slots per tick")):
        write(repo, str(path), PROGRAM.replace("seed: 7", bad))
        programs, problems = check_all(repo)
        assert programs == [] and f"frontmatter `parallel`: {message}" in problems[0].message, problems


@pytest.mark.parametrize(("text", "size"), [("4GiB", 4 << 30), ("512 MiB", 512 << 20), ("2G", 2 << 30),
                                            ("1.5GB", 1_500_000_000), (2_000_000, 2_000_000)])  # fmt: skip
def test_sizes_of_max_memory_and_max_disk(text: object, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "4 GiBs", "-1", "1KiB", True])
def test_unreadable_or_tiny_sizes_are_refused(text: object) -> None:
    with pytest.raises(ValueError, match="size|at least 1 MiB"):
        parse_size(text)


def test_report_channel_and_feedback_bytes_frontmatter(repo: Path) -> None:
    text = PROGRAM.replace("repeats: 3", "repeats: 3\nevaluation-report: FILE\nfeedback-bytes: 100")
    write(repo, ".autoloop/programs/demo/program.md", text)
    program = load_program(repo, Path(".autoloop/programs/demo/program.md"))
    assert (program.config.evaluation_report, program.config.feedback_bytes) == ("file", 100)
    write(repo, ".autoloop/programs/demo/program.md", PROGRAM.replace("repeats: 3", "repeats: 3\nevaluation-report: fd"))
    _, problems = check_all(repo)
    assert "frontmatter `evaluation-report`: must be one of auto, file, stdout, got 'fd'" in problems[0].message


def test_tracking_frontmatter_names_a_destination_and_check_refuses_another(repo: Path) -> None:
    text = PROGRAM.replace("repeats: 3", "repeats: 3\ntracking: MLflow:http://127.0.0.1:5000")
    write(repo, ".autoloop/programs/demo/program.md", text)
    program = load_program(repo, Path(".autoloop/programs/demo/program.md"))
    assert program.config.tracking == ("mlflow", "http://127.0.0.1:5000")
    write(repo, ".autoloop/programs/demo/program.md", PROGRAM.replace("repeats: 3", "repeats: 3\ntracking: runs.csv"))
    _, problems = check_all(repo)
    assert "frontmatter `tracking`: must be DESTINATION:WHERE with a destination of csv, mlflow, wandb" in (
        problems[0].message)
