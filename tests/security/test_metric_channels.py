"""The channels by which a candidate could reach the metric its scorer reports, attacked through the real evaluation
path (`evaluate_copy`, as an iteration runs it, in bubblewrap).

The scorer (`code/evaluate.py`) calls the candidate's `solve()` through autoloop_py.candidate and reports
`{"score": <what solve returned>}` to $AUTOLOOP_RESULT; it imports its helper only afterwards. Each hostile
candidate returns 0.5 and tries to make the recorded metric 1e9 another way: files it writes for the scorer's later
imports or Pythons, its ancestors through ptrace or /proc. Where a file is the runner's to guard (the next repeat or
stage, the held-out run, the report's path), the scorer loads the candidate in its own process (as upstream's do),
so that the candidate can write what it likes. The recorded metric stays the scorer's (or the run is an error
saying why), and the runner's tree is unchanged.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from autoloop_py.loop.evaluation import checks
from autoloop_py.loop.evaluation import holdout as held_out
from autoloop_py.loop.evaluation.evaluate import EvaluationResult
from autoloop_py.loop.evaluation.fresh_copies import evaluate_copy
from autoloop_py.program.model import load_program
from autoloop_py.sandbox.run import isolation_for

FORGED = 1e9
SCORER = """\
import json, os
from autoloop_py.candidate import CandidateError, call
try:
    report = {"score": float(call("code/solution.py", "solve", timeout=20))}
except CandidateError as err:
    report = {"error": str(err)}
import helper  # imported late: within one run, the candidate shares the tree with it
report["check"] = helper.check()
with open(os.environ["AUTOLOOP_RESULT"], "w") as handle:
    json.dump(report, handle)
"""
# An upstream-style scorer that loads the candidate into its own process (it keeps the sandbox's guarantees, not
# the split's): its candidate can write the tree, so only a fresh copy per run keeps one run from the next.
IN_PROCESS = """\
import importlib.util, json, os
spec = importlib.util.spec_from_file_location("solution", "code/solution.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
with open(os.environ["AUTOLOOP_RESULT"], "w") as handle:
    json.dump({"score": float(module.solve())}, handle)
"""
HELPER = "def check():\n    return 'ok'\n"
# A json module that is the real one but for dump, which writes the forged report.
SHADOW_JSON = """\
import sys
here = sys.path.pop(0)
me = sys.modules.pop("json")
import json as real
sys.path.insert(0, here)
sys.modules["json"] = me
globals().update({k: v for k, v in vars(real).items() if not k.startswith("__")})
def dump(obj, handle, **kw):
    handle.write('{"score": 1e9}')
"""
# An evaluator that reports 1e9 and puts the real one back, so that the tree looks untouched after it.
SELF_RESTORING = """\
import pathlib
scorer = pathlib.Path(__file__).with_name("evaluate.py")
real = scorer.read_text()
scorer.write_text("import os, pathlib\\n"
                  f"pathlib.Path(__file__).write_text({real!r})\\n"
                  "open(os.environ['AUTOLOOP_RESULT'], 'w').write('{\\"score\\": 1e9}')\\n")
"""
NEXT_RUN = {
    "shadow-json": f"import pathlib\npathlib.Path(__file__).with_name('json.py').write_text({SHADOW_JSON!r})\n",
    "self-restoring-evaluator": SELF_RESTORING,
}
# Plants at the report's path (found by its folder's name: the candidate has no $AUTOLOOP_RESULT) before the scorer
# writes it, each holding the forged report: the runner reads the report without following a link or blocking.
REPORT_PLANT = """\
import glob, os, pathlib, stat
FOUND = glob.glob("/tmp/autoloop-report-*/report-*/")
forged = pathlib.Path(__file__).with_name("forged.json")
forged.write_text('{"score": 1e9}')
for folder in FOUND:
    report = os.path.join(folder, "result.json")
    if HOW == "symlink":
        os.symlink(forged, report)
    elif HOW == "hardlink":
        try:
            os.link(forged, report)
        except OSError:  # another mount: copy it instead, then make it read-only
            pathlib.Path(report).write_text(forged.read_text())
    elif HOW == "fifo":
        os.mkfifo(report)
    else:
        pathlib.Path(report).write_text(forged.read_text())
        os.chmod(report, stat.S_IRUSR)
        os.chmod(folder, stat.S_IRUSR | stat.S_IXUSR)

def solve():
    return 0.5 if FOUND else 0.25  # 0.25: the attack found no report folder, so it did not run
"""
# Every process the candidate can name in /proc: attach with ptrace, write its memory, read its environment, write
# its stdout. It records what it reached and returns 0.5 (the scorer reports what solve returned).
REACH = """\
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
REACHED, ME = [], int(os.readlink("/proc/self"))  # its pid in /proc's namespace (in its own, it may be 1)
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != ME):
    for what, attempt in (
        ("ptrace", lambda: libc.ptrace(16, pid, 0, 0) == 0),  # PTRACE_ATTACH
        ("seize", lambda: libc.ptrace(0x4206, pid, 0, 0) == 0),  # PTRACE_SEIZE
        ("mem", lambda: open(f"/proc/{pid}/mem", "r+b").close() is None),
        ("environ", lambda: b"AUTOLOOP_RESULT" in open(f"/proc/{pid}/environ", "rb").read()),
        ("stdout", lambda: open(f"/proc/{pid}/fd/1", "w").write('{"score": 1e9}\\n') > 0),
    ):
        try:
            if attempt():
                REACHED.append(f"{what} of {pid}")
        except OSError:
            pass

def solve():
    if REACHED:
        raise RuntimeError("reached " + ", ".join(REACHED))
    return 0.5
"""


def _evaluate(
    root: Path, attack: str, frontmatter: str = "", timeout: int = 60, scorer: str = SCORER
) -> EvaluationResult:
    """Evaluates, in bubblewrap, a candidate whose module runs `attack` when loaded (solve() returns 0.5 unless the
    attack defines it)."""
    folder = root / ".autoloop/programs/demo"
    (folder / "code").mkdir(parents=True, exist_ok=True)
    solve = "" if "def solve" in attack else "def solve():\n    return 0.5\n"
    (folder / "code/solution.py").write_text(f"{attack}\n{solve}")
    (folder / "code/evaluate.py").write_text(scorer)
    (folder / "code/helper.py").write_text(HELPER)
    (folder / "program.md").write_text(
        f"---\nevaluation-report: file\nevaluation-timeout: {timeout}\n{frontmatter}---\n\n# Demo\n\n## Goal\n\nMore.\n\n"
        "## Target\n\n- `code/solution.py`\n\n## Evaluation\n\n"
        '```bash\ncd "$AUTOLOOP_PROGRAM_DIR" && python3 code/evaluate.py\n```\n\n'
        "The metric is `score`. Higher is better.\n\n## Do NOT modify\n\n- `code/evaluate.py`\n- `code/helper.py`\n"
    )
    program = load_program(root, Path(".autoloop/programs/demo/program.md"))
    before = _tree(root)
    result = evaluate_copy(program, root, checks.protected_hashes(program, root),
                           isolation_for("bwrap", network=False).evaluation)  # fmt: skip
    assert _tree(root) == before  # the runner's tree: every run was in a copy of its own
    assert FORGED not in result.runs and "1e9" not in repr(result.metrics) and "1000000000" not in repr(result)
    return result


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("attack", sorted(NEXT_RUN))
def test_a_run_cannot_poison_the_next_repeat(tmp_path: Path, bwrap: None, attack: str) -> None:
    """Before each repeat had a copy of its own, the shadow json made runs 2 and 3 report 1e9: the median was 1e9.

    (Its scorer loads the candidate in-process: a candidate called through autoloop_py.candidate cannot write the
    tree at all, see below.)"""
    result = _evaluate(tmp_path, NEXT_RUN[attack], "repeats: 3\n", scorer=IN_PROCESS)
    if attack == "shadow-json":  # a new file beside the scorer: harmless in a run of its own
        assert result.ok and result.runs == (0.5, 0.5, 0.5) and result.metric == 0.5, result
    else:  # the evaluator changed during the run that loaded the candidate: an error naming it
        assert not result.ok and result.runs == () and result.metric is None
        assert result.tampered == ".autoloop/programs/demo/code/evaluate.py", result


@pytest.mark.parametrize("how", ["symlink", "hardlink", "fifo", "read-only"])
def test_a_plant_at_the_reports_path_never_counts(tmp_path: Path, bwrap: None, how: str) -> None:
    # (The scorer's open() of a fifo waits for a reader that never comes: the run times out.)
    plant = REPORT_PLANT.replace("HOW", repr(how))
    result = _evaluate(tmp_path, plant, timeout=3 if how == "fifo" else 60, scorer=IN_PROCESS)
    if result.ok:  # the scorer's own write replaced the plant (as root, a read-only file is no obstacle)
        assert result.metric == 0.5 and result.metrics == {"score": 0.5}, result
    else:  # the scorer could not write its report, or wrote it through the link: no report counts
        assert result.metric is None and result.error, result


def test_the_candidate_reaches_no_process_outside_its_own(tmp_path: Path, bwrap: None) -> None:
    """ptrace, /proc/<pid>/mem, environ and fd/1 of every process it can name (its scorer, the scorer's shell): none.

    solve() raises naming what it reached (the scorer then reports that error), else returns 0.5."""
    result = _evaluate(tmp_path, REACH)
    assert result.ok and result.metric == 0.5, result.error


WRITE_ANYWHERE = """\
import glob, os, pathlib, site, tempfile
here = pathlib.Path(__file__).parent
WROTE, REFUSED = [], []
targets = {
    "a package shadowing the scorer's helper": here / "helper/__init__.py",
    "usercustomize in $HOME": pathlib.Path(site.getusersitepackages()) / "usercustomize.py",
    "a .pth in $HOME": pathlib.Path(site.getusersitepackages()) / "planted.pth",
    "a file in the report's folder": pathlib.Path((glob.glob("/tmp/autoloop-report-*/report-*/") or ["/nowhere"])[0])
    / "result.json",
}
for what, path in targets.items():
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("def check():\\n    return 'shadowed'\\n" if what.startswith("a package") else "import os\\n")
        WROTE.append(what)
    except OSError as err:
        REFUSED.append(err.strerror)
with tempfile.NamedTemporaryFile(mode="w") as scratch:  # its own scratch stays writable
    scratch.write("fine")

def solve():
    if WROTE:
        raise RuntimeError("wrote " + ", ".join(WROTE))
    return 0.5 if REFUSED.count("Read-only file system") == 4 else REFUSED
"""


def test_the_candidate_can_write_neither_its_tree_nor_home_nor_the_report_folder(tmp_path: Path, bwrap: None) -> None:
    """A module the scorer imports after the call, a usercustomize or .pth a later Python of the run would load, a
    report: all refused (read-only in the candidate's mount namespace); its temp directory stays writable."""
    result = _evaluate(tmp_path, WRITE_ANYWHERE)
    assert result.ok and result.metric == 0.5 and result.metrics.get("check") == "ok", result


# At stage 1, an in-process candidate plants what a later Python would run: a usercustomize in $HOME that forges the
# report at exit, a sitecustomize and a module in /tmp, on PYTHONPATH if stage 2 inherited stage 1's environment.
LATER_PYTHON = """\
import os, pathlib, site
FORGE = "import atexit, os\\natexit.register(lambda: open(os.environ['AUTOLOOP_RESULT'], 'w').write('{\\"score\\": 1e9}'))\\n"
if os.environ["AUTOLOOP_STAGE"] == "1":
    user = pathlib.Path(site.getusersitepackages())
    user.mkdir(parents=True, exist_ok=True)
    (user / "usercustomize.py").write_text(FORGE)
    pathlib.Path("/tmp/sitecustomize.py").write_text(FORGE)
    os.environ["PYTHONPATH"] = "/tmp"
    os.environ["PYTHONSTARTUP"] = "/tmp/sitecustomize.py"
"""


def test_nothing_a_stage_plants_for_a_later_python_reaches_the_next_stage(tmp_path: Path, bwrap: None) -> None:
    stages = "evaluation-stages:\n  - name: validity\n  - name: score\n"
    result = _evaluate(tmp_path, LATER_PYTHON, stages, scorer=IN_PROCESS)
    assert result.ok and result.metric == 0.5 and [passed for _, _, passed in result.stages] == [True, True], result


def test_nothing_the_search_evaluation_plants_reaches_the_held_out_one(tmp_path: Path, bwrap: None) -> None:
    holdout = "evaluation-holdout: 'cd \"$AUTOLOOP_PROGRAM_DIR\" && python3 code/holdout.py'\n"
    (tmp_path / ".autoloop/programs/demo/code").mkdir(parents=True)
    (tmp_path / ".autoloop/programs/demo/code/holdout.py").write_text(IN_PROCESS)
    searched = _evaluate(tmp_path, NEXT_RUN["shadow-json"], holdout, scorer=IN_PROCESS)
    assert searched.ok and searched.metric == 0.5, searched
    program = load_program(tmp_path, Path(".autoloop/programs/demo/program.md"))
    assert held_out.measure(program, tmp_path, isolation_for("bwrap", network=False).evaluation) == (0.5, "")
