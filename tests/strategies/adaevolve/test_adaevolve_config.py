"""Tests for strategies/adaevolve_config.py: the playbook's settings and presets tables, and config.yaml overrides."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from autoloop_py.errors import ProgramError
from autoloop_py.program.objectives import Objective
from autoloop_py.program.playbook import Playbook, customize_markers, marker_spans
from autoloop_py.strategies.adaevolve.config import DEFAULT_PRESETS, AdaEvolveConfig, Preset, parse_adaevolve_config

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE = ROOT / ".autoloop/strategies/adaevolve"
PACKAGE = ROOT / "autoloop_py/templates/strategies/adaevolve"
DIR = Path(".autoloop/programs/p")
PATH = DIR / "strategy/adaevolve.md"
CONFIG_YAML = ".autoloop/programs/p/code/config.yaml"
PLAYBOOK = """\
# AdaEvolve Strategy — p

## Settings

| Setting | Value | What it does |
|---|---|---|
| `num_islands` | 3 | islands |
| `population_size` | 12 | capacity |
| `intensity_min` | 0.6 | swapped below |
| `intensity_max` | 0.2 | swapped above |
| `use_migration` | off | no migration |
| `paradigm_max_uses` | 3 | uses |
| `archive_size` | 100 | never read by the reference |

## Island presets

| Preset | Pareto | Fitness | Novelty | Elite ratio |
|---|---|---|---|---|
| steady | 0.1 | 0.8 | 0.1 | 0.3 |
| wild | 0 | 0.2 | 0.8 | 0.05 |
"""


def playbook(text: str = PLAYBOOK) -> Playbook:
    return Playbook("adaevolve", PATH, text, DIR)


def error_of(text: str = PLAYBOOK, overrides: dict[str, object] | None = None) -> str:
    with pytest.raises(ProgramError) as caught:
        parse_adaevolve_config(playbook(text), overrides or {})
    return str(caught.value)


def filled(text: str) -> str:
    """Returns text with every CUSTOMIZE marker replaced by plain words."""
    out, cursor = [], 0
    for start, end in marker_spans(text):
        out.append(text[cursor:start] + "filled in")
        cursor = end
    return "".join(out) + text[cursor:]


def test_the_template_is_byte_identical_to_the_package_copy_and_has_markers() -> None:
    files = sorted(p.relative_to(TEMPLATE) for p in TEMPLATE.rglob("*.md"))
    assert files == [Path("CUSTOMIZE.md"), Path("prompts/paradigm.md"), Path("prompts/solution.md"), Path("strategy.md")]
    for rel in files:
        assert (TEMPLATE / rel).read_bytes() == (PACKAGE / rel).read_bytes(), rel
    labels = {m.label for rel in files[1:] for m in customize_markers((TEMPLATE / rel).read_text(), rel)}
    assert {"program-name", "problem framing", "tuning notes", "island presets", "domain knowledge", "validity checks",
            "idea space", "dead ends"} == labels


def test_the_customised_template_gives_the_reference_defaults() -> None:
    config = parse_adaevolve_config(playbook(filled((TEMPLATE / "strategy.md").read_text())), {})
    assert config == AdaEvolveConfig()
    assert (config.population_size, config.num_islands, config.decay, config.migration_interval) == (20, 2, 0.9, 15)
    assert config.presets == DEFAULT_PRESETS and config.attempts == 3


def test_a_playbook_sets_settings_and_presets() -> None:
    config = parse_adaevolve_config(playbook(), {}, direction="lower")
    assert (config.num_islands, config.population_size, config.use_migration, config.paradigm_max_uses) == (
        3, 12, False, 3)
    assert (config.intensity_min, config.intensity_max) == (0.2, 0.6)
    assert config.presets == (Preset("steady", 0.1, 0.8, 0.1, 0.3), Preset("wild", 0.0, 0.2, 0.8, 0.05))
    assert config.direction == "lower" and config.preset("wild") is not None and config.preset("none") is None


def test_without_tables_the_defaults_hold() -> None:
    assert parse_adaevolve_config(playbook("# AdaEvolve\n\nNo tables.\n"), None) == AdaEvolveConfig()


def test_config_yaml_overrides_the_playbook() -> None:
    overrides = yaml.safe_load(
        "population_size: 8\nuse_migration: true\ndecay: 0.5\nenable_error_retry: false\n"
        "fitness_key: null\npareto_objectives: []\nhigher_is_better: {speed: true}\nsome_program_key: 3\n"
    )
    config = parse_adaevolve_config(playbook(), overrides)
    assert (config.population_size, config.use_migration, config.decay, config.attempts) == (8, True, 0.5, 1)
    assert config.higher_is_better == (("speed", True),)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("| `population_size` | 12 |", "| `population_size` | twelve |", "`population_size` must be a whole number, got 'twelve'"),
    ("| `use_migration` | off |", "| `use_migration` | maybe |", "`use_migration` must be yes or no, got 'maybe'"),
    ("| `population_size` | 12 |", "| `population_sise` | 12 |", "unknown setting `population_sise`; did you mean `population_size`?"),
    ("| `paradigm_max_uses` | 3 |", "| `num_islands` | 3 |", "setting `num_islands` appears twice"),
    ("| `population_size` | 12 |", "| `population_size` | 1 |", "`population_size` must be at least 2"),
    ("| `paradigm_max_uses` | 3 |", "| `decay` | 1 |", "`decay` must lie strictly between 0 and 1"),
    ("| `num_islands` | 3 |", "| `num_islands` | 6 |", "`num_islands` is 6, above max_islands 5"),
    ("| `paradigm_max_uses` | 3 |", "| `diversity_strategy` | ast |", "`diversity_strategy` must be `code`"),
])
def test_playbook_errors_name_the_row(old: str, new: str, message: str) -> None:
    text = PLAYBOOK.replace(old, new)
    line = [i for i, row in enumerate(text.splitlines(), start=1) if row.startswith(new)][-1]
    assert error_of(text).startswith(f".autoloop/programs/p/strategy/adaevolve.md:{line}: {message}")


@pytest.mark.parametrize(("overrides", "message"), [
    ({"population_size": True}, "`population_size` must be a whole number, got True"),
    ({"decay": "fast"}, "`decay` must be a number, got 'fast'"),
    ({"decay": float("nan")}, "`decay` must be a finite number"),
    ({"fitness_key": "combined_score"}, "`fitness_key` must stay unset"),
    ({"use_unified_archive": False}, "`use_unified_archive` must be true"),
    ({"higher_is_better": ["a"]}, "`higher_is_better` must be a mapping of metric names to true/false"),
])
def test_config_yaml_errors_name_the_file(overrides: dict[str, object], message: str) -> None:
    assert error_of(overrides=overrides).startswith(f"{CONFIG_YAML}: {message}")


def test_a_cross_field_error_points_at_the_file_that_set_the_culprit() -> None:
    assert error_of(overrides={"num_islands": 9}).startswith(f"{CONFIG_YAML}: `num_islands` is 9")
    assert error_of(overrides={"max_islands": 2}).startswith(
        ".autoloop/programs/p/strategy/adaevolve.md:7: `num_islands` is 3, above max_islands 2")


@pytest.mark.parametrize(("row", "message"), [
    ("| wild | 0 | 0.2 | 0.8 | 1.5 |", "preset `wild`: elite ratio '1.5' must be between 0 and 1"),
    ("| wild | 0 | lots | 0.8 | 0.05 |", "preset `wild`: fitness 'lots' must be a number >= 0"),
    ("| steady | 0 | 0.2 | 0.8 | 0.05 |", "preset `steady` appears twice"),
    ("| two words | 0 | 0.2 | 0.8 | 0.05 |", "preset name 'two words' must be one word"),
])
def test_preset_errors_name_the_row(row: str, message: str) -> None:
    text = PLAYBOOK.replace("| wild | 0 | 0.2 | 0.8 | 0.05 |", row)
    assert error_of(text).startswith(f".autoloop/programs/p/strategy/adaevolve.md:{len(text.splitlines())}: {message}")


def test_a_presets_table_needs_its_columns() -> None:
    text = PLAYBOOK.replace("| Novelty |", "| Surprise |")
    assert "the presets table has no `novelty` column" in error_of(text)


def test_direction_must_be_known() -> None:
    with pytest.raises(ValueError):
        parse_adaevolve_config(playbook(), {}, direction="sideways")


def test_retries_can_be_turned_off() -> None:
    assert replace(AdaEvolveConfig(), max_error_retries=0).attempts == 1


def test_pareto_objectives_take_directions_from_higher_is_better_or_the_frontmatter() -> None:
    overrides = {"pareto_objectives": ["accuracy", "latency_ms"], "higher_is_better": {"latency_ms": False},
                 "pareto_objectives_weight": 0.4}
    config = parse_adaevolve_config(playbook(), overrides)
    assert config.objectives == (Objective("accuracy", "higher"), Objective("latency_ms", "lower"))
    declared = (Objective("accuracy", "higher"), Objective("latency_ms", "lower"))
    assert parse_adaevolve_config(playbook(), {}, "higher", declared).objectives == declared
    assert parse_adaevolve_config(playbook(), {"pareto_objectives": ["latency_ms"]}, "higher", declared).objectives == (
        Objective("latency_ms", "lower"),)
    assert parse_adaevolve_config(playbook()).objectives == ()


def test_pareto_objectives_the_frontmatter_does_not_declare_are_refused_with_the_file() -> None:
    with pytest.raises(ProgramError) as caught:
        parse_adaevolve_config(playbook(), {"pareto_objectives": ["cost"]}, "higher", (Objective("accuracy", "higher"),))
    assert str(caught.value).startswith(
        f"{CONFIG_YAML}: `pareto_objectives` names `cost`, which the frontmatter's `objectives:` does not declare")
