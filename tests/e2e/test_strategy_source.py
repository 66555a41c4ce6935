"""End to end (issue 28, point 5): the strategy's playbook, prompts and code/config.yaml come from the commit the
iteration runs on, as program.md does, not from the working tree.

Uncommitted edits to the playbook's operator weights, to a prompt file and to `code/config.yaml` are not used
(the kept prompt shows the committed weights and framing; a config.yaml the engine would refuse does not stop the
run), and one warning per iteration names each differing file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.state.memory import MemoryStore
from tests.e2e.test_strategy_command import NAME, PROGRAM, _answers, _state, ran_repo  # noqa: F401 - fixture

EDITED = "UNCOMMITTED-FRAMING-EDIT"


def _more_exploitation(text: str) -> str:
    """Returns the playbook with weights exploitation 0.6 and exploration 0.2 (still summing to 1)."""
    return text.replace("| Exploitation | 0.50 |", "| Exploitation | 0.60 |").replace(
        "| Exploration | 0.30 |", "| Exploration | 0.20 |")


@pytest.fixture
def strategy_repo(ran_repo: Path, tmp_path: Path, run_git) -> Path:  # type: ignore[no-untyped-def]
    """Returns ran_repo with a customised AlphaEvolve strategy committed on main."""
    answers = _answers(tmp_path, "alphaevolve")
    assert main(["strategy", "add", "alphaevolve", "--program", NAME, "--answers", str(answers),
                 "--repo", str(ran_repo)]) == 0
    run_git(ran_repo, "add", "-A")
    run_git(ran_repo, "commit", "-qm", "adopt alphaevolve")
    return ran_repo


def test_uncommitted_strategy_edits_are_not_used_and_a_warning_names_them(
    strategy_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = strategy_repo / PROGRAM
    playbook = folder / "strategy/alphaevolve.md"
    committed = playbook.read_text()
    assert "| Exploitation | 0.50 |" in committed and "| Exploration | 0.30 |" in committed
    playbook.write_text(_more_exploitation(committed))
    for name in ("mutation.md", "crossover.md"):
        framing = folder / "strategy/prompts" / name
        framing.write_text(framing.read_text() + f"\n{EDITED}\n")
    # Read from the working tree, this cap would stop the run: the archive is larger than the population.
    (folder / "code/config.yaml").write_text("archive_size: 99\n")
    capsys.readouterr()

    assert main(["run", "--repo", str(strategy_repo), "--program", NAME, "--iterations", "2"]) == 0
    assert _state(strategy_repo).machine.iteration_count == 3
    prompt = MemoryStore(strategy_repo).read(f"traces/{NAME}/prompts/3.md") or ""
    assert "AlphaEvolve strategy" in prompt  # the strategy's own prompt, with the committed weights and framing
    assert "exploitation 0.5 · exploration 0.3 ·" in prompt and "exploitation 0.6" not in prompt
    assert ("DOMAIN-MUT-AE" in prompt or "DOMAIN-X-AE" in prompt) and EDITED not in prompt
    err = " ".join(capsys.readouterr().err.split())
    files = ", ".join(f"{PROGRAM}/{rel}" for rel in (
        "code/config.yaml", "strategy/alphaevolve.md", "strategy/prompts/crossover.md", "strategy/prompts/mutation.md",
    ))
    warning = f"{files} differ from the copies on main: this iteration uses main's (commit and push the edits to use them)"
    assert err.count(warning) == 2  # once per iteration
    assert "| Exploitation | 0.60 |" in playbook.read_text()  # the user's edits are left alone


def test_committed_strategy_edits_are_used_without_a_warning(  # type: ignore[no-untyped-def]
    strategy_repo: Path, capsys: pytest.CaptureFixture[str], run_git
) -> None:
    playbook = strategy_repo / PROGRAM / "strategy/alphaevolve.md"
    playbook.write_text(_more_exploitation(playbook.read_text()))
    run_git(strategy_repo, "commit", "-qam", "more exploitation")
    capsys.readouterr()
    assert main(["run", "--repo", str(strategy_repo), "--program", NAME, "--iterations", "2"]) == 0
    prompt = MemoryStore(strategy_repo).read(f"traces/{NAME}/prompts/3.md") or ""
    assert "exploitation 0.6 · exploration 0.2 ·" in prompt
    assert "differ from the copies" not in capsys.readouterr().err


def test_a_parallel_tick_records_with_the_committed_strategy(strategy_repo: Path) -> None:
    from autoloop_py.state.population import population_of

    folder = strategy_repo / PROGRAM
    playbook = folder / "strategy/alphaevolve.md"
    playbook.write_text(_more_exploitation(playbook.read_text()))
    # Read from the working tree, this cap would stop the run (the archive is larger than the population)…
    (folder / "code/config.yaml").write_text("archive_size: 99\n")
    assert main(["run", "--repo", str(strategy_repo), "--program", NAME, "--parallel", "2", "--barrier"]) == 0
    state = _state(strategy_repo)
    assert state.machine.iteration_count == 3 and [e.iteration for e in state.history][:2] == [3, 2]
    # …and this one would evict all but two entries when the tick records its slots.
    (folder / "code/config.yaml").write_text("population_size: 2\narchive_size: 1\n")
    assert main(["run", "--repo", str(strategy_repo), "--program", NAME, "--parallel", "2", "--barrier"]) == 0
    state = _state(strategy_repo)
    assert state.machine.iteration_count == 5
    assert len(population_of(state).candidates) > 2  # the committed cap (none set: the default) is the one used
    assert "| Exploitation | 0.60 |" in playbook.read_text()  # the user's edits are left alone
