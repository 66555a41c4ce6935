"""Tests for autoloop_py.loop.evaluation.evaluate: metric parsing, process control, evaluate()."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.errors import EvaluationError
from autoloop_py.loop.evaluation.evaluate import EvaluationResult
from autoloop_py.loop.evaluation.evaluate import evaluate as run_evaluation
from autoloop_py.loop.evaluation.evaluation_report import read_report
from autoloop_py.program.model import Program, load_program
from autoloop_py.sandbox.process import DRAIN_GRACE, HEAD_CAP, MARK_ENV_VAR, run_command

ENV = dict(os.environ)


# --- parse_metric ---------------------------------------------------------------------------


def parse_metric(stdout: str, metric: str) -> tuple[float | None, dict[str, Any], str | None]:
    """Returns (metric, last JSON object, error) read from a command's stdout; metric is None on error."""
    report = read_report(stdout, metric)
    return report.metric, dict(report.metrics), report.error


def test_parse_metric_last_object_wins() -> None:
    stdout = 'starting\n{"score": 1.0}\nprogress 50%\n{"score": 2.5, "extra": {"k": 1}}\ndone\n'
    assert parse_metric(stdout, "score") == (2.5, {"score": 2.5, "extra": {"k": 1}}, None)


def test_parse_metric_multi_line_object_after_single_line_one() -> None:
    stdout = '{"score": 1}\n{\n  "score": 3,\n  "nested": {"list": [1, {"z": 2}]}\n}\n'
    value, metrics, error = parse_metric(stdout, "score")
    assert (value, error) == (3.0, None)
    assert metrics["nested"] == {"list": [1, {"z": 2}]}


def test_parse_metric_object_after_a_prefix_on_its_line() -> None:
    assert parse_metric('result: {"score": 4}\n', "score")[0] == 4.0


def test_parse_metric_skips_python_reprs_after_the_json() -> None:
    stdout = "{\"score\": 0.25}\n{'not': 'json'}\n"
    assert parse_metric(stdout, "score")[0] == 0.25


def test_parse_metric_accepts_integers() -> None:
    value, _, error = parse_metric('{"score": 7}', "score")
    assert value == 7.0 and isinstance(value, float) and error is None


def test_parse_metric_no_json() -> None:
    value, metrics, error = parse_metric("Traceback (most recent call last):\n  boom\n", "score")
    assert value is None and metrics == {}
    assert error is not None and error.startswith("the evaluation printed no JSON object")


def test_parse_metric_error_key_beside_a_metric_is_a_score() -> None:
    # Upstream's circle_packing: an invalid packing scores 0 and says why; the rejection is read by evaluate().
    value, metrics, error = parse_metric('{"score": 0, "error": "division by zero"}', "score")
    assert (value, error) == (0.0, None)
    assert metrics["error"] == "division by zero"


def test_parse_metric_error_key_without_a_metric_is_an_error() -> None:
    value, metrics, error = parse_metric('{"error": "division by zero"}', "score")
    assert value is None and metrics == {"error": "division by zero"}
    assert error == "evaluation reported an error: division by zero"


def test_parse_metric_falsy_error_key_is_not_an_error() -> None:
    assert parse_metric('{"score": 0.5, "error": null}', "score")[::2] == (0.5, None)
    assert parse_metric('{"score": 0.5, "error": ""}', "score")[::2] == (0.5, None)


def test_parse_metric_missing_key_names_the_keys_present() -> None:
    value, _, error = parse_metric('{"accuracy": 0.9, "loss": 0.1}', "score")
    assert value is None
    assert error is not None and "metric 'score' is missing" in error and "accuracy, loss" in error


def test_parse_metric_boolean_is_never_a_metric() -> None:
    value, _, error = parse_metric('{"score": true}', "score")
    assert value is None and error is not None and "boolean" in error


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1" + "0" * 400])
def test_parse_metric_rejects_non_finite_values(literal: str) -> None:
    value, _, error = parse_metric('{"score": %s}' % literal, "score")
    assert value is None and error is not None and "not finite" in error


@pytest.mark.parametrize("literal", ['"0.9"', "[1]", "null", '{"v": 1}'])
def test_parse_metric_rejects_non_numbers(literal: str) -> None:
    value, _, error = parse_metric('{"score": %s}' % literal, "score")
    assert value is None and error is not None and "not a number" in error


@given(
    noise=st.lists(st.text(alphabet=st.characters(exclude_characters="{}"), max_size=30), max_size=5),
    value=st.floats(allow_nan=False, allow_infinity=False),
)
def test_parse_metric_finds_a_final_object_after_any_noise(noise: list[str], value: float) -> None:
    stdout = "\n".join([*noise, json.dumps({"m": value})]) + "\n"
    assert parse_metric(stdout, "m") == (value, {"m": value}, None)


@given(st.text(max_size=200))
def test_parse_metric_never_raises(text: str) -> None:
    value, metrics, error = parse_metric(text, "m")
    assert (value is None) == (error is not None)
    assert isinstance(metrics, dict)


# --- run_command ----------------------------------------------------------------------------


def _alive(pid: int, wait: float = 3.0) -> bool:
    """Returns whether pid is still a live (non-zombie) process after up to `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state in ("Z", "X"):
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def test_run_command_reports_status_and_both_streams(tmp_path: Path) -> None:
    result = run_command("pwd; echo oops >&2; exit 3", tmp_path, timeout=10, env=ENV)
    assert result.returncode == 3 and not result.timed_out
    assert Path(result.stdout.strip()).resolve() == tmp_path.resolve()
    assert result.stderr == "oops\n"


def test_run_command_caps_100_mb_of_output(tmp_path: Path) -> None:
    script = "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(100):\n    sys.stdout.buffer.write(chunk)\n"
    command = f"{sys.executable} -c \"{script}\"; echo '{{\"score\": 1}}'"
    cap = 1 << 16
    result = run_command(command, tmp_path, timeout=60, env=ENV, output_cap=cap)
    assert result.returncode == 0
    assert len(result.stdout) <= HEAD_CAP + cap + 100
    assert "bytes omitted" in result.stdout
    assert result.stdout.startswith("x" * 1000)
    assert result.stdout.endswith('x{"score": 1}\n')
    assert parse_metric(result.stdout, "score")[0] == 1.0


def test_run_command_keeps_short_output_whole(tmp_path: Path) -> None:
    result = run_command("seq 1 20000", tmp_path, timeout=10, env=ENV, output_cap=1 << 20)
    assert result.stdout == "".join(f"{i}\n" for i in range(1, 20001))


@needs_proc
def test_run_command_timeout_kills_the_whole_group_promptly(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_command("sleep 100 & echo $!; wait", tmp_path, timeout=1, env=ENV)
    assert time.monotonic() - started < 1 + 3
    assert result.timed_out and result.returncode < 0
    assert not _alive(int(result.stdout.split()[0]))


@needs_proc
def test_run_command_kills_a_background_child_that_outlives_the_shell(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_command("sleep 100 & echo $!", tmp_path, timeout=30, env=ENV)
    assert time.monotonic() - started < 3
    assert result.returncode == 0 and not result.timed_out
    assert not _alive(int(result.stdout.split()[0]))


@needs_proc
def test_run_command_kills_a_child_that_escaped_the_group(tmp_path: Path) -> None:
    # The child leaves the process group (setsid) before the shell exits and holds the pipe it
    # inherited; the group kill misses it, the sweep for the command's mark does not.
    escape = "import os, time; os.setsid(); open('escaped', 'w').write(str(os.getpid())); time.sleep(100)"
    command = f'{sys.executable} -c "{escape}" & while [ ! -s escaped ]; do sleep 0.01; done; cat escaped'
    started = time.monotonic()
    result = run_command(command, tmp_path, timeout=30, env=ENV)
    pid = int(result.stdout.split()[0])
    try:
        assert time.monotonic() - started < DRAIN_GRACE + 3
        assert result.returncode == 0 and not result.timed_out
        assert not _alive(pid)
    finally:
        if _alive(pid, wait=0):
            os.kill(pid, 9)


@needs_proc
def test_run_command_stops_reading_a_pipe_held_by_an_escaped_child_without_the_mark(tmp_path: Path) -> None:
    # Leaving the group and clearing the environment escapes the sweep, so only the bounded
    # drain stops us from waiting 100 s for EOF on the pipe it inherited.
    escape = "import os, time; os.setsid(); open('escaped', 'w').write(str(os.getpid())); time.sleep(100)"
    command = f'env -i {sys.executable} -c "{escape}" & while [ ! -s escaped ]; do sleep 0.01; done; cat escaped'
    started = time.monotonic()
    result = run_command(command, tmp_path, timeout=30, env=ENV)
    pid = int(result.stdout.split()[0])
    try:
        assert DRAIN_GRACE <= time.monotonic() - started < DRAIN_GRACE + 3
        assert result.returncode == 0 and not result.timed_out
        assert _alive(pid, wait=0)
    finally:
        os.kill(pid, 9)


@needs_proc
def test_run_command_marks_its_environment(tmp_path: Path) -> None:
    first = run_command(f"echo ${MARK_ENV_VAR}", tmp_path, timeout=30, env=ENV).stdout.strip()
    second = run_command(f"echo ${MARK_ENV_VAR}", tmp_path, timeout=30, env=ENV).stdout.strip()
    assert len(first) == 16 and first != second


# --- evaluate -------------------------------------------------------------------------------


def _program(root: Path, command: str, frontmatter: str = "") -> Program:
    """Writes a one-program repository under root and returns the loaded program."""
    folder = root / ".autoloop" / "programs" / "demo"
    (folder / "code").mkdir(parents=True)
    (folder / "code" / "solution.py").write_text("x = 1\n")
    front = f"---\n{frontmatter}---\n\n" if frontmatter else ""
    text = (
        f"{front}# Demo\n\n## Goal\n\nMake it better.\n\n## Target\n\n- `code/solution.py`\n\n"
        f"## Evaluation\n\n```bash\n{command}\n```\n\nThe metric is `score`. Higher is better.\n"
    )
    (folder / "program.md").write_text(text)
    return load_program(root, Path(".autoloop/programs/demo/program.md"))


COUNTER = 'n=$(cat count 2>/dev/null || echo 0); n=$((n + 1)); echo $n > count; echo "{\\"score\\": $((n * n))}"'


def test_evaluate_repeats_and_takes_the_median(tmp_path: Path) -> None:
    result = run_evaluation(_program(tmp_path, COUNTER, "repeats: 3\n"), tmp_path)
    assert result.ok and result.error is None
    assert result.runs == (1.0, 4.0, 9.0)
    assert result.metric == 4.0
    # The metrics carry the number compared (the median), not the last run's.
    assert result.metrics == {"score": 4}


def test_evaluate_repeats_argument_overrides_the_frontmatter(tmp_path: Path) -> None:
    result = run_evaluation(_program(tmp_path, COUNTER, "repeats: 3\n"), tmp_path, repeats=2)
    assert (result.runs, result.metric) == ((1.0, 4.0), 2.5)


def test_evaluate_one_failing_repeat_fails_the_candidate(tmp_path: Path) -> None:
    command = COUNTER + '\n[ "$n" -lt 2 ] || { echo "run $n broke" >&2; exit 1; }'
    result = run_evaluation(_program(tmp_path, command), tmp_path, repeats=3)
    assert not result.ok and result.metric is None
    assert result.runs == (1.0,)
    assert result.error == "exited with status 1: run 2 broke"


def test_evaluate_non_zero_exit_is_a_failure_even_with_a_metric(tmp_path: Path) -> None:
    command = 'echo \'{"score": 0.9}\'; echo "Traceback: ValueError" >&2; exit 2'
    result = run_evaluation(_program(tmp_path, command), tmp_path)
    assert not result.ok and result.metric is None
    assert result.error == "exited with status 2: Traceback: ValueError"
    assert result.stderr_tail == "Traceback: ValueError\n"


def test_evaluate_exit_reason_falls_back_to_the_reported_error(tmp_path: Path) -> None:
    result = run_evaluation(_program(tmp_path, 'echo \'{"error": "no circles"}\'; exit 1'), tmp_path)
    assert result.error == "exited with status 1: no circles"


def test_evaluate_error_key_beside_a_metric_is_a_rejection(tmp_path: Path) -> None:
    result = run_evaluation(_program(tmp_path, 'echo \'{"score": 0, "error": "bad input"}\''), tmp_path)
    assert result.ok and result.metric == 0.0
    assert result.rejection == "bad input"


def test_evaluate_error_key_alone_with_exit_zero_is_a_failure(tmp_path: Path) -> None:
    result = run_evaluation(_program(tmp_path, 'echo \'{"error": "bad input"}\''), tmp_path)
    assert not result.ok and result.rejection == ""
    assert result.error == "evaluation reported an error: bad input"


def test_evaluate_timeout(tmp_path: Path) -> None:
    result = run_evaluation(_program(tmp_path, "sleep 30", "evaluation-timeout: 1\n"), tmp_path)
    assert not result.ok
    assert result.error == "timed out after 1 s"
    assert result.duration < 4


def test_evaluate_runs_in_the_repository_root_with_a_scrubbed_environment(tmp_path: Path) -> None:
    names = ("AUTOLOOP_PROGRAM", "AUTOLOOP_REPO_ROOT", "AUTOLOOP_PROGRAM_DIR", "PYTHONDONTWRITEBYTECODE", "GITHUB_TOKEN")
    report = f"{{'score': 1, 'cwd': os.getcwd(), 'env': {{k: os.environ.get(k) for k in {names!r}}}}}"
    script = f"import json, os; print(json.dumps({report}))"
    command = f'{sys.executable} -c "{script}"'
    program = _program(tmp_path, command)
    result = run_evaluation(program, tmp_path, environ={**ENV, "GITHUB_TOKEN": "secret"})
    assert result.ok, result.error
    # As upstream autoloop: the command starts at the top of the tree; the folder is in AUTOLOOP_PROGRAM_DIR.
    assert Path(result.metrics["cwd"]) == tmp_path.resolve()
    assert result.metrics["env"] == {
        "AUTOLOOP_PROGRAM": "demo",
        "AUTOLOOP_REPO_ROOT": str(tmp_path.resolve()),
        "AUTOLOOP_PROGRAM_DIR": str((tmp_path / ".autoloop/programs/demo").resolve()),
        "PYTHONDONTWRITEBYTECODE": "1",
        "GITHUB_TOKEN": None,
    }


def test_evaluate_bare_program_runs_in_the_repository_root(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("")
    programs = tmp_path / ".autoloop" / "programs"
    programs.mkdir(parents=True)
    (programs / "bare.md").write_text(
        "# Bare\n\n## Goal\n\nG.\n\n## Target\n\n- `src/*.py`\n\n## Evaluation\n\n"
        "```bash\nls src >/dev/null && echo '{\"score\": 2}'\n```\n\nThe metric is `score`.\n"
    )
    program = load_program(tmp_path, Path(".autoloop/programs/bare.md"))
    result = run_evaluation(program, tmp_path)
    assert (result.ok, result.metric) == (True, 2.0)


def test_evaluate_missing_program_folder_is_a_failed_result(tmp_path: Path) -> None:
    program = _program(tmp_path, "echo '{\"score\": 1}'")
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    result = run_evaluation(program, elsewhere)
    assert not result.ok and result.error is not None and "does not exist" in result.error


def test_evaluate_without_an_evaluation_raises(tmp_path: Path) -> None:
    program = dataclasses.replace(_program(tmp_path, "true"), evaluation=None)
    with pytest.raises(EvaluationError, match="has no evaluation"):
        run_evaluation(program, tmp_path)


def test_evaluation_result_is_frozen() -> None:
    result = EvaluationResult(True, 1.0, {}, None, (1.0,), "", "", 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.ok = False  # type: ignore[misc]


@needs_proc
def test_run_command_interrupted_kills_the_group_before_raising(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import autoloop_py.sandbox.process as process_module

    pid_file = tmp_path / "pid"

    def interrupted(process: object, deadline: float) -> bool:
        while not pid_file.exists() or not pid_file.read_text().strip():
            time.sleep(0.01)
        raise KeyboardInterrupt

    monkeypatch.setattr(process_module, "_wait_exited", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_command("sleep 100 & echo $! > pid; wait", tmp_path, timeout=30, env=ENV)
    assert not _alive(int(pid_file.read_text()))


def test_median_metrics_takes_each_number_every_run_printed() -> None:
    from autoloop_py.loop.evaluation.evaluate import median_metrics

    printed = [{"score": 1.0, "n": 3, "label": "a"}, {"score": 9.0, "n": 5, "label": "b"}, {"score": 4.0, "label": "c"}]
    combined = median_metrics(printed)
    # score: the median of the three runs; n is missing from one run, so the last run's object stands.
    assert combined == {"score": 4.0, "label": "c"}
    assert median_metrics([{"score": 2, "n": 3}, {"score": 4, "n": 5}, {"score": 3, "n": 4}]) == {"score": 3, "n": 4}
    assert median_metrics([{"score": 2.5, "flag": True}]) == {"score": 2.5, "flag": True}
    assert median_metrics([]) == {}


def test_a_json_line_cut_by_the_output_cap_says_so(tmp_path: Path) -> None:
    # One 2 MB line: its start falls in the bytes dropped between the kept head and tail.
    command = f"{sys.executable} -c \"import json; print(json.dumps({{'score': 1, 'pad': 'p' * (2 << 20)}}))\""
    result = run_evaluation(_program(tmp_path, command), tmp_path)
    assert not result.ok
    assert result.error is not None and result.error.startswith("output cut at the output cap (")
    assert "bytes dropped) before a JSON object ended" in result.error
    assert "printed no JSON object" not in result.error


def test_cut_output_without_any_json_is_reported_with_what_was_dropped(tmp_path: Path) -> None:
    command = f"{sys.executable} -c \"print('x' * (2 << 20))\""
    result = run_evaluation(_program(tmp_path, command), tmp_path)
    assert result.error is not None
    assert result.error.startswith("the evaluation printed no JSON object in the part of its output kept under the cap (")


def test_short_output_without_json_keeps_the_plain_message(tmp_path: Path) -> None:
    result = run_evaluation(_program(tmp_path, "echo hello"), tmp_path)
    assert result.error is not None and result.error.startswith("the evaluation printed no JSON object; print one")
    assert result.error.endswith("; its stdout ended: 'hello'")  # what it printed, in the runner's error


def test_an_evaluation_without_a_report_says_how_its_output_ended(tmp_path: Path) -> None:
    program = _program(tmp_path, "true")
    assert program.evaluation is not None

    def evaluated(command: str) -> EvaluationResult:
        return run_evaluation(dataclasses.replace(
            program, evaluation=dataclasses.replace(program.evaluation, command=command)), tmp_path)

    quiet = evaluated("echo 'Traceback: no module named numpy' >&2")
    assert quiet.error is not None and quiet.error.endswith("; its stderr ended: 'Traceback: no module named numpy'")
    silent = evaluated("true")
    assert silent.error is not None and silent.error.endswith("; it printed nothing")
    long = evaluated("seq 1 1000")
    assert long.error is not None and long.error.endswith(" 999 1000'") and len(long.error) < 400
