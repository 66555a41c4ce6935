"""FunSearch tunables: the playbook's Settings table, overridden by `code/config.yaml` (strategies.md §4.3)."""

from __future__ import annotations

import keyword
from dataclasses import dataclass, replace
from typing import Any, Mapping

from autoloop_py.errors import ProgramError
from autoloop_py.program.playbook import Playbook
from autoloop_py.strategies import settings

SKELETON_FILE = "skeleton.md"
SCORE_REDUCTIONS = ("last", "average", "metric")
CLUSTER_SAMPLINGS = ("without_replacement", "with_replacement")
LENGTH_NORMALIZATIONS = ("range", "max")
SCORE_NORMALIZATIONS = ("range", "none")


@dataclass(frozen=True)
class FunSearchConfig:
    """FunSearch settings (strategies.md §4.3: Ref defaults, AL reset counter, Fork features per §5.6).

    Attributes:
      function_to_evolve: the name of the one function the search rewrites (e.g. priority).
      num_islands: islands founded by the seed (Ref 10); later edits of the state's Islands table win.
      functions_per_prompt: k, the earlier versions shown in a prompt (Ref 2).
      cluster_sampling_temperature_init: T_init of the cyclic cluster temperature (Ref 0.1).
      cluster_sampling_temperature_period: P, registrations per island over which T falls (Ref 30000).
      reset_every_registrations: registrations after which the weaker half of the islands resets (AL 1200).
      score_reduction: a cluster's score from per-test scores: `last` (Ref: the last test the
        evaluator lists), `average`, or `metric` (the evaluator's primary metric).
      cluster_sampling: `without_replacement` among clusters with p > 1e-6 (Fork), or
        `with_replacement`, i.i.d. draws (Ref).
      length_normalization: `range` divides by max − min + 1e-6 (Fork), `max` by max + 1e-6 (Ref).
      score_normalization: `range` (AL) scales the island's cluster scores to [0, 1] before the softmax, so that
        T_init means the same whatever the metric's units; `none` (Ref and Fork) uses them raw.
      deduplicate: discard a program whose output hash is already on its island (Fork; only when the
        evaluator reports an `output_hash`).
      max_population: the Population entries kept in the state file (AL; the spec has no cap): past it the
        entries outside every cluster go first, then the weakest cluster members, never an island's
        best nor the newest entry; their code stays on the memory branch.
      direction: the program's metric direction; scores are oriented with it (not a playbook setting).
    """

    function_to_evolve: str
    num_islands: int = 10
    functions_per_prompt: int = 2
    cluster_sampling_temperature_init: float = 0.1
    cluster_sampling_temperature_period: int = 30000
    reset_every_registrations: int = 1200
    score_reduction: str = "last"
    cluster_sampling: str = "without_replacement"
    length_normalization: str = "range"
    score_normalization: str = "range"
    deduplicate: bool = True
    max_population: int = 20
    direction: str = "higher"

    def temperature(self, num_programs: int) -> float:
        """Returns T = T_init·(1 − (n mod P)/P) for an island holding n registered programs."""
        period = self.cluster_sampling_temperature_period
        # (P − n mod P)/P equals 1 − (n mod P)/P but keeps the floor exactly T_init/P.
        return self.cluster_sampling_temperature_init * (period - num_programs % period) / period


def _identifier(value: Any) -> str:
    name = str(value).strip().strip("`").strip()
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError("the name of a Python function, such as `priority`")
    return name


SETTINGS: dict[str, settings.Convert] = {
    "function_to_evolve": _identifier,
    "num_islands": settings.whole(1),
    "functions_per_prompt": settings.whole(1),
    "cluster_sampling_temperature_init": settings.number(0, inclusive=False, example="0.1"),
    "cluster_sampling_temperature_period": settings.whole(1),
    "reset_every_registrations": settings.whole(1),
    "score_reduction": settings.choice(SCORE_REDUCTIONS),
    "cluster_sampling": settings.choice(CLUSTER_SAMPLINGS),
    "length_normalization": settings.choice(LENGTH_NORMALIZATIONS),
    "score_normalization": settings.choice(SCORE_NORMALIZATIONS),
    "deduplicate": settings.flag,
    "max_population": settings.whole(1),
}


def parse_funsearch_config(
    playbook: Playbook, overrides: Mapping[str, Any] | None = None, direction: str = "higher"
) -> FunSearchConfig:
    """Returns the settings of a customised FunSearch playbook, with `code/config.yaml` overrides applied."""
    values = settings.playbook_settings(playbook, SETTINGS, overrides, direction)
    if "function_to_evolve" not in values:
        raise ProgramError(
            "no `function_to_evolve` setting; add a `| function_to_evolve | <name> |` row to the Settings table",
            playbook.path,
        )
    return replace(FunSearchConfig(function_to_evolve=values.pop("function_to_evolve")), direction=direction, **values)
