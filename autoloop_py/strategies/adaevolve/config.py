"""AdaEvolve tunables (strategies.md §2.3): the playbook's settings and presets tables, then `code/config.yaml`."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from autoloop_py import markdown as md
from autoloop_py.errors import ProgramError
from autoloop_py.program.objectives import Objective
from autoloop_py.program.playbook import Playbook
from autoloop_py.strategies import pareto, settings


@dataclass(frozen=True)
class Preset:
    """An island preset: the elite-score weights and protected share of an island's archive.

    Attributes:
      name: balanced, quality, diversity, pareto or exploration (or a playbook's own).
      pareto: the Pareto weight (added to the fitness weight in scalar mode).
      fitness: the fitness weight.
      novelty: the novelty weight.
      elite_ratio: the share of the archive protected from eviction.
    """

    name: str
    pareto: float
    fitness: float
    novelty: float
    elite_ratio: float


DEFAULT_PRESETS = (
    Preset("balanced", 0.4, 0.3, 0.3, 0.2),
    Preset("quality", 0.2, 0.6, 0.2, 0.3),
    Preset("diversity", 0.3, 0.2, 0.5, 0.1),
    Preset("pareto", 0.6, 0.2, 0.2, 0.2),
    Preset("exploration", 0.2, 0.3, 0.5, 0.05),
)


@dataclass(frozen=True)
class AdaEvolveConfig:
    """AdaEvolve settings; defaults are the reference dataclass's (strategies.md §2.3).

    Attributes:
      population_size: the capacity of each island's archive.
      num_islands: the islands the run starts with (they use the archive weights below).
      decay: ρ, the decay of G, UCB rewards and decayed visits.
      intensity_min: the floor of the exploration intensity (swapped with the ceiling if inverted).
      intensity_max: the ceiling of the exploration intensity.
      use_adaptive_search: intensity from G; when false, fixed_intensity.
      fixed_intensity: the intensity when adaptive search is off.
      use_ucb_selection: choose the next island by UCB; when false, round robin.
      use_migration: ring migration on or off.
      migration_interval: iterations between migrations.
      migration_count: top programs each island sends.
      use_unified_archive: the quality-diversity archive (the only archive autoloop implements).
      local_context_program_ratio: the share of context programs taken from the parent's island.
      archive_elite_ratio: the protected share of a starting island's archive.
      pareto_weight: a starting island's Pareto weight (folded into fitness in scalar mode).
      fitness_weight: a starting island's fitness weight.
      novelty_weight: a starting island's novelty weight.
      k_neighbors: k of the k-nearest-neighbour novelty.
      diversity_strategy: how distance is measured ("code", the only one implemented).
      use_dynamic_islands: spawn islands when productivity collapses.
      max_islands: the most islands there can be.
      spawn_productivity_threshold: spawn when improvements per evaluation fall below this.
      spawn_cooldown_iterations: the least number of iterations between spawns.
      use_paradigm_breakthrough: ask the guide LLM for paradigms on stagnation.
      paradigm_window_size: W, the length of the global-improvement window.
      paradigm_improvement_threshold: θ, stagnation when the full window's rate is below it.
      paradigm_max_uses: the uses of each paradigm before rotating on.
      paradigm_num_to_generate: ideas asked of (and installed from) one guide call.
      paradigm_max_tried: the tried ideas kept with their outcomes.
      paradigm_retry_cooldown: iterations to wait after a guide reply had no valid idea, doubling with each such
        reply in a row up to 8 times (§5 decision 3; AL 5, the reference 0: it re-asks at once).
      enable_error_retry: retry an iteration whose candidate failed to evaluate.
      max_error_retries: the retries after the first attempt.
      higher_is_better: per-metric directions of the Pareto objectives (a name it lacks is higher-is-better).
      fitness_key: the reference's score key; autoloop ranks by the program's metric, so it must stay unset.
      pareto_objectives: the metrics ranked by non-dominated sorting in admission (empty: the frontmatter's
        `objectives:`, if any).
      pareto_objectives_weight: the weight of the Pareto percentile in the elite score (with objectives).
      num_context_programs: m, the context programs shown beside the parent.
      max_iterations: the run length the reference uses.
      random_seed: the seed recorded in the state's rng_seed.
      diff_based_generation: ask for SEARCH/REPLACE diffs (else a full rewrite).
      presets: the presets a spawned island draws from, in table order.
      direction: the program's metric direction, "higher" or "lower" (fitness f = m or −m).
      objectives: the Pareto objectives in force, with directions (pareto_objectives or the frontmatter's).
    """

    population_size: int = 20
    num_islands: int = 2
    decay: float = 0.9
    intensity_min: float = 0.15
    intensity_max: float = 0.5
    use_adaptive_search: bool = True
    fixed_intensity: float = 0.4
    use_ucb_selection: bool = True
    use_migration: bool = True
    migration_interval: int = 15
    migration_count: int = 5
    use_unified_archive: bool = True
    local_context_program_ratio: float = 0.6
    archive_elite_ratio: float = 0.2
    pareto_weight: float = 0.4
    fitness_weight: float = 1.0
    novelty_weight: float = 0.0
    k_neighbors: int = 5
    diversity_strategy: str = "code"
    use_dynamic_islands: bool = True
    max_islands: int = 5
    spawn_productivity_threshold: float = 0.015
    spawn_cooldown_iterations: int = 30
    use_paradigm_breakthrough: bool = True
    paradigm_window_size: int = 10
    paradigm_improvement_threshold: float = 0.12
    paradigm_max_uses: int = 2
    paradigm_num_to_generate: int = 3
    paradigm_max_tried: int = 10
    paradigm_retry_cooldown: int = 5
    enable_error_retry: bool = True
    max_error_retries: int = 2
    higher_is_better: tuple[tuple[str, bool], ...] = ()
    fitness_key: str | None = None
    pareto_objectives: tuple[str, ...] = ()
    pareto_objectives_weight: float = 0.0
    num_context_programs: int = 4
    max_iterations: int = 100
    random_seed: int = 42
    diff_based_generation: bool = True
    presets: tuple[Preset, ...] = DEFAULT_PRESETS
    direction: str = "higher"
    objectives: tuple[Objective, ...] = ()

    @property
    def attempts(self) -> int:
        """Returns the attempts an iteration may make: 1 + max_error_retries with retries on, else 1."""
        return 1 + self.max_error_retries if self.enable_error_retry else 1

    def preset(self, name: str) -> Preset | None:
        """Returns the preset with that name, or None."""
        return next((p for p in self.presets if p.name == name), None)


# Reference keys that are present but never read (§2.3): accepted so a ported config.yaml loads.
IGNORED_KEYS = frozenset(
    {"stagnation_threshold", "stagnation_multi_child_count", "sibling_context_limit", "archive_size"}
)
_NONE_WORDS = ("", "—", "–", "-", "none", "null", "~")
_PRESET_COLUMNS = ("preset", "pareto", "fitness", "novelty", "elite ratio")

# ---------------------------------------------------------------- value readers


def _text(value: Any) -> str:
    if isinstance(value, (dict, list, bool)) or value is None:
        raise ValueError("a word")
    return str(value).strip().strip("`").strip().lower()


def _optional_text(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value.strip().strip("`").lower() in _NONE_WORDS):
        return None
    return _text(value)


# A setting's reader follows from its field's type; presets, direction and objectives are not table settings.
_READERS: dict[str, settings.Convert] = {
    "int": settings.whole(), "float": settings.real, "bool": settings.flag, "str": _text, "str | None": _optional_text,
    "tuple[str, ...]": settings.names, "tuple[tuple[str, bool], ...]": settings.directions,
}
_KINDS = {f.name: _READERS[f.type] for f in fields(AdaEvolveConfig) if f.name != "direction" and f.type in _READERS}


# ---------------------------------------------------------------- parsing


def parse_adaevolve_config(
    playbook: Playbook, overrides: Mapping[str, Any] | None = None, direction: str = "higher",
    declared: Sequence[Objective] = (),
) -> AdaEvolveConfig:
    """Returns the tunables of a customised AdaEvolve playbook, with `code/config.yaml` overrides applied."""
    settings.check_direction(direction)
    values, lines = settings.table_settings(playbook.text, playbook.path, _KINDS, IGNORED_KEYS)
    presets = _presets(md.tables(playbook.text), playbook.path)
    config = replace(AdaEvolveConfig(), **values, presets=presets, direction=direction)
    config_path = settings.config_path(playbook)
    given = {key: value for key, value in (overrides or {}).items() if key in _KINDS}
    config = replace(config, **{key: settings.converted(_KINDS, key, value, config_path, None)
                                for key, value in given.items()})
    if config.intensity_min > config.intensity_max:
        config = replace(config, intensity_min=config.intensity_max, intensity_max=config.intensity_min)
    for key, problem in _problems(config):
        where = (config_path, None) if key in given else (playbook.path, lines.get(key))
        raise ProgramError(f"`{key}` {problem}", *where)
    where = (config_path, None) if "pareto_objectives" in given else (playbook.path, lines.get("pareto_objectives"))
    # The Pareto objectives: `pareto_objectives` with directions, else the frontmatter's `objectives:`.
    objectives = pareto.in_force(config.pareto_objectives, dict(config.higher_is_better), declared, where)
    return replace(config, objectives=objectives)


def _presets(tables: list[md.Table], path: Path) -> tuple[Preset, ...]:
    """Returns the presets table's rows (the defaults when the playbook has none)."""
    table = next((t for t in tables if t.header and md.normalize_heading(t.header[0]) == "preset"), None)
    if table is None:
        return DEFAULT_PRESETS
    header = [md.normalize_heading(cell) for cell in table.header]
    missing = [name for name in _PRESET_COLUMNS if name not in header]
    if missing:
        raise ProgramError(f"the presets table has no `{missing[0]}` column; its columns are "
                           "Preset | Pareto | Fitness | Novelty | Elite ratio", path, table.start + 1)
    presets: list[Preset] = []
    for row in table.rows:
        preset = _preset_row(row, [header.index(name) for name in _PRESET_COLUMNS], path)
        if any(p.name == preset.name for p in presets):
            raise ProgramError(f"preset `{preset.name}` appears twice; give each row its own name", path, row.line + 1)
        presets.append(preset)
    if not presets:
        raise ProgramError("the presets table has no rows; list at least one preset", path, table.start + 1)
    return tuple(presets)


def _preset_row(row: md.TableRow, columns: list[int], path: Path) -> Preset:
    cells = [row.cells[i].strip().strip("`") if i < len(row.cells) else "" for i in columns]
    name = cells[0].strip().lower()
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ProgramError(f"preset name {cells[0]!r} must be one word such as `quality`", path, row.line + 1)
    numbers = []
    for title, cell in zip(_PRESET_COLUMNS[1:], cells[1:]):
        try:
            number = settings.real(cell)
        except ValueError:
            number = -1.0
        if number < 0 or (title == "elite ratio" and number > 1):
            limit = "between 0 and 1" if title == "elite ratio" else "a number >= 0"
            raise ProgramError(f"preset `{name}`: {title} {cell!r} must be {limit}", path, row.line + 1)
        numbers.append(number)
    return Preset(name, *numbers)


# ---------------------------------------------------------------- checks


def _problems(c: AdaEvolveConfig) -> list[tuple[str, str]]:
    """Returns (key, what is wrong) for every setting out of range; the first is reported."""
    unit = "must lie between 0 and 1"
    checks = [
        ("population_size", c.population_size >= 2, "must be at least 2 (an archive needs room to compare)"),
        ("num_islands", c.num_islands >= 1, "must be at least 1"),
        ("max_islands", c.max_islands >= 1, "must be at least 1"),
        ("decay", 0 < c.decay < 1, "must lie strictly between 0 and 1"),
        ("intensity_min", 0 <= c.intensity_min <= 1, unit),
        ("intensity_max", 0 <= c.intensity_max <= 1, unit),
        ("fixed_intensity", 0 <= c.fixed_intensity <= 1, unit),
        ("migration_interval", c.migration_interval >= 1, "must be at least 1"),
        ("migration_count", c.migration_count >= 0, "must be at least 0"),
        ("use_unified_archive", c.use_unified_archive, "must be true: autoloop has only the quality-diversity archive"),
        ("local_context_program_ratio", 0 <= c.local_context_program_ratio <= 1, unit),
        ("archive_elite_ratio", 0 <= c.archive_elite_ratio <= 1, unit),
        ("pareto_weight", c.pareto_weight >= 0, "must be at least 0"),
        ("fitness_weight", c.fitness_weight >= 0, "must be at least 0"),
        ("novelty_weight", c.novelty_weight >= 0, "must be at least 0"),
        ("k_neighbors", c.k_neighbors >= 1, "must be at least 1"),
        ("diversity_strategy", c.diversity_strategy == "code", "must be `code`: code distance is the one implemented"),
        ("spawn_productivity_threshold", c.spawn_productivity_threshold >= 0, "must be at least 0"),
        ("spawn_cooldown_iterations", c.spawn_cooldown_iterations >= 0, "must be at least 0"),
        ("paradigm_window_size", c.paradigm_window_size >= 1, "must be at least 1"),
        ("paradigm_improvement_threshold", 0 <= c.paradigm_improvement_threshold <= 1, unit),
        ("paradigm_max_uses", c.paradigm_max_uses >= 1, "must be at least 1"),
        ("paradigm_num_to_generate", c.paradigm_num_to_generate >= 1, "must be at least 1"),
        ("paradigm_max_tried", c.paradigm_max_tried >= 0, "must be at least 0"),
        ("paradigm_retry_cooldown", c.paradigm_retry_cooldown >= 0, "must be at least 0"),
        ("max_error_retries", c.max_error_retries >= 0, "must be at least 0"),
        ("fitness_key", c.fitness_key is None,
         "must stay unset: autoloop ranks candidates by the metric program.md names"),
        ("pareto_objectives_weight", c.pareto_objectives_weight >= 0, "must be at least 0"),
        ("num_context_programs", c.num_context_programs >= 0, "must be at least 0"),
        ("max_iterations", c.max_iterations >= 1, "must be at least 1"),
        ("num_islands", c.num_islands <= c.max_islands,
         f"is {c.num_islands}, above max_islands {c.max_islands}; lower it or raise max_islands"),
    ]
    return [(key, problem) for key, ok, problem in checks if not ok]
