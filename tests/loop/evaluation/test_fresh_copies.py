"""Tests for autoloop_py.loop.evaluation.fresh_copies: each stage in a copy of its own, checked for tampering."""

from __future__ import annotations

from pathlib import Path

from autoloop_py.loop.evaluation import checks
from autoloop_py.loop.evaluation.fresh_copies import evaluate_copy
from autoloop_py.program.model import Program, load_program

# Stage 1 plants a file in its tree and one beside its report; stage 2 scores 1, or 1e9 when it sees either.
PLANT = 'touch "$AUTOLOOP_PROGRAM_DIR/planted" "$(dirname "$AUTOLOOP_RESULT")/planted"; echo {} > "$AUTOLOOP_RESULT"'
SCORE = ('cd "$AUTOLOOP_PROGRAM_DIR" && if [ -e planted ] || [ -e "$(dirname "$AUTOLOOP_RESULT")/planted" ]; '
         'then echo \'{"score": 1e9}\'; else echo \'{"score": 1}\'; fi > "$AUTOLOOP_RESULT"')


def _program(root: Path, stages: str, command: str = SCORE, extra: str = "evaluation-report: file\n") -> Program:
    folder = root / ".autoloop/programs/demo"
    (folder / "code").mkdir(parents=True)
    (folder / "code/x.py").write_text("x = 1\n")
    (folder / "program.md").write_text(
        f"---\n{extra}{stages}---\n\n# Demo\n\n## Goal\n\nMore.\n\n## Target\n\n- `code/x.py`\n\n"
        f"## Evaluation\n\n```bash\n{command}\n```\n\nThe metric is `score`. Higher is better.\n"
    )
    return load_program(root, Path(".autoloop/programs/demo/program.md"))


def test_nothing_a_stage_leaves_in_its_tree_or_beside_its_report_reaches_the_next(tmp_path: Path) -> None:
    program = _program(tmp_path, f"evaluation-stages:\n  - command: '{PLANT}'\n  - {{}}\n")
    result = evaluate_copy(program, tmp_path)
    assert result.ok and result.metric == 1.0 and not result.stopped
    assert [(number, passed) for number, _, passed in result.stages] == [(1, True), (2, True)]
    assert not (tmp_path / ".autoloop/programs/demo/planted").exists()  # the runner's tree is never evaluated in


def test_a_stage_changing_a_protected_file_is_an_error_naming_the_stage_and_the_next_never_runs(tmp_path: Path) -> None:
    tamper = 'echo "evaluation-timeout: 1" >> "$AUTOLOOP_PROGRAM_DIR/program.md"; echo {} > "$AUTOLOOP_RESULT"'
    program = _program(tmp_path, f"evaluation-stages:\n  - command: '{tamper}'\n    name: validity\n  - {{}}\n",
                       command='touch "$AUTOLOOP_PROGRAM_DIR/../ran-2"; echo \'{"score": 1}\' > "$AUTOLOOP_RESULT"')
    guarded = checks.protected_hashes(program, tmp_path)
    result = evaluate_copy(program, tmp_path, guarded)
    assert not result.ok and result.metric is None and not result.rejection
    assert result.tampered == ".autoloop/programs/demo/program.md at stage 1 of 2 (validity)"
    assert result.stopped == "stage 1 of 2 (validity): it changed protected files: .autoloop/programs/demo/program.md"
    assert [number for number, _, _ in result.stages] == [1]
    unstaged = _program(tmp_path / "u", "", command=tamper)
    result = evaluate_copy(unstaged, tmp_path / "u", checks.protected_hashes(unstaged, tmp_path / "u"))
    assert not result.ok and result.tampered == ".autoloop/programs/demo/program.md"  # no stage to name


def test_a_run_that_turns_its_report_path_into_a_folder_does_not_break_the_next_run(tmp_path: Path) -> None:
    # Each run has a report folder of its own: the second run never meets what the first left.
    command = 'mkdir "$AUTOLOOP_RESULT"; echo \'{"score": 2}\''
    program = _program(tmp_path, "repeats: 2\n", command=command, extra="evaluation-report: stdout\n")
    result = evaluate_copy(program, tmp_path)
    assert result.ok and result.runs == (2.0, 2.0)
