"""The user's checkout the git and text attacks aim at: a counter program committed and pushed to a bare origin."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from tests.programs import program_md

PROG = ".autoloop/programs/counter"
VALUE = "# EVOLVE-BLOCK-START\nx = {x}\n# EVOLVE-BLOCK-END\n"
EVALUATE = 'import json\nns = {}\nexec(open("code/value.py").read(), ns)\nprint(json.dumps({"score": ns["x"]}))\n'


def counter_checkout(
    tmp_path: Path, run_git: Callable[..., str], extra: Mapping[str, str] | None = None
) -> tuple[Path, Path]:
    """Returns (work, origin): `work` holds the counter program (and `extra` files), pushed to the bare `origin`."""
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    run_git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    run_git(tmp_path, "init", "-q", "-b", "main", str(work))
    run_git(work, "config", "user.name", "Test")
    run_git(work, "config", "user.email", "test@example.invalid")
    (work / PROG / "code").mkdir(parents=True)
    (work / PROG / "program.md").write_text(program_md("Counter", "Make `x` large.", frontmatter={"evaluation-timeout": 20}))
    (work / PROG / "code/value.py").write_text(VALUE.format(x=1.0))
    (work / PROG / "code/evaluate.py").write_text(EVALUATE)
    for path, text in (extra or {}).items():
        (work / path).write_text(text)
    run_git(work, "add", "-A")
    run_git(work, "commit", "-qm", "initial")
    run_git(work, "remote", "add", "origin", str(origin))
    run_git(work, "push", "-q", "origin", "main")
    return work, origin
