"""Tests of the knob finder, the PARAMS rewrite and the LLM knob reply (autoloop_py/analysis/tuning.py)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.analysis import tuning
from autoloop_py.analysis.tuning import (
    Knob,
    bounds,
    find_knobs,
    parametrize,
    parse_knob_reply,
    with_values,
)

EXAMPLE = Path(__file__).parents[2] / ".autoloop/programs/function_minimization/code/search.py"

REPRESENTATIVE = '''\
"""A heuristic with knobs and with constants that are no knobs."""

from __future__ import annotations

import math
import random

N = 26
dim = 2
n_circles = 26
GRID_SIZE = 10
n_restarts = 4
VERTICES = [(0.0, 0.0), (1.0, 0.0)]


@lru_cache(maxsize=128)
def solve(points, tol=1e-6, *, max_iter=500):
    rng = random.Random(42)
    step = 0.25
    penalty_weight = 2.5
    temperature = 3.0
    accept_prob = 0.3
    use_cache = True
    offset = -0.75
    best = points[0]
    total = 0
    for i in range(1, max_iter, 3):
        total += 1
        x = points[i - 1] ** 2 + math.sqrt(2) * step
        if i % 2 == 0 and x < 0.001:
            break
        if len(points) > 30:
            temperature *= 0.97
        label = f"{x:.3f} {i + 17}"
        assert x >= -1e9
    spread = call_me(x, 0.8)
    return best, total, offset, spread, label
'''


def _knobs(source: str) -> dict[str, Knob]:
    return {knob.name: knob for knob in find_knobs(source)}


def _exec(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "tuned"}
    exec(compile(source, "<tuned>", "exec"), namespace)
    return namespace


def test_the_example_search_exposes_its_five_constants_with_the_papers_ranges() -> None:
    knobs = find_knobs(EXAMPLE.read_text(encoding="utf-8"))
    assert [(k.name, k.text, k.family, k.low, k.high, k.scale) for k in knobs] == [
        ("iterations", "60", "iteration budget", 12, 300, "log"),
        ("restarts", "1", "restart count", 1, 10, "log"),
        ("step_size", "3.0", "step size", pytest.approx(0.03), pytest.approx(300.0), "log"),
        ("cooling", "0.5", "cooling factor", 0.5, 0.99999, "linear"),
        ("initial_temperature", "2.0", "temperature", pytest.approx(0.02), pytest.approx(200.0), "log"),
    ]
    assert [k.line for k in knobs] == [19, 20, 21, 22, 23]  # inside the EVOLVE-BLOCK: objective's `/ 20` is not


def test_the_finder_keeps_parameters_and_skips_constants_indices_shapes_seeds_and_identities() -> None:
    found = [(k.name, k.text, k.family) for k in find_knobs(REPRESENTATIVE, max_knobs=50)]
    assert found == [
        ("n_restarts", "4", "restart count"),
        ("tol", "1e-6", "tolerance"),
        ("max_iter", "500", "iteration budget"),
        ("step", "0.25", "step size"),
        ("penalty_weight", "2.5", "penalty weight"),
        ("temperature", "3.0", "temperature"),
        ("accept_prob", "0.3", "acceptance probability"),
        ("offset", "-0.75", "default"),
        ("x_threshold", "0.001", "tolerance"),
        ("len_threshold", "30", "tolerance"),
        ("temperature_2", "0.97", "cooling factor"),  # `temperature *= 0.97` decays geometrically
        ("call_me_arg1", "0.8", "default"),
    ]
    # Not knobs: N, dim, n_circles, GRID_SIZE (problem constants), VERTICES (data), maxsize (decorator),
    # the seed 42, range's start and step, `+= 1`, True, `points[0]`, `** 2`, sqrt(2), `% 2`, `== 0`,
    # the f-string's 17 and the assert's -1e9.


def test_at_most_eight_knobs_and_those_of_a_known_family_come_first() -> None:
    knobs = find_knobs(REPRESENTATIVE)
    assert [k.name for k in knobs] == [
        "n_restarts", "tol", "max_iter", "step", "penalty_weight", "temperature", "accept_prob", "x_threshold"
    ]


def test_eight_knobs_at_most_and_the_unnamed_ones_lose() -> None:
    source = "\n".join(f"lr_{i} = 0.{i + 1}" for i in range(10)) + "\nz = call(7.5)\n"
    knobs = find_knobs(source)
    assert [k.name for k in knobs] == [f"lr_{i}" for i in range(8)]
    assert find_knobs(source, max_knobs=20)[-1].name == "call_arg0"


def test_thresholds_arguments_and_augmented_rates_are_named_after_their_context() -> None:
    source = "def f(depth, t):\n    if depth < 30:\n        t *= 0.97\n    return g(t, 7.5)\n"
    assert [(k.name, k.text) for k in find_knobs(source)] == [
        ("depth_threshold", "30"), ("t", "0.97"), ("g_arg1", "7.5")
    ]


def test_a_literal_that_occurs_twice_is_ambiguous_and_skipped() -> None:
    assert [k.name for k in find_knobs("a = 0.5\nb = 0.5\nc = 0.7\n")] == ["c"]


def test_literals_of_an_earlier_params_block_are_not_knobs_again() -> None:
    source = 'PARAMS = {"step": 0.3}\nstep = PARAMS["step"]\nrate = 0.01\n'
    assert [k.name for k in find_knobs(source)] == ["rate"]


def test_a_module_that_does_not_parse_has_no_knobs() -> None:
    assert find_knobs("x = (0.5\n") == []


def test_columns_count_characters_not_utf8_bytes() -> None:
    source = 'label = "température"; step = 0.25\n'
    (knob,) = find_knobs(source)
    assert source.splitlines()[0][knob.col:knob.end_col] == "0.25"


@pytest.mark.parametrize(
    ("value", "kind", "family", "expected"),
    [
        (0.1, "float", "step size", (0.001, 10.0, "log")),
        (1e-6, "float", "tolerance", (1e-9, 1e-3, "log")),
        (0.95, "float", "cooling factor", (0.5, 0.99999, "linear")),
        (0.3, "float", "acceptance probability", (0.0, 1.0, "linear")),
        (50, "int", "restart count", (5, 500, "log")),
        (5, "int", "sample count", (1, 50, "log")),
        (1000, "int", "iteration budget", (200, 5000, "log")),
        (3, "int", "default", (1, 20, "linear")),  # small-int categorical
        (0.5, "float", "default", (0.5 / math.sqrt(10), 0.5 * math.sqrt(10), "log")),  # positive non-integer < 1
        (40, "int", "default", (12, 127, "linear")),
        (-0.75, "float", "default", (-0.75 * math.sqrt(10), -0.75 / math.sqrt(10), "linear")),
        (0.3, "float", "cooling factor", (0.3, 0.99999, "linear")),  # the range always holds the default
    ],
)
def test_bounds_follow_the_papers_range_table(value: float, kind: str, family: str, expected: tuple) -> None:
    low, high, scale = bounds(value, kind, family)
    assert (low, high, scale) == (pytest.approx(expected[0]), pytest.approx(expected[1]), expected[2])
    assert low <= value <= high


def test_a_range_of_two_orders_of_magnitude_is_always_log() -> None:
    assert bounds(2.0, "float", "penalty weight")[2] == "log"
    assert bounds(7, "int", "step size") == (1, 700, "log")


PRELUDES = {
    "none": "",
    "docstring": '"""Module doc.\n\nIt spans lines; x = 0.5 here is text.\n"""\n',
    "future": "from __future__ import annotations\n",
    "docstring and future": '"""Doc."""\n\nfrom __future__ import annotations\nfrom __future__ import division\n',
    "shebang": "#!/usr/bin/env python3\n",
    "encoding": "# -*- coding: utf-8 -*-\n",
    "shebang, encoding, docstring, future": (
        "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n'''Doc.'''\nfrom __future__ import annotations\n"
    ),
}
BODY = "import math\n\n\ndef f(x, tol=1e-6):\n    step = 0.25  # a comment\n    return x * step + tol\n\n\nRESULT = f(2.0)\n"


@pytest.mark.parametrize("prelude", sorted(PRELUDES))
def test_parametrize_places_the_block_after_the_prelude_and_keeps_the_module_working(prelude: str) -> None:
    source = PRELUDES[prelude] + BODY
    knobs = find_knobs(source)
    assert [k.name for k in knobs] == ["tol", "step", "f_arg0"]
    rewritten = parametrize(source, knobs)
    namespace = _exec(rewritten)
    assert namespace["RESULT"] == _exec(source)["RESULT"]
    assert namespace["PARAMS"] == {"tol": 1e-6, "step": 0.25, "f_arg0": 2.0}
    assert rewritten.startswith(PRELUDES[prelude])
    assert "step = PARAMS[\"step\"]  # a comment" in rewritten
    # Byte-identical elsewhere: undo the two replacements and drop the inserted lines.
    restored = rewritten.replace('PARAMS["tol"]', "1e-6").replace('PARAMS["step"]', "0.25")
    restored = restored.replace('PARAMS["f_arg0"]', "2.0")
    block = restored[len(PRELUDES[prelude]):restored.index("}\n") + 2]
    assert block.lstrip("\n").startswith("PARAMS = {")
    assert restored.replace(block, "", 1) == source


def test_the_rewritten_file_imports_with_its_shebang_and_encoding_line(tmp_path: Path) -> None:
    source = PRELUDES["shebang, encoding, docstring, future"] + BODY
    path = tmp_path / "tuned_module.py"
    path.write_bytes(parametrize(source, find_knobs(source)).encode("utf-8"))
    spec = importlib.util.spec_from_file_location("tuned_module", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.RESULT == 2.0 * 0.25 + 1e-6 and module.__doc__ == "Doc."
    assert path.read_text(encoding="utf-8").splitlines()[:5] == [
        "#!/usr/bin/env python3", "# -*- coding: utf-8 -*-", "'''Doc.'''", "from __future__ import annotations", ""
    ]


def test_parametrize_keeps_windows_newlines() -> None:
    source = '"""Doc."""\r\nstep = 0.25\r\nrate = 0.01\r\n'
    rewritten = parametrize(source, find_knobs(source))
    assert "\n" not in rewritten.replace("\r\n", "")
    assert _exec(rewritten)["rate"] == 0.01


def test_a_signed_knob_right_after_a_keyword_stays_a_separate_token() -> None:
    source = "def f(x):\n    if x:\n        return-0.5\n    return x\n\n\nR = f(1)\n"
    rewritten = parametrize(source, find_knobs(source))
    assert 'return PARAMS["literal_l3"]' in rewritten
    assert _exec(rewritten)["R"] == -0.5


def test_parametrize_refuses_a_knob_that_does_not_match_the_source() -> None:
    knob = find_knobs("step = 0.25\n")[0]
    with pytest.raises(ValueError, match="does not hold '0.25'"):
        parametrize("step = 0.26\n", [knob])


def test_with_values_rewrites_only_the_values_in_the_block() -> None:
    source = '"""Doc."""\nstep = 0.25\nbudget = 100\noffset = -0.5\n'
    rewritten = parametrize(source, find_knobs(source))
    tuned = with_values(rewritten, {"step": 0.125, "budget": 140, "offset": -2.0})
    assert _exec(tuned)["PARAMS"] == {"step": 0.125, "budget": 140, "offset": -2.0}
    changed = [(a, b) for a, b in zip(rewritten.splitlines(), tuned.splitlines()) if a != b]
    assert [b.split("#")[0].strip() for _, b in changed] == ['"step": 0.125,', '"budget": 140,', '"offset": -2.0,']
    assert with_values(tuned, {}) == tuned
    with pytest.raises(ValueError, match="no entry speed"):
        with_values(rewritten, {"speed": 1.0})


def test_with_values_needs_a_params_block() -> None:
    with pytest.raises(ValueError, match="parametrize it first"):
        with_values("step = 0.25\n", {"step": 0.5})


def test_a_module_that_uses_the_name_params_gets_another_block_name() -> None:
    source = "PARAMS = load()\nstep = 0.25\n"
    name = tuning.free_name(source)
    assert name == "PARAMS_2"
    rewritten = parametrize(source, find_knobs(source), name)
    assert 'step = PARAMS_2["step"]' in rewritten
    assert with_values(rewritten, {"step": 0.5}, name).count('"step": 0.5') == 1


def test_format_value_reads_back_exactly() -> None:
    assert tuning.format_value(0.1) == "0.1" and tuning.format_value(7) == "7"
    assert tuning.format_value(1e-06) == "1e-06"
    with pytest.raises(ValueError):
        tuning.format_value(True)
    with pytest.raises(ValueError):
        tuning.format_value(math.inf)


def test_the_knob_prompt_holds_the_papers_rules_and_the_source_in_a_safe_fence() -> None:
    source = 'doc = """```python\n```"""\nstep = 0.25\n'
    prompt = tuning.knob_prompt(source)
    for rule in ("If high/low >= 100, scale MUST be \"log\"", "Pick at most 8 knobs", "skip it (ambiguous)",
                 "cooling factor (0<x<1) | linear | [0.5, 0.99999]", '{"hparams": [ { ...one knob... }, ... ]}'):
        assert rule in prompt
    assert "````python\n" + source.rstrip("\n") + "\n````\n" in prompt


def _reply(*entries: dict[str, Any]) -> str:
    return "Here are the knobs:\n```json\n" + json.dumps({"hparams": list(entries)}) + "\n```\n"


def _entry(name: str, literal: str, context: str, low: Any, high: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "source_literal": literal, "context_line": context, "low": low, "high": high, **extra}


def test_a_valid_model_reply_becomes_knobs_and_bad_entries_are_explained() -> None:
    source = EXAMPLE.read_text(encoding="utf-8")
    reply = _reply(
        _entry("step_size", "3.0", "step_size = 3.0", 0.03, 300, scale="linear", kind="float", rationale="step"),
        _entry("iterations", "60", "iterations = 60", 12.4, 299.5, scale="log", kind="int"),
        _entry("cooling", "0.5", "cooling = 0.5", 0.5, 0.99999, scale="linear"),
        _entry("cooling", "2.0", "initial_temperature = 2.0", 0.02, 200),
        {"name": "missing", "source_literal": "2.0", "context_line": "initial_temperature = 2.0", "low": 0.02},
        _entry("typo", "2.5", "initial_temperature = 2.0", 0.02, 200),
        _entry("words", "2.0", "initial_temperature = 2.0", "low", 200),
        _entry("elsewhere", "20", "return best", 2, 200),
    )
    knobs, problems = parse_knob_reply(reply, source)
    assert [(k.name, k.low, k.high, k.scale, k.family) for k in knobs] == [
        ("iterations", 12, 300, "log", "llm"),  # integers: floor/ceil
        ("step_size", 0.03, 300.0, "log", "llm"),  # high/low >= 100 forces log
        ("cooling", 0.5, 0.99999, "linear", "llm"),
    ]
    assert knobs[1].rationale == "step"
    assert problems == [
        "entry 4: 'cooling' repeats an earlier knob",
        "entry 5: missing high",
        "entry 6: '2.5' is not a literal of the line 'initial_temperature = 2.0'",
        "entry 7: low or high is not a number",
        "entry 8: '20' is not a literal of the line 'return best'",
    ]
    assert "PARAMS" in parametrize(source, knobs)


def test_the_model_literal_matches_as_the_papers_regex_does() -> None:
    source = "a = 0.123\nb = 10.1 + 0.1\nc = -0.1\n"
    knobs, _ = parse_knob_reply(_reply(_entry("b_small", "0.1", "b = 10.1 + 0.1", 0.01, 1),
                                       _entry("c_neg", "0.1", "c = -0.1", 0.01, 1)), source)
    assert [(k.line, k.text, k.value) for k in knobs] == [(2, "0.1", 0.1), (3, "0.1", 0.1)]
    assert _exec(parametrize(source, knobs))["c"] == -0.1


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("I could not find any knobs.", "the reply holds no JSON object"),
        ('{"hparams": [}', "the reply's JSON does not parse"),
        ('{"knobs": []}', 'the reply has no "hparams" list'),
    ],
)
def test_an_unusable_reply_yields_no_knobs_and_says_why(reply: str, problem: str) -> None:
    knobs, problems = parse_knob_reply(reply, "step = 0.25\n")
    assert knobs == [] and problems[0].startswith(problem)


_NAMES = st.sampled_from(["step", "lr", "tol", "max_iter", "weight", "rate", "budget", "sigma", "x", "y"])
_VALUES = st.one_of(
    st.integers(min_value=-10_000, max_value=10_000).filter(lambda v: v not in (0,)),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False).filter(lambda v: v != 0),
)


@st.composite
def _programs(draw: st.DrawFn) -> str:
    prelude = draw(st.sampled_from(sorted(PRELUDES.values())))
    values = draw(st.lists(st.tuples(_NAMES, _VALUES), min_size=1, max_size=10))
    lines = [f"{name}_{i} = {value!r}" for i, (name, value) in enumerate(values)]
    terms = " + ".join(f"{name}_{i} * {draw(_VALUES)!r}" for i, (name, _) in enumerate(values))
    lines.append(f"RESULT = [{terms}, f({draw(_VALUES)!r})]")
    return prelude + "def f(z, scale=0.5):\n    return z * scale\n\n" + "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None)
@given(_programs())
def test_parametrize_then_the_original_values_computes_what_the_original_did(source: str) -> None:
    knobs = find_knobs(source, max_knobs=50)
    rewritten = parametrize(source, knobs)
    original_values = {k.name: k.value for k in knobs}
    assert tuning.params_entries(rewritten).keys() == original_values.keys()
    again = with_values(rewritten, original_values)
    expected, got = _exec(source), _exec(again)
    assert got["RESULT"] == expected["RESULT"]
    assert got["PARAMS"] == original_values
    for knob in knobs:
        assert knob.low <= knob.value <= knob.high and knob.scale in tuning.SCALES
