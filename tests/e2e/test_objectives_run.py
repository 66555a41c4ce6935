"""End to end: AdaEvolve and AlphaEvolve on the two-objective sqrt_tradeoff example, with a loopback model.

Each iteration the loopback model rewrites the routine (more or fewer Newton steps, a better first guess); the
Population shows every entry's objectives and front, and the history says which rule kept each candidate.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import population_of
from autoloop_py.strategies.pareto import front_of, raw_values
from tests.browser import Browser
from tests.fake_openai import fake_openai
from tests.programs import install_strategy_program

REPO = Path(__file__).parents[2]
NAME = "sqrt_tradeoff"
PROGRAM = f".autoloop/programs/{NAME}"
ROUTINE = f"{PROGRAM}/code/routine.py"
HEADER = '"""Square root routine for the sqrt_tradeoff example; only the EVOLVE-BLOCK may change."""\n\nimport math\n\n'


def _reply(steps: int, guess: str, summary: str) -> str:
    body = (f"# EVOLVE-BLOCK-START\nNEWTON_STEPS = {steps}\n\n\ndef approx_sqrt(x: float) -> tuple[float, int]:\n"
            f'    """Returns (an approximation of sqrt(x), the arithmetic steps it took) for x > 0."""\n'
            f"    guess, steps = {guess}\n    for _ in range(NEWTON_STEPS):\n"
            "        guess = 0.5 * (guess + x / guess)\n        steps += 3\n    return guess, steps\n# EVOLVE-BLOCK-END\n")
    return f"SUMMARY: {summary}\nLESSON: none\n\n{ROUTINE}\n```python\n{HEADER}{body}```\n"


FREXP = "(lambda m, e: (2.0 ** (e // 2)) * (0.41731 + 0.59016 * m) * (2 ** 0.5 if e % 2 else 1.0))(*math.frexp(x)), 4"
# (summary, reply): cheaper and rougher, costlier and exact, a better first guess that is cheap and exact,
# then one dominated by that guess.
REPLIES = [
    ("three Newton steps from x", _reply(3, "x, 0", "three Newton steps from x")),
    ("twelve Newton steps from x", _reply(12, "x, 0", "twelve Newton steps from x")),
    ("frexp guess and four steps", _reply(4, FREXP, "frexp guess and four steps")),
    ("frexp guess and six steps", _reply(6, FREXP, "frexp guess and six steps")),
]
POINTERS = {
    "adaevolve": ("## Evolution Strategy\n\nThis program uses the **AdaEvolve** strategy. On every iteration, read "
                  "`strategy/adaevolve.md` and follow it literally.\n", "pareto_objectives_weight: 0.4\n"),
    "alphaevolve": ("## Evolution Strategy\n\nThis program uses the **AlphaEvolve** strategy. On every iteration, read "
                    "`strategy/alphaevolve.md` and follow it literally.\n", ""),
    "evox": ("## Evolution Strategy\n\nThis program uses the **EvoX** strategy. On every iteration, read "
             "`strategy/evox.md` and follow it literally.\n", "auto_generate_variation_operators: false\n"),
}


def _run(strategy: str, repo: Path, run_git, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
         frontmatter: str = "") -> tuple[MemoryStore, list[str]]:
    """Installs sqrt_tradeoff under the strategy and runs one iteration per reply; returns the memory and replies."""
    pointer, config = POINTERS[strategy]
    install_strategy_program(repo, run_git, PROGRAM, strategy, pointer, config)
    if frontmatter:
        path = repo / PROGRAM / "program.md"
        path.write_text(path.read_text().replace("seed: 7\n", f"seed: 7\n{frontmatter}"))
        run_git(repo, "commit", "-qam", "targets")
    memory = MemoryStore(repo)
    # Each strategy's first iteration records the evaluated Target as its seed, without the model.
    replies = [REPLIES[0][1]] + [reply for _, reply in REPLIES]
    with fake_openai("reply", monkeypatch) as server:
        for reply in replies:
            server.reply = reply
            assert main(["run", "--repo", str(repo), "--program", NAME, "--proposer", "llm",
                         "--model", "openai/test", "--iterations", "1"]) == 0
    return memory, replies


@pytest.mark.parametrize("strategy", ["adaevolve", "alphaevolve", "evox"])
def test_two_objectives_show_their_front_in_the_population_and_the_state(
    strategy: str, git_repo: Path, run_git, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    memory, replies = _run(strategy, git_repo, run_git, monkeypatch)
    state = statefile.parse_state(memory.read(f"{NAME}.md") or "", f"{NAME}.md")
    population = population_of(state, memory.read)
    entries = {c.approach: c for c in population.candidates if raw_values(c) is not None}
    values = {summary: raw_values(entries[summary]) for summary, _ in REPLIES if summary in entries}
    assert set(values) == {summary for summary, _ in REPLIES}, [c.approach for c in population.candidates]
    three, twelve = values["three Newton steps from x"], values["twelve Newton steps from x"]
    assert three is not None and twelve is not None
    assert three["cost"] == 9 and twelve["cost"] == 36 and twelve["accuracy"] > three["accuracy"]
    frexp4, frexp6 = values["frexp guess and four steps"], values["frexp guess and six steps"]
    assert frexp4 is not None and frexp6 is not None and frexp4["accuracy"] >= 15 and frexp4["cost"] == 16
    # The cheap exact routine is on the front; six steps of it cost more for no more digits.
    assert front_of(entries["frexp guess and four steps"]) == 0
    assert (front_of(entries["frexp guess and six steps"]) or 0) >= 1
    assert "- **Objectives**: accuracy " in (memory.read(f"{NAME}.md") or "")
    # The history says which rule kept (or did not keep) each candidate.
    kept = {e.change: e.status for e in state.history if e.is_detailed}
    texts = {e.change: e.text for e in state.history if e.is_detailed}
    assert kept["three Newton steps from x"] == "accepted"
    # The unchanged code (6 steps from x) is measured on the first run and counts as kept.
    first = next(t for c, t in texts.items() if c.endswith("the Target as it is") or c == "the unchanged Target")
    assert "**Baseline objectives**: accuracy 6.0687 · cost 18" in first
    assert "**Acceptance**: pareto: non-dominated by the 1 on the front" in texts["three Newton steps from x"]
    assert "**Acceptance**: pareto: non-dominated by the 2 on the front" in texts["twelve Newton steps from x"]
    assert kept["frexp guess and four steps"] == "accepted"
    assert kept["frexp guess and six steps"] == "rejected"
    assert "**Acceptance**: pareto: dominated" in texts["frexp guess and six steps"]
    if strategy != "alphaevolve":  # AdaEvolve's and EvoX's prompts name the trade-off and the parent's values
        prompt = memory.read(f"traces/{NAME}/prompts/{len(replies)}.md") or ""
        assert "Pareto trade-offs" in prompt and "- `cost`: lower is better (the parent: " in prompt


@pytest.mark.parametrize("strategy", ["adaevolve", "alphaevolve"])
def test_the_report_plots_the_front_and_the_grid(strategy: str, git_repo: Path, run_git,  # type: ignore[no-untyped-def]
                                                 monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`autoloop report` draws every entry with objectives in the Pareto plot, front 0 ringed and joined, and
    AlphaEvolve's feature cells as a MAP-Elites grid."""
    repo = git_repo
    memory, _ = _run(strategy, repo, run_git, monkeypatch)
    state = statefile.parse_state(memory.read(f"{NAME}.md") or "", f"{NAME}.md")
    population = population_of(state, memory.read)
    out = tmp_path / "pareto.html"
    assert main(["report", NAME, "--repo", str(repo), "--out", str(out)]) == 0
    recorded = [c for c in population.candidates if raw_values(c) is not None]
    with Browser() as browser:
        page = browser.page()
        page.open(out.as_uri(), "document.body && document.body.dataset.ready === '1'")
        assert page.evaluate("document.getElementById('pareto-section').hidden") is False
        assert page.evaluate("document.querySelectorAll('#pareto circle.dot').length") == len(recorded)
        ringed = page.evaluate("[...document.querySelectorAll('#pareto circle.front')].map(c => c.dataset.id).sort()")
        assert ringed == sorted(str(c.id) for c in recorded if front_of(c) == 0)
        assert page.evaluate("document.querySelector('#pareto polyline.frontline') !== null")
        header = page.evaluate("[...document.querySelectorAll('#population thead th')].map(th => th.textContent)")
        assert header[-2:] == ["objectives", "front"]
        cells = {c.cell for c in population.candidates if c.cell is not None}
        assert page.evaluate("document.getElementById('grid-section').hidden") is (not cells)
        assert page.evaluate("document.querySelectorAll('#grid td.filled').length") == len(cells)
        shot = page.screenshot(tmp_path / "pareto.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_per_objective_targets_complete_the_program(git_repo: Path, run_git,  # type: ignore[no-untyped-def]
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`target-metric: {accuracy: 15, cost: 20}`: the frexp routine (15.95 digits, 16 steps) completes the program."""
    memory, _ = _run("adaevolve", git_repo, run_git, monkeypatch, "target-metric: {accuracy: 15, cost: 20}\n")
    machine = statefile.parse_state(memory.read(f"{NAME}.md") or "", f"{NAME}.md").machine
    assert machine.completed  # at iteration 3: the fourth candidate (cost 22) was not kept
    assert machine.completed_reason == "objective targets reached: accuracy 15.9485 (target 15), cost 16 (target 20)"


def test_the_default_flow_keeps_what_the_front_does_not_dominate(git_repo: Path, run_git,  # type: ignore[no-untyped-def]
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The example as shipped (plain hill climbing, no Population): acceptance follows the objectives all the same."""
    shutil.copytree(REPO / PROGRAM, git_repo / PROGRAM, ignore=shutil.ignore_patterns("__pycache__"))
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "sqrt_tradeoff")
    with fake_openai("reply", monkeypatch) as server:
        for _, reply in REPLIES:
            server.reply = reply
            assert main(["run", "--repo", str(git_repo), "--program", NAME, "--proposer", "llm",
                         "--model", "openai/test", "--iterations", "1"]) == 0
    state = statefile.parse_state(MemoryStore(git_repo).read(f"{NAME}.md") or "", f"{NAME}.md")
    statuses = {e.change: e.status for e in state.history if e.is_detailed}
    assert statuses == {"three Newton steps from x": "accepted", "twelve Newton steps from x": "accepted",
                        "frexp guess and four steps": "accepted", "frexp guess and six steps": "rejected"}
    # The kept code on the program's branch is the last kept candidate, the cheap exact one.
    kept = subprocess.run(["git", "show", f"autoloop/{NAME}:{ROUTINE}"], cwd=git_repo, capture_output=True, text=True)
    assert "NEWTON_STEPS = 4" in kept.stdout
