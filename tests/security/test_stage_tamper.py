"""Attacks by one stage of `evaluation-stages` on a later one, through a real `autoloop run` under the sandbox.

The program has two stages: `validity` runs the candidate's code, `score` reads the candidate's number from its
text without running it (a scorer the candidate cannot reach in-process). So the only way for the hostile
candidate, which an agent writes, to change its score is what its code leaves behind at stage 1 for stage 2:
a rewritten evaluator that puts itself back, a module shadowing one the scorer imports, a forged `.pyc` of the
scorer's helper. Each stage runs in a fresh copy: the first is an error naming the stage, the others change
nothing, and no tampering candidate is kept.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.state import file as statefile
from tests.security.conftest import PROG, SECRET, Hostile

STAGES = {"evaluation-stages": "\n  - name: validity\n  - name: score"}
EVALUATE = """\
import json, os
import scoring

source = open("code/value.py").read()
if os.environ["AUTOLOOP_STAGE"] == "1":  # validity: the candidate runs and defines a positive x
    ns = {"__file__": os.path.abspath("code/value.py")}
    exec(compile(source, "code/value.py", "exec"), ns)
    print(json.dumps({} if ns["x"] > 0 else {"error": "x must be positive"}))
else:  # score: read from the text, the candidate's code never runs here
    print(json.dumps({"score": scoring.score(source)}))
"""
SCORING = """\
import ast


def score(source):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "x" for t in node.targets):
            return float(ast.literal_eval(node.value))
    return 0.0
"""
# Each candidate is worse than the Target (x = 0.5 < 1.0) and tries to pass for 1e9 at stage 2.
REPLACE_EVALUATOR = """\
import os, pathlib
x = 0.5
if os.environ.get("AUTOLOOP_STAGE") == "1":
    evaluator = pathlib.Path(__file__).with_name("evaluate.py")
    original = evaluator.read_text()
    evaluator.write_text(
        "import json, pathlib\\n"
        f"pathlib.Path(__file__).write_text({original!r})\\n"
        "print(json.dumps({'score': 1e9}))\\n"
    )
"""
SHADOW_MODULE = """\
import os, pathlib
x = 0.5
if os.environ.get("AUTOLOOP_STAGE") == "1":
    pathlib.Path(__file__).with_name("json.py").write_text(
        "def dumps(obj, **kw):\\n    return '{\\"score\\": 1e9}'\\n"
    )
"""
FORGED_PYC = """\
import importlib.util, importlib._bootstrap_external as bootstrap, os, pathlib
x = 0.5
if os.environ.get("AUTOLOOP_STAGE") == "1":
    helper = pathlib.Path(__file__).with_name("scoring.py")
    info = helper.stat()
    forged = compile("def score(source):\\n    return 1e9\\n", str(helper), "exec")
    pyc = pathlib.Path(importlib.util.cache_from_source(str(helper)))
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(bootstrap._code_to_timestamp_pyc(forged, info.st_mtime, info.st_size))
"""


def _run(hostile: Hostile, tmp_path: Path, payload: str):  # type: ignore[no-untyped-def]
    hostile.install(EVALUATE, STAGES)
    (hostile.repo / PROG / "code/scoring.py").write_text(SCORING)
    hostile.run_git(hostile.repo, "add", "-A")
    hostile.run_git(hostile.repo, "commit", "-qm", "the scorer's helper")
    hostile.run_git(hostile.repo, "push", "-q", "origin", "main")
    candidate = tmp_path / "candidate.py"
    candidate.write_text(f"# EVOLVE-BLOCK-START\n{payload}# EVOLVE-BLOCK-END\n")
    outcome = hostile.run("--proposer", "agent", "--agent-command", f"cp {candidate} {PROG}/code/value.py")
    assert outcome.process.returncode == 0, outcome.log
    state = statefile.parse_state(outcome.state, "hostile.md")
    assert state.machine.best_metric == 1.0, outcome.state  # the baseline's, never 1e9
    assert "1e+09" not in outcome.state and "1000000000" not in outcome.state
    kept = hostile.run_git(hostile.origin, "branch", "--list", "autoloop/hostile")
    assert kept.strip() == "", "the candidate was kept"
    assert outcome.leaked(SECRET) == []
    assert outcome.checkout[0] == outcome.checkout[1]  # nothing written to the user's checkout
    entry = next(e.text for e in state.history if e.iteration == 1)
    return outcome, entry


def test_a_stage_replacing_the_evaluator_for_the_next_is_an_error_naming_the_stage(
    hostile: Hostile, bwrap: None, tmp_path: Path
) -> None:
    _, entry = _run(hostile, tmp_path, REPLACE_EVALUATOR)
    assert "⚠️ Error" in entry, entry
    assert (f"the candidate changed protected files: {PROG}/code/evaluate.py at stage 1 of 2 (validity)"
            in entry), entry


@pytest.mark.parametrize("payload", [SHADOW_MODULE, FORGED_PYC], ids=["shadow-module", "forged-pyc"])
def test_what_a_stage_plants_never_reaches_the_next(hostile: Hostile, bwrap: None, tmp_path: Path, payload: str) -> None:
    _, entry = _run(hostile, tmp_path, payload)
    # Stage 2 ran in a fresh copy, without the planted file: the candidate got its own score, and lost.
    assert "❌ Rejected" in entry and "metric 0.5 did not improve on best 1" in entry, entry
