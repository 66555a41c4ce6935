"""Tests for the AlphaEvolve tunables: parsing a customised playbook and applying config.yaml overrides."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.errors import ProgramError
from autoloop_py.program.playbook import Playbook
from autoloop_py.strategies.alphaevolve.config import DEFAULT_WEIGHTS, Island, parse_alphaevolve_config

POC = Path(__file__).resolve().parents[3] / ".autoloop/programs/groupby_evolve"
DIR = Path(".autoloop/programs/p")
PATH = DIR / "strategy/alphaevolve.md"
CONFIG = ".autoloop/programs/p/code/config.yaml"
PLAYBOOK = """\
# AlphaEvolve Strategy — p

### Step 2. Pick operator

| Operator | Default weight | When it fires |
|---|---|---|
| Exploitation | 0.50 | Refine. |
| Exploration | 0.30 | Explore. |
| Crossover | 0.15 | Combine. |
| Migration | 0.05 | Port. |

### Step 3. Pick parent(s)

**Islands** for this program (three families):

- **Island 0 — greedy**: build the answer greedily.
- **Island 1 — local search**: improve by small moves.
- **Island 2 — exact**: branch and bound.

### Step 4. Apply the operator

4. Validity pre-check (returns a list; no duplicates; runs in `O(n log n)`): walk through each.

### Step 5. Implement

Edit only the Target. The diff style for this program is: minimal diff.

### Step 7. Update the population

- **Population cap**: 24. If exceeded, evict.
- **Elite archive**: the top 6 by fitness are always preserved.

## Feature dimensions

- **Dimension 1 — `approach_family`**: buckets are the islands above.
- **Dimension 2 — `tour_length`**: bucket into `small` / `medium` / `large` using a concrete threshold (<25 / 25–60 / >60 lines of the evolved block).
"""


def playbook(text: str = PLAYBOOK) -> Playbook:
    """Returns a playbook of program p with the given text."""
    return Playbook("alphaevolve", PATH, text, DIR)


def error_of(text: str, overrides: dict[str, object] | None = None) -> str:
    """Returns the message of the ProgramError that parsing raises."""
    with pytest.raises(ProgramError) as caught:
        parse_alphaevolve_config(playbook(text), overrides or {})
    return str(caught.value)


def test_the_proof_of_concept_playbook_parses() -> None:
    text = (POC / "strategy/alphaevolve.md").read_text()
    config = parse_alphaevolve_config(Playbook("alphaevolve", PATH, text, DIR), {})
    assert [island.name for island in config.islands] == [
        "sort + reduceat", "hash table", "dense codes + bincount", "scatter-add", "hybrid dispatch",
    ]
    assert config.islands[3] == Island(
        3, "scatter-add", "accumulate with `np.add.at` (or another `ufunc.at`) into an int64 array indexed by dense codes."
    )
    assert config.operator_weights == DEFAULT_WEIGHTS
    assert sum(w for _, w in config.operator_weights) == 1
    assert (config.population_size, config.archive_size) == (40, 10)
    assert config.feature_dimensions == ("approach_family", "code_complexity")
    assert config.complexity_thresholds == (30, 80)
    assert config.diff_style == "full_rewrite"
    assert len(config.validity_checks) == 5
    assert config.validity_checks[0].startswith("`group_sum` returns a tuple `(keys, sums)` of two 1-D `int64`")


def test_the_proof_of_concept_config_yaml_overrides_the_cap() -> None:
    text = (POC / "strategy/alphaevolve.md").read_text()
    overrides = yaml.safe_load((POC / "code/config.yaml").read_text())
    config = parse_alphaevolve_config(Playbook("alphaevolve", PATH, text, DIR), overrides)
    assert (config.population_size, config.archive_size) == (20, 5)


def test_a_small_playbook_parses_every_tunable() -> None:
    config = parse_alphaevolve_config(playbook(), {})
    assert config.islands == (
        Island(0, "greedy", "build the answer greedily."),
        Island(1, "local search", "improve by small moves."),
        Island(2, "exact", "branch and bound."),
    )
    assert config.operator_weights == (
        ("exploitation", Fraction(1, 2)), ("exploration", Fraction(3, 10)),
        ("crossover", Fraction(3, 20)), ("migration", Fraction(1, 20)),
    )
    assert (config.population_size, config.archive_size) == (24, 6)
    assert config.feature_dimensions == ("approach_family", "tour_length")
    assert config.complexity_thresholds == (25, 60)
    assert config.diff_style == "minimal_diff"
    assert config.validity_checks == ("returns a list", "no duplicates", "runs in `O(n log n)`")


def test_weights_may_be_percentages_or_fractions() -> None:
    text = PLAYBOOK.replace("| 0.50 |", "| 50% |").replace("| 0.30 |", "| 3/10 |")
    config = parse_alphaevolve_config(playbook(text), {})
    assert dict(config.operator_weights)["exploitation"] == Fraction(1, 2)


def test_a_playbook_without_table_or_bullets_takes_the_defaults() -> None:
    text = PLAYBOOK.split("### Step 2.")[0] + PLAYBOOK[PLAYBOOK.index("### Step 3.") : PLAYBOOK.index("### Step 4.")]
    config = parse_alphaevolve_config(playbook(text), {})
    assert config.operator_weights == DEFAULT_WEIGHTS
    assert (config.population_size, config.archive_size, config.complexity_thresholds) == (40, 10, (40, 100))
    assert (config.diff_style, config.validity_checks) == ("full_rewrite", ())


# --- playbook errors name the line -----------------------------------------------------------------


def test_weights_not_summing_to_one_name_the_table() -> None:
    message = error_of(PLAYBOOK.replace("| 0.05 |", "| 0.10 |"))
    assert message == (
        ".autoloop/programs/p/strategy/alphaevolve.md:5: operator weights sum to 1.05, not 1; "
        "adjust the `Default weight` column"
    )


def test_float_rounding_does_not_fake_a_sum_of_one() -> None:
    # 0.1 + 0.2 + 0.3 + 0.4 == 1.0000000000000002 in floats; exact fractions sum to 1.
    text = PLAYBOOK.replace("| 0.50 |", "| 0.1 |").replace("| 0.30 |", "| 0.2 |")
    text = text.replace("| 0.15 |", "| 0.3 |").replace("| 0.05 |", "| 0.4 |")
    assert sum(w for _, w in parse_alphaevolve_config(playbook(text), {}).operator_weights) == 1


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("| Crossover | 0.15 |", "| Mutation | 0.15 |", ":9: `Mutation` is not an operator"),
        ("| Crossover | 0.15 |", "| Exploration | 0.15 |", ":9: `Exploration` appears twice"),
        ("| 0.15 |", "| lots |", ":9: weight `lots` is not a number like 0.30"),
        ("| Migration | 0.05 | Port. |\n", "", ":5: the operator table has no migration row"),
    ],
)
def test_bad_table_rows_name_their_line(old: str, new: str, expected: str) -> None:
    assert expected in error_of(PLAYBOOK.replace(old, new))


def test_two_islands_are_too_few() -> None:
    message = error_of(PLAYBOOK.replace("- **Island 2 — exact**: branch and bound.\n", ""))
    assert message == (
        ".autoloop/programs/p/strategy/alphaevolve.md:16: only 2 islands listed; "
        "AlphaEvolve takes 3–6, add distinct families"
    )


def test_seven_islands_are_too_many() -> None:
    extra = "".join(f"- **Island {i} — family {i}**: more.\n" for i in range(3, 7))
    message = error_of(PLAYBOOK.replace("- **Island 2 — exact**: branch and bound.\n",
                                        "- **Island 2 — exact**: branch and bound.\n" + extra))
    assert message == (
        ".autoloop/programs/p/strategy/alphaevolve.md:22: 7 islands listed; AlphaEvolve takes 3–6, merge or remove some"
    )


def test_an_island_index_out_of_order_names_its_line() -> None:
    message = error_of(PLAYBOOK.replace("Island 1 — local search", "Island 4 — local search"))
    assert message == (
        ".autoloop/programs/p/strategy/alphaevolve.md:17: Island 4 is out of place: islands are numbered "
        "0..n-1 in order, so this one should be Island 1"
    )


def test_no_islands_at_all_is_an_error() -> None:
    text = PLAYBOOK.replace("- **Island", "- Family")
    assert "no `- **Island N — family**: description` bullets" in error_of(text)


def test_thresholds_need_two_numbers_and_caps_a_number() -> None:
    assert ":36: the Dimension 2 threshold names 3 distinct numbers" in error_of(
        PLAYBOOK.replace("(<25 / 25–60 / >60", "(<25 / 30–60 / >60")
    )
    assert ":30: the `Population cap` bullet gives no number" in error_of(
        PLAYBOOK.replace("**Population cap**: 24.", "**Population cap**: forty.")
    )


def test_an_archive_larger_than_the_cap_is_an_error() -> None:
    assert error_of(PLAYBOOK.replace("the top 6 by", "the top 30 by")).startswith(
        ".autoloop/programs/p/strategy/alphaevolve.md:31: the elite archive (30) is larger than the population cap (24)"
    )


def test_nested_validity_items_win_over_the_text() -> None:
    text = PLAYBOOK.replace(
        "4. Validity pre-check (returns a list; no duplicates; runs in `O(n log n)`): walk through each.\n",
        "4. Validity pre-check: walk through each:\n   - returns a **list**\n   - `len(out) == n`; no duplicates\n",
    )
    assert parse_alphaevolve_config(playbook(text), {}).validity_checks == (
        "returns a list", "`len(out) == n`; no duplicates",
    )


# --- config.yaml overrides -------------------------------------------------------------------------


def test_one_ratio_fixes_its_operator_and_rescales_the_others() -> None:
    config = parse_alphaevolve_config(playbook(), {"exploitation_ratio": 0.6})
    assert config.operator_weights == (
        ("exploitation", Fraction(3, 5)), ("exploration", Fraction(6, 25)),
        ("crossover", Fraction(3, 25)), ("migration", Fraction(1, 25)),
    )


def test_an_operator_weights_mapping_overrides_too() -> None:
    weights = {"Exploitation": 0.4, "exploration": 0.4, "crossover": 0.1, "migration": 0.1}
    config = parse_alphaevolve_config(playbook(), {"operator_weights": weights})
    assert dict(config.operator_weights) == {
        "exploitation": Fraction(2, 5), "exploration": Fraction(2, 5),
        "crossover": Fraction(1, 10), "migration": Fraction(1, 10),
    }


def test_structural_overrides() -> None:
    overrides = {
        "num_islands": 2, "population_size": 12, "archive_size": 3,
        "complexity_thresholds": [50, 120], "diff_style": "full rewrite", "evaluator_seed": 7,
    }
    config = parse_alphaevolve_config(playbook(), overrides)
    assert [island.name for island in config.islands] == ["greedy", "local search"]
    assert (config.population_size, config.archive_size) == (12, 3)
    assert config.complexity_thresholds == (50, 120)
    assert config.diff_style == "full_rewrite"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"exploitation_ratio": 0.5, "exploration_ratio": 0.3, "crossover_ratio": 0.1, "migration_ratio": 0.05},
         "operator weights (exploitation 0.5, exploration 0.3, crossover 0.1, migration 0.05) cannot be completed"),
        ({"exploitation_ratio": 1.2}, "operator weights (exploitation 1.2) cannot be completed"),
        ({"crossover_ratio": -0.1}, "the crossover weight -0.1 is not a number between 0 and 1"),
        ({"crossover_ratio": 0.1, "operator_weights": {"migration": 0.1}}, "set either `operator_weights` or"),
        ({"operator_weights": {"mutation": 0.5}}, "names unknown operator 'mutation'"),
        ({"operator_weights": [0.5, 0.5]}, "`operator_weights` must map operators to weights"),
        ({"num_islands": 4}, "num_islands is 4 but the playbook lists 3 islands"),
        ({"num_islands": 0}, "`num_islands` must be a whole number >= 1, got 0"),
        ({"population_size": "big"}, "`population_size` must be a whole number >= 1, got 'big'"),
        ({"archive_size": True}, "`archive_size` must be a whole number >= 0, got True"),
        ({"archive_size": 30}, "the elite archive (30) is larger than the population cap (24)"),
        ({"complexity_thresholds": [120, 50]}, "`complexity_thresholds` must be two line counts"),
        ({"complexity_thresholds": 40}, "`complexity_thresholds` must be two line counts"),
        ({"diff_style": "patch"}, "`diff_style` must be `full_rewrite` or `minimal_diff`, got 'patch'"),
    ],
)
def test_bad_overrides_name_config_yaml(overrides: dict[str, object], expected: str) -> None:
    message = error_of(PLAYBOOK, overrides)
    assert message.startswith(CONFIG + ": ")
    assert expected in message


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=4, max_size=4).filter(lambda ws: sum(ws) > 0))
def test_any_table_summing_to_one_parses_exactly(raw: list[int]) -> None:
    total = sum(raw)
    cells = [Fraction(w, total) for w in raw]
    cells[-1] = 1 - sum(cells[:-1])
    text = PLAYBOOK
    for old, new in zip(("| 0.50 |", "| 0.30 |", "| 0.15 |", "| 0.05 |"), cells):
        text = text.replace(old, f"| {new} |", 1)
    config = parse_alphaevolve_config(playbook(text), {})
    assert [w for _, w in config.operator_weights] == cells
