"""Tests for strategies/adaevolve_archive.py: vectors A9–A10, code distance, novelty, bullets and sampling (§2.2)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.program.objectives import Objective
from autoloop_py.state.population import Candidate
from autoloop_py.strategies.adaevolve.archive import (
    Weights,
    admit,
    archive_bullets,
    archive_of,
    archive_status,
    balanced_pool_size,
    child_fit_pct,
    code_distance,
    context_split,
    elite_scores,
    exploit_pool_size,
    in_archive,
    is_copy,
    island_weights,
    local_pool_size,
    member_novelties,
    novelty,
    protected_count,
    roulette,
    with_archive_status,
)
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig, Preset
from autoloop_py.strategies.pareto import with_objectives

CONFIG = AdaEvolveConfig()
DEFAULT = island_weights(0, "balanced", CONFIG)


def program(name: str) -> str:
    return f"def {name}(xs):\n    total_{name} = sum(xs)\n    return total_{name}\n"


def member(id: int, f: float, source: str, island: int = 0) -> tuple[Candidate, float]:
    candidate = Candidate(id=id, island=island, fitness=f, gen=id, operator="exploitation", code=source,
                          extra=archive_bullets(island, "exploitation", "admitted"))
    return candidate, f


# --- A9: admission ------------------------------------------------------------------------------------


FIVE = [member(i + 1, f, program(name)) for i, (f, name) in
        enumerate(zip([0.9, 0.8, 0.7, 0.6, 0.5], ["alpha", "bravo", "charlie", "delta", "echo"]))]


def test_a9_default_weights_make_elite_14_times_fit_pct() -> None:
    assert DEFAULT == Weights(1.4, 0.0, 0.2)
    scores = elite_scores([f for _, f in FIVE], member_novelties(FIVE, 5), DEFAULT)
    assert scores == pytest.approx([1.4, 1.05, 0.7, 0.35, 0.0])


def test_a9_child_at_065_beats_the_05_member_when_it_is_nearest() -> None:
    verdict = admit(program("echo") + "# tweak\n", 0.65, FIVE, 5, DEFAULT, 5)
    assert verdict.admitted and verdict.evicted is not None and verdict.evicted.id == 5
    assert (verdict.child_elite, verdict.rival_elite) == (pytest.approx(0.35), pytest.approx(0.0))


def test_a9_child_at_065_loses_to_the_07_member_when_it_is_nearest() -> None:
    verdict = admit(program("charlie") + "# tweak\n", 0.65, FIVE, 5, DEFAULT, 5)
    assert not verdict.admitted and verdict.evicted is None
    assert verdict.rival is not None and verdict.rival.id == 3
    assert verdict.rival_elite == pytest.approx(0.7)


def test_the_best_and_the_top_elites_are_protected() -> None:
    verdict = admit(program("alpha") + "# tweak\n", 0.95, FIVE, 5, DEFAULT, 5)
    assert verdict.rival is not None and verdict.rival.id != 1


def test_under_capacity_everything_enters() -> None:
    assert admit("x = 1\n", -5.0, FIVE, 6, DEFAULT, 5).admitted


def test_tied_scores_get_different_fitness_ranks_by_stored_order() -> None:
    flat = [member(i + 1, 0.5, program(f"p{i}")) for i in range(5)]
    assert elite_scores([0.5] * 5, [0.0] * 5, DEFAULT) == pytest.approx([1.4, 1.05, 0.7, 0.35, 0.0])
    # An equal child has nobody above it, so it scores 1.4 and replaces its nearest unprotected member.
    verdict = admit(program("p3") + "# again\n", 0.5, flat, 5, DEFAULT, 5)
    assert verdict.admitted and verdict.evicted is not None and verdict.evicted.id == 4


def test_novelty_weight_counts_members_with_strictly_lower_novelty() -> None:
    weights = Weights(0.0, 1.0, 0.2)
    assert elite_scores([1, 2, 3], [0.2, 0.2, 0.9], weights) == pytest.approx([0.0, 0.0, 2 / 3])


def test_the_novelty_share_is_computed_before_its_weight_multiplies_it() -> None:
    """w·(lower/N) as the reference computes it: 0.7·(3/5) is 0.42, where (0.7·3)/5 is 0.41999999999999993."""
    weights = Weights(fitness=0.0, novelty=0.7, elite_ratio=0.2)
    novelties = [0.1, 0.2, 0.3, 0.9, 0.0]
    assert elite_scores([1, 2, 3, 4, 5], novelties, weights)[2] == 0.7 * (3 / 5) != 0.7 * 3 / 5


def test_a_single_member_archive_of_capacity_one_keeps_its_best() -> None:
    verdict = admit(program("zulu"), 2.0, FIVE[:1], 1, DEFAULT, 5)
    assert not verdict.admitted and verdict.rival is None


# --- A10: counts ----------------------------------------------------------------------------------------


def test_a10_pool_sizes_for_twenty_members() -> None:
    local, _ = context_split(4, 0.6)
    assert (exploit_pool_size(20), balanced_pool_size(20), protected_count(20, 0.2), local_pool_size(local, 20)) == (
        5, 4, 4, 10)


@pytest.mark.parametrize(("m", "split"), [(4, (2, 2)), (3, (1, 2)), (5, (3, 2)), (1, (1, 0)), (0, (0, 0))])
def test_a10_local_and_global_context_counts(m: int, split: tuple[int, int]) -> None:
    assert context_split(m, 0.6) == split


def test_small_archives_still_have_a_pool() -> None:
    assert (exploit_pool_size(1), balanced_pool_size(3), protected_count(2, 0.05)) == (1, 1, 1)
    assert balanced_pool_size(100) == 10


# --- distance and novelty ------------------------------------------------------------------------------


def test_identical_code_has_distance_zero_and_unlike_code_is_far() -> None:
    assert code_distance(program("a"), program("a")) == 0.0
    near = code_distance(program("alpha"), program("alpha") + "# note\n")
    far = code_distance(program("alpha"), "import numpy as np\nclass Solver:\n    pass\n")
    assert 0 < near < far <= 1


def test_structure_counts_imports_definitions_calls_and_flags() -> None:
    base = "def f(x):\n    return x\n"
    looped = "def f(x):\n    for y in x:\n        return y\n"
    assert code_distance(base, looped) > code_distance(base, base + "\n")


# Reference values: skydiscover 0.1.0 `CodeDiversity().distance` run once on these inputs (spec §2.2).
def test_code_distance_counts_number_tokens_like_reference() -> None:
    # tokens {0.95, run} vs {0.90, run} (`x` is too short): T = 2/3, S = 0, L = 0.
    assert code_distance("x = 0.95\nrun(x)\n", "x = 0.90\nrun(x)\n") == 0.33333333333333337
    assert code_distance("k = 1\n", "k = 12\n") == 0.5285714285714286


def test_code_distance_reads_imports_and_separate_loop_flags_like_reference() -> None:
    a = "import numpy.linalg as la\nfor i in range(3):\n    la.norm(i)\n"
    b = "from numpy import linalg\nwhile True:\n    linalg.norm(1)\n    break\n"
    assert code_distance(a, b) == 0.6143356643356643
    assert code_distance("for x in xs:\n    go(x)\n", "while x in xs:\n    go(x)\n") == 0.516


def test_code_distance_matches_imports_and_flags_anywhere_like_reference() -> None:
    # Unanchored: an `import` inside a comment counts; `for ` is a substring test (`therefor e`).
    assert code_distance("# we import numpy here\nvalue = 1\n", "value = 1\n") == 0.8393939393939394
    assert code_distance("therefor e\n", "e\n") == 0.9636363636363637
    assert code_distance("from . import (a, b)\n", "import os.path\n") == 0.7321428571428572


def test_code_distance_definitions_and_ascii_tokens_like_reference() -> None:
    assert code_distance("def f(x):\n    return x\n", "def f(x):\n    for y in x:\n        return y\n") == (
        0.4930232558139535)
    assert code_distance("class A(B):\n    pass\n", "class A:\n    pass\n") == 0.02857142857142857
    assert code_distance("café = 1\nnp.linalg.norm(v)\n", "cafe = 1\nnp.linalg.norm(v)\n") == 0.2
    assert code_distance("", "a") == 0.2


@given(st.text(max_size=60), st.text(max_size=60))
def test_distance_is_symmetric_and_bounded(a: str, b: str) -> None:
    d = code_distance(a, b)
    assert d == code_distance(b, a) and 0.0 <= d <= 1.0


def test_novelty_is_the_mean_of_the_k_nearest_and_one_when_alone() -> None:
    others = [program("a"), program("b"), "x = 1\n"]
    distances = sorted(code_distance(program("a"), o) for o in others)
    assert novelty(program("a"), [], 5) == 1.0
    assert novelty(program("a"), others, 2) == pytest.approx(sum(distances[:2]) / 2)


def test_roulette_follows_cumulative_weights() -> None:
    assert [roulette([1, 1, 2], u) for u in (0.0, 0.24, 0.25, 0.5, 0.99)] == [0, 0, 1, 2, 2]


# --- membership and bullets ------------------------------------------------------------------------------


def test_the_archive_is_admitted_scored_entries_in_id_order() -> None:
    c = [member(3, 0.7, "a")[0], member(1, 0.9, "b")[0], member(2, 0.1, "c", island=1)[0]]
    rejected = with_archive_status(member(4, 0.99, "d")[0], "rejected")
    evicted = with_archive_status(member(5, 0.99, "e")[0], "evicted@12")
    plain = Candidate(id=6, island=0, fitness=0.2, gen=6, operator="exploration")
    broken = replace(plain, id=7, fitness=None)
    population = [*c, rejected, evicted, plain, broken]
    assert [(m.id, f) for m, f in archive_of(population, 0, "higher")] == [(1, 0.9), (3, 0.7), (6, 0.2)]
    assert [m.id for m, _ in archive_of(population, None, "lower")] == [1, 2, 3, 6]
    assert archive_of(population, 0, "lower")[0][1] == -0.9
    assert not in_archive(evicted, "higher") and archive_status(evicted) == "evicted@12"


def test_bullets_read_back_and_copies_say_where_they_came_from() -> None:
    bullets = archive_bullets(2, "migration", "admitted", ("Migrated from", 0, 12))
    assert bullets == (("Island", "2 · **Mode**: migration · **Archive**: admitted"),
                       ("Migrated from", "island 0 (#12)"))
    copy = Candidate(id=13, island=2, fitness=1.0, gen=3, operator="migration", extra=bullets)
    assert (archive_status(copy), is_copy(copy)) == ("admitted", True)
    assert with_archive_status(copy, "evicted@4").extra[0][1].endswith("**Archive**: evicted@4")


def test_an_entry_without_the_bullet_gets_one_when_its_status_changes() -> None:
    plain = Candidate(id=6, island=1, fitness=0.2, gen=6, operator="balanced", extra=(("Lesson", "x"),))
    tagged = with_archive_status(plain, "evicted@9")
    assert tagged.extra == (("Island", "1 · **Mode**: balanced · **Archive**: evicted@9"), ("Lesson", "x"))


def test_spawned_islands_use_their_presets_weights() -> None:
    config = replace(CONFIG, presets=(*CONFIG.presets, Preset("wild", 0.0, 0.1, 0.9, 0.5)))
    assert island_weights(1, "balanced", config) == DEFAULT
    assert island_weights(2, "diversity", config) == Weights(pytest.approx(0.5), 0.5, 0.1)  # type: ignore[arg-type]
    assert island_weights(3, "wild", config) == Weights(0.1, 0.9, 0.5)


# --- admission order against the reference ---------------------------------------------------------------


def _variant(rng: random.Random) -> str:
    """A small program whose numbers, loops and imports vary (the admission-order check's inputs)."""
    lines = []
    if rng.random() < 0.5:
        lines.append(rng.choice(["import numpy as np", "from math import sqrt", "import random"]))
    lines.append(f"rate = {rng.choice(['0.9', '0.95', '0.99', '1.5', '2', '10'])}")
    loop = rng.choice(["for i in range(n):", "while n > 0:", "if n:"])
    lines += ["def step(n):", f"    {loop}", f"        n = n * rate + {rng.randint(1, 99)}"]
    if rng.random() < 0.4:
        lines.append("    return sorted(n)")
    return "\n".join(lines) + "\n"


# skydiscover 0.1.0's UnifiedArchive(max_size 20, k 5) fed the same 80 programs (random.Random(11)): whether each of
# the 60 programs arriving at a full archive was admitted, computed once with the reference.
REFERENCE_ADMISSIONS = {
    Weights(1.4, 0.0, 0.2): "111111001100000010000100011010010100100010001000000000000000",
    Weights(0.5, 0.5, 0.1): "001101001100000010000100010010010100000000000000100000001000",
}


@pytest.mark.parametrize("weights", list(REFERENCE_ADMISSIONS))
def test_admission_order_into_a_full_archive_matches_reference(weights: Weights) -> None:
    rng = random.Random(11)
    arrivals = [(_variant(rng), round(rng.random(), 2)) for _ in range(80)]
    members: list[tuple[Candidate, float]] = []
    verdicts = ""
    for number, (code, f) in enumerate(arrivals, start=1):
        verdict = admit(code, f, members, 20, weights, 5)
        if verdict.evicted is not None:
            members = [m for m in members if m[0].id != verdict.evicted.id]
        if verdict.admitted:
            members.append(member(number, f, code))
        if number > 20:
            verdicts += str(int(verdict.admitted))
    assert verdicts == REFERENCE_ADMISSIONS[weights]


# --- the newcomer's fitness share is clamped to [0, 1] like the reference -------------------------------------


def test_a_newcomer_worse_than_every_member_gets_a_zero_fitness_share_not_a_negative_one() -> None:
    # Reproducing input: members .5/.6/.7, a newcomer at .1 whose code is the most novel (share 3/3), weights
    # fitness .5 novelty .5. Elites: #1 = .5·0 + .5·2/3, #2 = .5·.5 + .5·0 = .25, #3 = .5 (protected). The rival is #2.
    # The reference (`unified_archive.py`) clamps 1 − 3/2 to 0: .5·0 + .5·1 = .5 > .25, admitted. Unclamped it was
    # .5·(−.5) + .5 = .25, not above .25: rejected, one of the flips the fidelity re-run found.
    codes = ["rate = 2\nif n:\n    n = n * 6\n", "rate = 2\nwhile n:\n    n = n * 2\n", "rate = 2\nwhile n:\n    n = n * 1\n"]
    members = [member(i + 1, f, c) for i, (f, c) in enumerate(zip([0.5, 0.6, 0.7], codes))]
    verdict = admit("rate = 10\nfor i in x:\n    n = n * 4\n", 0.1, members, 3, Weights(0.5, 0.5, 0.2), 5)
    assert verdict.rival is not None and verdict.rival.id == 2
    assert (verdict.admitted, verdict.child_elite, verdict.rival_elite) == (True, 0.5, 0.25)


@pytest.mark.parametrize(("above", "n", "share"), [(0, 4, 1.0), (1, 4, 2 / 3), (3, 4, 0.0), (4, 4, 0.0),
                                                   (0, 1, 1.0), (1, 1, 0.0)])
def test_child_fitness_share_is_clamped(above: int, n: int, share: float) -> None:
    assert child_fit_pct(above, n) == pytest.approx(share)


# --- Pareto objectives in admission (reference `_compute_elite_score` with pareto_objectives) ----------------------


def test_pareto_objectives_add_the_percentile_and_protect_the_front() -> None:
    objectives = (Objective("accuracy", "higher"), Objective("latency_ms", "lower"))

    def scored(id: int, accuracy: float, latency: float, source: str) -> tuple[Candidate, float]:
        candidate, f = member(id, accuracy, source)
        return with_objectives(candidate, {"accuracy": accuracy, "latency_ms": latency}, objectives), f

    # #1 (.9, 50) and #2 (.8, 10) are the front; #3 (.7, 60) is dominated by #1. Front members are protected, so the
    # rival is #3 (elite .3·0 + .4·0 = 0). The child (.75, 55) is dominated by #1 and #2: Pareto share 1 − 2/3; its
    # fitness share is 1 − 2/2 = 0, so its elite is .4/3 > 0: admitted. Without objectives it ties at 0: rejected.
    members = [scored(1, 0.9, 50, "def a():\n    return 1\n"), scored(2, 0.8, 10, "def b():\n    return 2\n"),
               scored(3, 0.7, 60, "def c():\n    return 3\n")]
    weights = Weights(0.3, 0.0, 0.2, pareto=0.4)
    verdict = admit("def c():\n    return 4\n", 0.75, members, 3, weights, 5, objectives, (0.75, -55.0))
    assert verdict.rival is not None and verdict.rival.id == 3
    assert verdict.admitted and verdict.child_elite == pytest.approx(0.4 / 3) and verdict.rival_elite == 0.0
    scalar = admit("def c():\n    return 4\n", 0.75, members, 3, Weights(0.3, 0.0, 0.2), 5)
    assert not scalar.admitted
    # Elites with objectives: #1 .3·1 + .4·1, #2 .3·.5 + .4·.5, #3 0 (percentiles 1, .5, 0 by front then crowding).
    assert elite_scores([0.9, 0.8, 0.7], [0.0] * 3, weights, [1.0, 0.5, 0.0]) == pytest.approx([0.7, 0.35, 0.0])


def test_with_objectives_a_spawned_island_weighs_fitness_alone_plus_the_objectives_weight() -> None:
    config = replace(CONFIG, objectives=(Objective("accuracy", "higher"),), pareto_objectives_weight=0.4)
    assert island_weights(0, "balanced", config) == Weights(1.0, 0.0, 0.2, 0.4)
    assert island_weights(2, "diversity", config) == Weights(0.2, 0.5, 0.1, 0.4)


# skydiscover 0.1.0's UnifiedArchive(max_size 20, k 5, pareto_objectives [accuracy, latency], latency lower is
# better) fed the 80 programs above (accuracy = fitness, latency from random.Random(5)): whether each of the 60
# arriving at a full archive was admitted, computed once with the reference. Its fronts iterate a set of string ids
# (an order that changes from run to run), so it was run with an insertion-ordered set: stored order, as ours.
REFERENCE_PARETO_ADMISSIONS = {
    Weights(0.3, 0.3, 0.2, 0.4): "111101101100100110000100111010010100000000001000001100000010",
    Weights(0.5, 0.0, 0.1, 0.4): "111111101100100110000100111010011100111000001000100000011010",
}


@pytest.mark.parametrize("weights", list(REFERENCE_PARETO_ADMISSIONS))
def test_admission_order_with_pareto_objectives_matches_reference(weights: Weights) -> None:
    objectives = (Objective("accuracy", "higher"), Objective("latency", "lower"))
    rng, latencies = random.Random(11), random.Random(5)
    arrivals = [(_variant(rng), round(rng.random(), 2)) for _ in range(80)]
    members: list[tuple[Candidate, float]] = []
    verdicts = ""
    for number, (code, f) in enumerate(arrivals, start=1):
        latency = round(latencies.uniform(1, 100), 1)
        vector = (f, -latency)
        verdict = admit(code, f, members, 20, weights, 5, objectives, vector)
        if verdict.evicted is not None:
            members = [m for m in members if m[0].id != verdict.evicted.id]
        if verdict.admitted:
            candidate, _ = member(number, f, code)
            members.append((with_objectives(candidate, {"accuracy": f, "latency": latency}, objectives), f))
        if number > 20:
            verdicts += str(int(verdict.admitted))
    assert verdicts == REFERENCE_PARETO_ADMISSIONS[weights]
