"""End to end (issue 28, point 8): an evaluation whose interpreter is a virtualenv under /tmp runs in bubblewrap.

The command named `/tmp/…/venv/bin/python3`; bubblewrap failed with "Can't create file at /tmp/…/bin/python3"
(the file was bound again inside the virtualenv already shown read-only, where it is a link). Now the
virtualenv and the installation it links to are shown read-only wherever they live, and nothing in them
can be changed by the evaluated code.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.sandbox.run import bwrap_status
from autoloop_py.state import file as statefile
from tests.programs import program_md

PROG = ".autoloop/programs/counter"
EVALUATE = """\
import json, pathlib, sys
import nc_marker  # only the virtualenv has it
ns = {}
exec(open("code/value.py").read(), ns)
tries = []
for victim in (pathlib.Path(sys.prefix) / "pwned", pathlib.Path(nc_marker.__file__)):
    try:
        victim.write_text("changed by the evaluation")
        tries.append(str(victim))
    except OSError:
        pass
print(json.dumps({"score": ns["x"] * nc_marker.FACTOR, "written": tries, "prefix": sys.prefix}))
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """Returns a virtualenv under tmp_path (under /tmp) whose site-packages holds the module nc_marker."""
    if not bwrap_status()[0]:
        pytest.skip(f"needs a working bubblewrap sandbox: {bwrap_status()[1]}")
    folder = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
    site = subprocess.run([str(folder / "bin/python3"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "nc_marker.py").write_text("FACTOR = 2\n")
    return folder


def test_an_evaluation_run_by_a_virtualenv_under_tmp_sees_it_read_only(
    venv: Path, git_repo_with_origin: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = git_repo_with_origin
    assert str(venv).startswith("/tmp/")
    text = program_md("Counter", "Make x large.").replace("python3 code/evaluate.py", f"{venv}/bin/python3 code/evaluate.py")
    (repo / PROG / "code").mkdir(parents=True)
    (repo / PROG / "program.md").write_text(text)
    (repo / PROG / "code/value.py").write_text("# EVOLVE-BLOCK-START\nx = 1.5\n# EVOLVE-BLOCK-END\n")
    (repo / PROG / "code/evaluate.py").write_text(EVALUATE)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "counter evaluated by a virtualenv under /tmp")
    _git(repo, "push", "-q", "origin", "main")
    marker = next(venv.rglob("nc_marker.py"))

    code = main(["run", "--repo", str(repo), "--program", "counter", "--isolation", "bwrap", "--proposer", "tune"])
    out = capsys.readouterr()
    assert code == 0, out
    assert "Can't create file" not in out.out + out.err
    state = statefile.parse_state(_git(repo, "show", "origin/memory/autoloop:counter.md") + "\n", "counter.md")
    assert state.machine.initial_metric == 3.0  # 1.5 × the virtualenv's FACTOR: its site-packages were seen
    assert state.history[0].status in ("accepted", "rejected") and state.history[0].metric is not None
    # The evaluated code could change nothing of the virtualenv.
    assert not (venv / "pwned").exists() and marker.read_text() == "FACTOR = 2\n"
