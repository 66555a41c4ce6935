"""Everything a run parses of a state file, read at once: the runner's load and `autoloop edit` share it.

A hand edit that `run` would refuse later (an island's G of `lots`, a Models or Prompts row without numbers, a
Population entry whose fitness is not a number) is refused here, naming file:line, before anything is committed.
"""

from __future__ import annotations

from autoloop_py.state import file as statefile
from autoloop_py.state.population import population_of
from autoloop_py.strategies.runner import StrategyRunner, block_lines


def parse_everything(text: str, path: str, runner: StrategyRunner | None) -> statefile.StateFile:
    """Returns the state file parsed as a run reads all of it; raises StateError naming the first bad line.

    runner: the program's strategy, whose engine reads its `### ⚙️ Strategy State` block (None: the default flow).
    """
    state = statefile.parse_state(text, path)
    check_everything(state, runner)
    return state


def check_everything(state: statefile.StateFile, runner: StrategyRunner | None) -> None:
    """Raises StateError (naming the line) unless the Models, Prompts, Population and strategy state all read.

    The Machine State and the history are read by `statefile.parse_state` already.
    """
    statefile.models_of(state)
    statefile.prompts_of(state)
    if state.section_text(statefile.POPULATION) is None:
        return
    population = population_of(state)
    state_of = getattr(runner.engine, "state_of", None) if runner is not None else None
    if state_of is not None:
        with block_lines(state):
            state_of(population)
