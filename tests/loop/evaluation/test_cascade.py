"""Tests for the evaluation cascade (loop/evaluation/cascade.py through evaluate()) and `evaluation-stages` (program/stages.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autoloop_py.loop.evaluation.evaluate import evaluate
from autoloop_py.program.model import Program, check_all, load_program
from autoloop_py.program.stages import Stage, parse_stages, passes

# A quick check of x, then the expensive measure; each run leaves a marker (the repository is the workdir here).
QUICK = ("cd \"$AUTOLOOP_PROGRAM_DIR\" && touch ran-quick-$AUTOLOOP_STAGE && "
         "python3 -c \"import json, os; ns = {}; exec(open('code/x.py').read(), ns); "
         "json.dump({'score': ns['x'], 'quick': 1}, open(os.environ['AUTOLOOP_RESULT'], 'w'))\"")
SLOW = ("cd \"$AUTOLOOP_PROGRAM_DIR\" && echo run >> ran-slow && "
        "python3 -c \"import json, os; ns = {}; exec(open('code/x.py').read(), ns); "
        "json.dump({'score': ns['x'] * 10, 'slow': 2}, open(os.environ['AUTOLOOP_RESULT'], 'w'))\"")


def _program(root: Path, x: str, stages: object, extra: str = "", load: bool = True) -> Program | None:
    folder = root / ".autoloop/programs/demo"
    (folder / "code").mkdir(parents=True, exist_ok=True)
    (folder / "code/x.py").write_text(f"x = {x}\n")
    listed = stages if isinstance(stages, str) else yaml.safe_dump(stages, width=1000)
    (folder / "program.md").write_text(
        f"---\nevaluation-report: file\n{extra}evaluation-stages:\n{listed}---\n\n# Demo\n\n## Goal\n\nMore.\n\n"
        f"## Target\n\n- `code/x.py`\n\n## Evaluation\n\n```bash\n{SLOW}\n```\n\nThe metric is `score`. Higher is better.\n"
    )
    return load_program(root, Path(".autoloop/programs/demo/program.md")) if load else None


STAGES = [{"command": QUICK, "threshold": 0.5, "name": "quick"}, {}]


def test_a_candidate_failing_stage_1_never_starts_stage_2(tmp_path: Path) -> None:
    result = evaluate(_program(tmp_path, "0.1", STAGES), tmp_path)
    folder = tmp_path / ".autoloop/programs/demo"
    assert (folder / "ran-quick-1").exists()
    assert not (folder / "ran-slow").exists()  # the marker of stage 2
    assert result.ok and result.metric == 0.1
    assert result.stopped == "stage 1 of 2 (quick): score 0.1, the stage needs at least 0.5"
    assert [(number, passed) for number, _, passed in result.stages] == [(1, False)]


def test_stages_that_pass_merge_their_metrics_and_repeat_only_the_last(tmp_path: Path) -> None:
    result = evaluate(_program(tmp_path, "2", STAGES, "repeats: 3\n"), tmp_path)
    folder = tmp_path / ".autoloop/programs/demo"
    assert result.ok and not result.stopped and result.metric == 20.0
    assert result.metrics == {"score": 20, "quick": 1, "slow": 2}
    assert (folder / "ran-slow").read_text() == "run\nrun\nrun\n"
    assert [(number, passed) for number, _, passed in result.stages] == [(1, True), (2, True)]


def test_one_command_runs_as_every_stage_with_its_number(tmp_path: Path) -> None:
    program = _program(tmp_path, "2", "  - threshold: 1\n  - threshold: 3\n  - {}\n")
    program = load_program(tmp_path, Path(".autoloop/programs/demo/program.md"))
    text = (tmp_path / program.path).read_text().replace(SLOW, QUICK)
    (tmp_path / program.path).write_text(text)
    result = evaluate(load_program(tmp_path, program.path), tmp_path)
    folder = tmp_path / ".autoloop/programs/demo"
    assert (folder / "ran-quick-1").exists() and (folder / "ran-quick-2").exists()
    assert not (folder / "ran-quick-3").exists()
    assert result.stopped == "stage 2 of 3: score 2, the stage needs at least 3"


def test_a_pass_fail_stage_needs_no_metric_and_a_failing_one_is_an_error(tmp_path: Path) -> None:
    check = "  - command: 'test -s \"$AUTOLOOP_PROGRAM_DIR/code/x.py\" && echo {} > \"$AUTOLOOP_RESULT\"'\n  - {}\n"
    result = evaluate(_program(tmp_path, "2", check), tmp_path)
    assert result.ok and result.metric == 20.0 and not result.stopped
    broken = "  - command: 'echo compile error >&2; exit 3'\n  - {}\n"
    result = evaluate(_program(tmp_path / "b", "2", broken), tmp_path / "b")
    assert not result.ok and result.stopped == "stage 1 of 2: exited with status 3: compile error"
    assert not (tmp_path / "b/.autoloop/programs/demo/ran-slow").exists()


def test_a_stage_reporting_an_error_beside_a_metric_stops_as_a_rejection(tmp_path: Path) -> None:
    bad = [{"command": 'echo \'{"score": 0, "error": "circles 3 and 7 overlap"}\' > "$AUTOLOOP_RESULT"'}, {}]
    result = evaluate(_program(tmp_path, "2", bad), tmp_path)
    assert result.ok and result.rejection == "circles 3 and 7 overlap"
    assert result.stopped == "stage 1 of 2: circles 3 and 7 overlap"


# The evaluator of the documented example (docs/configuration.md): stage 1 only validates, stage 2 scores.
VALIDATE_THEN_SCORE = (
    "cd \"$AUTOLOOP_PROGRAM_DIR\" && echo $AUTOLOOP_STAGE >> stages-run && python3 -c \"import json, os; ns = {}; "
    "exec(open('code/x.py').read(), ns); stage = os.environ['AUTOLOOP_STAGE']; x = ns['x']; "
    "report = ({'error': f'x is {x}, below 0'} if x < 0 else {}) if stage == '1' else {'score': x * 10}; "
    "json.dump(report, open(os.environ['AUTOLOOP_RESULT'], 'w'))\""
)
DOCUMENTED = "  - name: validity\n  - name: score\n"


def _documented(root: Path, x: str, evaluation: str = VALIDATE_THEN_SCORE) -> Program:
    _program(root, x, DOCUMENTED, load=False)
    path = root / ".autoloop/programs/demo/program.md"
    path.write_text(path.read_text().replace(SLOW, evaluation))
    return load_program(root, Path(".autoloop/programs/demo/program.md"))


def test_the_documented_validity_stage_rejects_a_wrong_candidate_and_never_errs(tmp_path: Path) -> None:
    result = evaluate(_documented(tmp_path, "-1"), tmp_path)
    assert result.ok and result.error is None and result.metric is None  # a rejection, not an error
    assert result.rejection == "x is -1, below 0"
    assert result.stopped == "stage 1 of 2 (validity): x is -1, below 0"
    assert [(number, passed) for number, _, passed in result.stages] == [(1, False)]
    assert (tmp_path / ".autoloop/programs/demo/stages-run").read_text() == "1\n"  # stage 2 never ran
    good = evaluate(_documented(tmp_path / "g", "2"), tmp_path / "g")
    assert good.ok and good.metric == 20.0 and not good.rejection and not good.stopped


def test_a_stage_exiting_non_zero_is_an_error_even_with_an_error_report_unless_it_says_reject(tmp_path: Path) -> None:
    # circle_packing's contract: a crashing candidate writes its traceback as `error` and exits 1, an error.
    crash = 'echo \'{"error": "TypeError: bad operand"}\' > "$AUTOLOOP_RESULT"; exit 1'
    result = evaluate(_program(tmp_path, "2", [{"command": crash, "name": "v"}, {}]), tmp_path)
    assert not result.ok and not result.rejection
    assert result.stopped == "stage 1 of 2 (v): exited with status 1: TypeError: bad operand"
    said = [{"command": crash, "name": "v", "failing-exit": "reject"}, {}]
    result = evaluate(_program(tmp_path / "r", "2", said), tmp_path / "r")
    assert result.ok and result.metric is None and result.rejection == "TypeError: bad operand"
    assert result.stopped == "stage 1 of 2 (v): TypeError: bad operand"


def test_a_failing_exit_rejects_only_when_the_stage_says_so(tmp_path: Path) -> None:
    check = [{"command": "echo 'x.py:1: SyntaxError' >&2; exit 3", "failing-exit": "reject", "name": "compiles"}, {}]
    result = evaluate(_program(tmp_path, "2", check), tmp_path)
    assert result.ok and result.rejection == "exited with status 3: x.py:1: SyntaxError"
    assert result.stopped == "stage 1 of 2 (compiles): exited with status 3: x.py:1: SyntaxError"
    assert not (tmp_path / ".autoloop/programs/demo/ran-slow").exists()
    # A timeout says nothing about the candidate's correctness: an error even there.
    slow = [{"command": "sleep 5", "failing-exit": "reject"}, {}]
    result = evaluate(_program(tmp_path / "t", "2", slow, "evaluation-timeout: 1\n"), tmp_path / "t")
    assert not result.ok and result.stopped == "stage 1 of 2: timed out after 1 s" and not result.rejection


def test_a_pass_fail_stage_may_report_nothing_but_a_stage_that_must_report_may_not(tmp_path: Path) -> None:
    silent = [{"command": "true"}, {}]
    result = evaluate(_program(tmp_path, "2", silent), tmp_path)
    assert result.ok and result.metric == 20.0 and not result.stopped
    gated = [{"command": "true", "threshold": 1}, {}]
    result = evaluate(_program(tmp_path / "g", "2", gated), tmp_path / "g")
    assert not result.ok and result.stopped.startswith("stage 1 of 2: the evaluation wrote no report")


def test_the_last_stage_rejects_with_its_error_and_a_single_evaluation_keeps_upstreams_rule(tmp_path: Path) -> None:
    last = 'test "$AUTOLOOP_STAGE" = 1 || echo \'{"error": "the packing is empty"}\' > "$AUTOLOOP_RESULT"'
    result = evaluate(_documented(tmp_path, "2", last), tmp_path)
    assert result.ok and result.metric is None and result.rejection == "the packing is empty" and not result.stopped
    assert [(number, passed) for number, _, passed in result.stages] == [(1, True), (2, False)]
    # Without stages, as upstream: `error` beside a metric rejects, an `error` alone is an error.
    single = tmp_path / "s/.autoloop/programs/demo"
    _program(tmp_path / "s", "2", DOCUMENTED, load=False)
    text = (single / "program.md").read_text().replace(SLOW, last)
    (single / "program.md").write_text(text.replace("evaluation-stages:\n" + DOCUMENTED, ""))
    result = evaluate(load_program(tmp_path / "s", Path(".autoloop/programs/demo/program.md")), tmp_path / "s")
    assert not result.ok and result.error == "evaluation reported an error: the packing is empty"


def test_parse_stages_and_passes() -> None:
    assert parse_stages(["python3 quick.py", {"threshold": 2, "repeats": 2, "name": "full"}, None]) == (
        Stage("python3 quick.py"), Stage("", 2.0, 2, "full"), Stage()
    )
    assert parse_stages([{"failing-exit": "reject"}]) == (Stage(failing_exit="reject"),)
    for bad, message in [([], "must be a list"), ([{"treshold": 1}], "unknown key"), ([{"threshold": "x"}], "finite"),
                         ([{"repeats": 0}], "repeats must be"), ([{"failing-exit": "ignore"}], "`error` or `reject`")]:
        with pytest.raises(ValueError, match=message):
            parse_stages(bad)
    assert passes(None, Stage(), "higher") and not passes(None, Stage(threshold=1), "higher")
    assert passes(0.5, Stage(threshold=1), "lower") and not passes(1.5, Stage(threshold=1), "lower")


def test_a_bad_stage_is_a_check_error_naming_the_line(tmp_path: Path) -> None:
    _program(tmp_path, "1", "  - threshold: high\n", load=False)
    _, problems = check_all(tmp_path)
    assert problems and problems[0].line == 3
    assert "frontmatter `evaluation-stages`: stage 1: threshold must be a finite number, got 'high'" in problems[0].message
