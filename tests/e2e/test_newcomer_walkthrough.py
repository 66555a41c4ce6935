"""End to end: the README's newcomer walk-through, every command of it run by bash as written.

A fresh clone of this repository is installed by the README's own `python3 -m pip install path/to/autoloop_py`
line into a fresh venv; then the shell blocks of "Your first program", "Which proposer" and "Adding a strategy"
run in order in a user repository with a local bare origin, with that venv first on PATH: init, new with an
answers file, check, commit and push, run, status, edit (EDITOR is a script adding a Current Priority), run,
the llm proposer against tests/fake_openai.py's loopback server, strategy add with an answers file, check,
run. The README read is this checkout's; what is installed is a clone of its HEAD (commit before running).
The README's placeholders are replaced through `placeholders` below and nothing else is changed: a
command that fails, or a placeholder the README no longer has, fails the test, so the README cannot drift
from what works.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from autoloop_py.markdown import fenced_code, section_named, split_sections
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import population_of
from tests.fake_openai import fake_openai
from tests.programs import REPO

# The installs build autoloop twice and `init` once more; the runs sandbox their evaluations.
pytestmark = pytest.mark.xdist_group("newcomer-walkthrough")

# The README's sections whose shell blocks are the walk-through, in the order a newcomer runs them.
SECTIONS = ("your first program", "which proposer", "adding a strategy")
DUMMY_KEY = "sk-walkthrough-dummy"  # docs/models.md: any dummy OPENAI_API_KEY for your own server


def placeholders(clone: Path, user_repo: Path) -> dict[str, str]:
    """Returns what each placeholder of the README's commands stands for here (each must still be in the README)."""
    return {
        "path/to/autoloop_py": str(clone),  # "your clone of this repository"
        "path/to/your/repo": str(user_repo),
        "sk-…": DUMMY_KEY,  # "your provider's key": the loopback server takes any
    }


# The user's repository before the walk-through: the file that should get better and the command that measures it,
# as the README describes them ("Here `bench/hot.py` prints {"seconds": …}").
HOT = "def weight():\n    return 0.5\n"
BENCH = """import json, sys
sys.path.insert(0, "src")
from mylib.hot import weight
print(json.dumps({"seconds": abs(weight() - 0.9) + 1.0}))
"""
PRIORITY = "Try larger weights first."
# What `autoloop edit speedup` opens: a script adding a Current Priority, as a person would in an editor.
EDITOR = f"""import pathlib, sys
path = pathlib.Path(sys.argv[1])
text = path.read_text(encoding="utf-8")
heading = "## 🎯 Current Priorities\\n"
assert heading in text, text
path.write_text(text.replace(heading, heading + "\\n- {PRIORITY}\\n", 1), encoding="utf-8")
"""


def readme_commands(readme: str) -> list[str]:
    """Returns the shell commands of the walk-through's sections, in order; a heredoc stays with its command."""
    sections = split_sections(readme, level=3)
    commands: list[str] = []
    for name in SECTIONS:
        section = section_named(sections, name)
        assert section is not None, f"the README lost its section {name!r}"
        blocks = [code for info, code, _ in fenced_code(section.body) if info == "bash"]
        assert blocks, f"the README's section {name!r} has no bash block"
        for code in blocks:
            commands.extend(_commands(code))
    return commands


def _commands(code: str) -> list[str]:
    """Returns a bash block's commands: one a line, except a heredoc, which runs to its terminator."""
    commands: list[str] = []
    lines = iter(code.splitlines())
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.endswith("\\"):  # a continued line runs with the next
            line = line + "\n" + next(lines)
        heredoc = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if heredoc:
            body = []
            for inner in lines:
                body.append(inner)
                if inner.strip() == heredoc.group(1):
                    break
            else:
                raise AssertionError(f"the README's heredoc `{line}` never ends")
            line = "\n".join([line, *body])
        commands.append(line)
    return commands


def substituted(commands: list[str], table: dict[str, str]) -> list[str]:
    """Returns the commands with the README's placeholders replaced; fails on a placeholder the README dropped."""
    text = "\n".join(commands)
    for placeholder in table:
        assert placeholder in text, f"the README no longer writes {placeholder!r}: update PLACEHOLDERS"
    out = []
    for command in commands:
        for placeholder, value in table.items():
            command = command.replace(placeholder, value)
        out.append(command)
    return out


def script(commands: list[str], progress: Path) -> str:
    """Returns a bash script running each command in turn, stopping at the first that fails and naming it.

    `{ …; } || exit` rather than `set -e`, which would let `git add -A && git commit … && git push` fail quietly
    in its middle.
    """
    parts = ["set -u"]
    for number, command in enumerate(commands, 1):
        shown = command.splitlines()[0].replace("'", "'\\''")
        parts.append(f"{{\n{command}\n}} || {{ echo 'README command {number} failed: {shown}' >&2; exit 97; }}")
        parts.append(f"echo {number} >> '{progress}'")
    return "\n".join(parts) + "\n"


def fresh_venv(where: Path) -> Path:
    """Returns a new venv that sees this interpreter's packages (the dependencies), so installing needs no index."""
    # Its pip is this interpreter's, installing into the venv all the same (ensurepip cost 6 s of CPU a venv).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(where)], check=True)
    if sys.prefix != sys.base_prefix:  # the tests run in a venv: its packages are not the system's
        purelib = Path(sysconfig.get_paths(vars={"base": str(where), "platbase": str(where)})["purelib"])
        (purelib / "test-interpreter.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return where / "bin"


def llm_reply(body: dict[str, Any]) -> str:
    """Answers the llm proposer with a SEARCH/REPLACE raising weight() to 0.9, from whatever value the prompt shows."""
    prompt = "\n".join(str(message.get("content", "")) for message in body.get("messages", []))
    found = re.search(r"return (\d+(?:\.\d+)?)", prompt)
    current = found.group(1) if found else "0.5"
    return (f"SUMMARY: weight() returns the fastest configuration\n\nsrc/mylib/hot.py\n<<<<<<< SEARCH\n"
            f"    return {current}\n=======\n    return 0.9\n>>>>>>> REPLACE\n")


def _show(repo: Path, ref: str) -> str:
    return subprocess.run(["git", "show", ref], cwd=repo, capture_output=True, text=True, check=True).stdout


def test_the_readme_walkthrough_runs_as_written(
    git_repo_with_origin: Path, run_git: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = git_repo_with_origin
    (repo / "src/mylib").mkdir(parents=True)
    (repo / "src/mylib/hot.py").write_text(HOT)
    (repo / "bench").mkdir()
    (repo / "bench/hot.py").write_text(BENCH)
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "the library and its benchmark")
    run_git(repo, "push", "-q", "origin", "main")

    clone = tmp_path / "autoloop_py"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    bin_dir = fresh_venv(tmp_path / "venv")
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR, encoding="utf-8")

    commands = substituted(readme_commands((REPO / "README.md").read_text(encoding="utf-8")),
                           placeholders(clone, repo))
    progress = tmp_path / "progress"
    # The provider is the loopback server: OPENAI_API_BASE points at it, as docs/models.md says for your own server;
    # the key is the one the README's `export OPENAI_API_KEY=sk-…` line sets.
    with fake_openai("reply", monkeypatch, reply=llm_reply) as server:
        env = {key: value for key, value in os.environ.items()
               if key not in ("PYTHONPATH", "VIRTUAL_ENV", "VISUAL", "AUTOLOOP_MODEL", "OPENAI_BASE_URL")}
        env.update({
            "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}",  # `python3` and `autoloop` are the fresh venv's
            # The README's install lines, run as written, offline: the dependencies are this interpreter's (the
            # venv sees them) and the build backend too (a build-isolation env would fetch setuptools from an index).
            "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "EDITOR": f"{bin_dir / 'python3'} {editor}",
            "XDG_CACHE_HOME": str(tmp_path / "cache"),  # pip's cache and autoloop's log stay in the test's folder
        })
        done = subprocess.run(["bash", "-c", script(commands, progress)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{done.stderr[-4000:]}\n--- stdout ---\n{done.stdout[-4000:]}"
        prompts = [json.dumps(body) for body in server.bodies]
    assert progress.read_text().split() == [str(n) for n in range(1, len(commands) + 1)]
    assert shutil.which("autoloop", path=env["PATH"]) == str(bin_dir / "autoloop")
    # What the newcomer reads: new answered every marker, check passed the program, status showed the iterations.
    assert "every <CUSTOMIZE…> marker is resolved" in done.stdout
    assert "✓ speedup" in done.stdout and "Recent iterations" in done.stdout

    # The install was the clone's, a wheel of it travels with the repository, and the workflows install it.
    installed = json.loads(next((bin_dir.parent / "lib").glob("python*/site-packages/autoloop_py-*.dist-info"))
                           .joinpath("direct_url.json").read_text())
    assert installed["url"] == clone.as_uri()
    imported = subprocess.run([str(bin_dir / "python3"), "-c", "import autoloop_py; print(autoloop_py.__file__)"],
                              cwd=repo, env=env, capture_output=True, text=True, check=True).stdout
    assert Path(imported.strip()).is_relative_to(bin_dir.parent)  # not this checkout's autoloop_py
    wheels = sorted((repo / ".autoloop/wheels").glob("autoloop_py-*.whl"))
    assert len(wheels) == 1
    assert f".autoloop/wheels/{wheels[0].name}" in (repo / ".github/workflows/autoloop.yml").read_text()
    assert run_git(repo, "ls-tree", "-r", "--name-only", "origin/main", ".autoloop/wheels") \
        == f".autoloop/wheels/{wheels[0].name}"

    # The program over the existing file, its markers answered from answers.yaml; no stub code over it.
    program = repo / ".autoloop/programs/speedup"
    assert "<CUSTOMIZE" not in (program / "program.md").read_text()
    assert not (program / "code").exists()

    # The strategy's playbook and prompts in the program's strategy/, answered, and pushed.
    playbook = program / "strategy/adaevolve.md"
    answers = yaml.safe_load((repo / "strategy.yaml").read_text())
    assert playbook.is_file() and answers["problem framing"] in playbook.read_text()
    strategy_files = [playbook, *sorted((program / "strategy/prompts").glob("*.md"))]
    assert len(strategy_files) > 1 and not any("<CUSTOMIZE" in path.read_text() for path in strategy_files)
    assert "strategy/adaevolve.md" in _show(repo, "origin/main:.autoloop/programs/speedup/program.md")

    # Every iteration is recorded on memory/autoloop, the edit kept through the later runs.
    state = statefile.parse_state(_show(repo, "memory/autoloop:speedup.md"))
    # --iterations 3, one more after the edit, the llm one, then the strategy's two.
    assert state.machine.iteration_count == 3 + 1 + 1 + 2
    # AdaEvolve's first iteration seeded its Population with the current best (the llm's 0.9), the second added one.
    population = population_of(state, MemoryStore(repo).read)
    assert len({candidate.gen for candidate in population.candidates}) == 2
    assert min(population.candidates, key=lambda c: c.id).fitness == pytest.approx(1.0)
    assert state.priorities == (PRIORITY,)
    assert state.machine.initial_metric == pytest.approx(1.4)

    # The llm run asked the loopback model with the program's Goal and the priority the edit added, and kept its answer.
    assert prompts, "the llm proposer never reached the loopback server"
    assert set(server.keys) == {DUMMY_KEY}  # the README's `export OPENAI_API_KEY=…` is what litellm sent
    assert any("without changing its callers" in prompt and PRIORITY in prompt for prompt in prompts)
    assert "return 0.9" in _show(repo, "autoloop/speedup:src/mylib/hot.py")
    assert state.machine.best_metric == pytest.approx(1.0)


def test_a_failing_command_stops_the_walkthrough_even_inside_a_list(tmp_path: Path) -> None:
    """The runner's own guarantee: a command failing in the middle of `a && b && c` fails the script, naming it."""
    commands = _commands("echo one\ntrue && false && echo never   # a comment\ncat > f <<'EOF'\nx\nEOF\necho three\n")
    assert commands[1].startswith("true && false") and commands[2].endswith("\nEOF")
    progress = tmp_path / "progress"
    done = subprocess.run(["bash", "-c", script(commands, progress)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 97
    assert "README command 2 failed: true && false" in done.stderr and "never" not in done.stdout
    assert progress.read_text().split() == ["1"] and not (tmp_path / "f").exists()


def test_a_placeholder_the_readme_dropped_fails(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="path/to/your/repo"):
        substituted(["python3 -m pip install path/to/autoloop_py", "echo sk-…"], placeholders(tmp_path, tmp_path))
