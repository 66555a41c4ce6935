"""End to end: under a strategy, `novelty: embedding` compares a candidate with its island's Population members.

A tiny program runs EvoX offline: its first iteration records the Target as the seed entry, the next one
proposes the seed's code with its variables renamed, which is not evaluated and adds no Population entry.
"""

from __future__ import annotations

import json
import random
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.proposers.base import Proposal, ProposalRequest, Proposer
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import population_of
from tests.programs import install_tiny_strategy_program, program_md

NAME = "renaming"
FOLDER = f".autoloop/programs/{NAME}"
VALUE = f"{FOLDER}/code/value.py"
SEED = "# EVOLVE-BLOCK-START\nbase = 3\nscale = base * 2\nx = scale + base\n# EVOLVE-BLOCK-END\n"
EVALUATE = ('import json, os\nns = {}\nexec(open("code/value.py").read(), ns)\n'
            'json.dump({"score": ns["x"]}, open(os.environ["AUTOLOOP_RESULT"], "w"))\n')
START = datetime(2026, 4, 5, 6, 7, tzinfo=timezone.utc)


class _Rename:
    name = "tune"

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        source = re.sub(r"\bscale\b", "factor", re.sub(r"\bbase\b", "root", request.files[VALUE]))
        return Proposal({VALUE: source}, "rename base and scale")


def _factory(name: str, **kwargs: object) -> Proposer:
    return _Rename()


def test_a_renamed_parent_is_not_evaluated_and_joins_no_island(
    git_repo: Path, run_git  # type: ignore[no-untyped-def]
) -> None:
    files = {"program.md": program_md("Renaming", "Make x large.", frontmatter={"novelty": "embedding"}),
             "code/value.py": SEED, "code/evaluate.py": EVALUATE}
    install_tiny_strategy_program(git_repo, run_git, FOLDER, "evox", files)
    program = load_program(git_repo, Path(FOLDER) / "program.md")
    options = RunOptions(proposer="tune", proposer_factory=_factory)
    outcomes = [run_iteration(git_repo, program, options, START + timedelta(minutes=i)) for i in range(2)]
    assert outcomes[1].status == "rejected" and "evaluate" not in outcomes[1].timings
    assert outcomes[1].reason == ("not evaluated: similarity 1.0000 to candidate 1 is above novelty-threshold 0.999 "
                                  "(local vectors)")
    state = statefile.parse_state(MemoryStore(git_repo).read(f"{NAME}.md") or "", f"{NAME}.md")
    assert [c.id for c in population_of(state).candidates] == [1]
    # The first iteration evaluated the Target as it is: its row keeps its vector, which the second one read back.
    memory = MemoryStore(git_repo)
    seed_row = next(p for p in memory.list(f"traces/{NAME}/rows/") if p.endswith("-1.json"))
    assert json.loads(memory.read(seed_row) or "{}")["metadata"]["embedding"]["by"] == "local"
