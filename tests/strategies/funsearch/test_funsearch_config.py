"""Tests for strategies/funsearch_config.py: the playbook's Settings table and `code/config.yaml` overrides (§4.3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.errors import ProgramError
from autoloop_py.program.playbook import Playbook, customize_markers, resolve_markers
from autoloop_py.strategies.funsearch.config import FunSearchConfig, parse_funsearch_config

REPO = Path(__file__).resolve().parents[3]
TEMPLATE = REPO / ".autoloop/strategies/funsearch"
SHIPPED = REPO / "autoloop_py/templates/strategies/funsearch"
DIR = Path(".autoloop/programs/p")
PATH = DIR / "strategy/funsearch.md"
CONFIG = ".autoloop/programs/p/code/config.yaml"
TABLE = """\
# FunSearch Strategy — p

## Settings

| Setting | Value | Meaning |
|---|---|---|
| function_to_evolve | `priority` | The function. |
| num_islands | 4 | Islands. |
| cluster_sampling_temperature_init | 0.05 | T_init. |
| score_reduction | Average | Reduction. |
| cluster_sampling | with-replacement | Ref. |
| deduplicate | no | Off. |
"""


def playbook(text: str = TABLE) -> Playbook:
    """Returns a playbook of program p with the given text."""
    return Playbook("funsearch", PATH, text, DIR)


def error_of(text: str, overrides: dict[str, object] | None = None) -> str:
    """Returns the message of the ProgramError that parsing raises."""
    with pytest.raises(ProgramError) as caught:
        parse_funsearch_config(playbook(text), overrides or {})
    return str(caught.value)


def test_the_template_parses_to_the_spec_defaults_once_its_function_is_named() -> None:
    text = (TEMPLATE / "strategy.md").read_text(encoding="utf-8")
    resolved, _ = resolve_markers({"strategy.md": text}, {"function name": "priority"}, Path("answers.yaml"))
    config = parse_funsearch_config(playbook(resolved["strategy.md"]), {})
    assert config == FunSearchConfig("priority")
    assert (config.num_islands, config.functions_per_prompt, config.reset_every_registrations) == (10, 2, 1200)
    assert (config.cluster_sampling_temperature_init, config.cluster_sampling_temperature_period) == (0.1, 30000)
    assert (config.score_reduction, config.cluster_sampling, config.length_normalization) == (
        "last", "without_replacement", "range",
    )


def test_the_template_names_what_to_customize() -> None:
    labels = {
        name: [m.label for m in customize_markers((TEMPLATE / name).read_text(encoding="utf-8"), Path(name))]
        for name in ("strategy.md", "prompts/skeleton.md")
    }
    assert labels == {
        "strategy.md": ["program-name", "problem framing", "function name"],
        "prompts/skeleton.md": ["program-name", "problem", "test inputs", "function skeleton"],
    }


def test_the_package_ships_the_template_verbatim() -> None:
    names = sorted(p.relative_to(TEMPLATE).as_posix() for p in TEMPLATE.rglob("*.md"))
    assert names == ["CUSTOMIZE.md", "prompts/skeleton.md", "strategy.md"]
    for name in names:
        assert (SHIPPED / name).read_bytes() == (TEMPLATE / name).read_bytes(), name


def test_table_values_override_the_defaults() -> None:
    config = parse_funsearch_config(playbook(), {}, direction="lower")
    assert config == FunSearchConfig(
        "priority", num_islands=4, cluster_sampling_temperature_init=0.05, score_reduction="average",
        cluster_sampling="with_replacement", deduplicate=False, direction="lower",
    )


def test_config_yaml_overrides_the_table_and_ignores_other_keys() -> None:
    overrides = {"num_islands": 3, "reset_every_registrations": 40, "deduplicate": True, "population_size": 9}
    config = parse_funsearch_config(playbook(), overrides)
    assert (config.num_islands, config.reset_every_registrations, config.deduplicate) == (3, 40, True)
    assert config.max_population == 20 and parse_funsearch_config(playbook(), {"max_population": 8}).max_population == 8
    assert parse_funsearch_config(playbook(""), {"function_to_evolve": "solve"}) == FunSearchConfig("solve")


def test_the_temperature_falls_to_its_floor_and_starts_over() -> None:
    config = FunSearchConfig("f", cluster_sampling_temperature_init=0.3, cluster_sampling_temperature_period=3)
    assert [config.temperature(n) for n in range(5)] == pytest.approx([0.3, 0.2, 0.1, 0.3, 0.2])


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("| num_islands | 4 |", "| islands | 4 |",
         f"{PATH}:8: unknown setting `islands`; did you mean `num_islands`?"),
        ("| num_islands | 4 |", "| num_islands | 0 |", f"{PATH}:8: `num_islands` must be a whole number >= 1, got '0'"),
        ("| num_islands | 4 |", "| num_islands | 2.5 |", f"{PATH}:8: `num_islands` must be a whole number >= 1"),
        ("| cluster_sampling_temperature_init | 0.05 |", "| cluster_sampling_temperature_init | 0 |",
         f"{PATH}:9: `cluster_sampling_temperature_init` must be a positive number such as 0.1, got '0'"),
        ("| score_reduction | Average |", "| score_reduction | weighted |",
         f"{PATH}:10: `score_reduction` must be `last` or `average` or `metric`, got 'weighted'"),
        ("| deduplicate | no |", "| deduplicate | maybe |", f"{PATH}:12: `deduplicate` must be yes or no, got 'maybe'"),
        ("| `priority` |", "| `2fast` |", f"{PATH}:7: `function_to_evolve` must be the name of a Python function"),
        ("| `priority` |", "| <CUSTOMIZE: function name — e.g. priority> |", f"{PATH}:7: `function_to_evolve` must be"),
        ("| deduplicate | no | Off. |", "| deduplicate | no | Off. |\n| num_islands | 5 | Again. |",
         f"{PATH}:13: setting `num_islands` appears twice; keep one row"),
        ("| function_to_evolve | `priority` | The function. |\n", "",
         f"{PATH}: no `function_to_evolve` setting; add a `| function_to_evolve | <name> |` row"),
    ],
)
def test_bad_settings_name_the_file_and_line(old: str, new: str, message: str) -> None:
    assert old in TABLE
    assert error_of(TABLE.replace(old, new)).startswith(message)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_islands": True}, "`num_islands` must be a whole number >= 1, got True"),
        ({"functions_per_prompt": 0}, "`functions_per_prompt` must be a whole number >= 1, got 0"),
        ({"max_population": 0}, "`max_population` must be a whole number >= 1, got 0"),
        ({"cluster_sampling_temperature_init": "hot"}, "`cluster_sampling_temperature_init` must be a positive number"),
        ({"length_normalization": "median"}, "`length_normalization` must be `range` or `max`, got 'median'"),
        ({"function_to_evolve": "class"}, "`function_to_evolve` must be the name of a Python function"),
    ],
)
def test_bad_overrides_name_config_yaml(overrides: dict[str, object], message: str) -> None:
    assert error_of(TABLE, overrides).startswith(f"{CONFIG}: {message}")


def test_the_direction_must_be_known() -> None:
    with pytest.raises(ValueError, match="'higher' or 'lower'"):
        parse_funsearch_config(playbook(), {}, direction="up")


def test_deepmind_switches_in_the_settings_table_give_the_reference_sampling() -> None:
    # Our defaults follow the DistributedFunSearch fork; DeepMind's programs_database.py draws the clusters i.i.d.
    # and scales lengths by max + 1e-6. Both playbook copies say which settings switch to it.
    from autoloop_py.strategies.funsearch import strategy as fs

    for directory in (TEMPLATE, SHIPPED):
        text = (directory / "strategy.md").read_text(encoding="utf-8")
        assert "DistributedFunSearch fork" in text and "`with_replacement`" in text and "`max`" in text
        assert "`score_normalization` to `none`" in text
    deepmind = TABLE.replace("| deduplicate | no | Off. |\n", "| length_normalization | max | Ref. |\n"
                             "| score_normalization | none | Ref. |\n")
    config = parse_funsearch_config(playbook(deepmind), {})
    assert (config.cluster_sampling, config.length_normalization) == ("with_replacement", "max")
    assert config.score_normalization == "none" and FunSearchConfig("priority").score_normalization == "range"
    # F4 (Ref): lengths [100, 150, 200] → ℓ̃ [0, .25, .5] → [.41922895, .32649584, .25427521].
    assert fs.length_probabilities([100, 150, 200], config.length_normalization) == pytest.approx(
        [0.41922895, 0.32649584, 0.25427521], abs=1e-8)

    class Uniforms:
        def __init__(self, *values: float) -> None:
            self.values = list(values)

        def random(self) -> float:
            return self.values.pop(0)

    # With replacement the same (likeliest) cluster may fill both slots; the fork's default never repeats one.
    chosen, _, _ = fs.choose_clusters([0.5, 0.4], 0.1, config, Uniforms(0.0, 0.0))
    assert chosen == [0, 0]
    fork, _, _ = fs.choose_clusters([0.5, 0.4], 0.1, FunSearchConfig("priority"), Uniforms(0.0, 0.0))
    assert sorted(fork) == [0, 1]
