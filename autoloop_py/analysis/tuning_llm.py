"""The LLM knob selection of `autoloop tune --llm`: the paper's prompt (B.9) and the validation of its reply.

The model returns `{"hparams": [...]}`; an entry is kept only when its literal matches, as the
paper's rewrite does, on the first line containing its `context_line`; its range is widened to
hold the default and put under the paper's hard rules. The caller falls back to the literal
finder when no entry survives.
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Mapping, Sequence

from autoloop_py.analysis.tuning_source import (
    MAX_KNOBS,
    SCALES,
    Knob,
    Literal,
    numeric_literals,
    parents_of,
    pinned_lines,
    prelude_lines,
    snake_case,
    split_lines,
)
from autoloop_py.render import render
from autoloop_py.state.parts import finite_number

_SPAN = math.sqrt(10.0)


def knob_prompt(source: str, language: str = "python") -> str:
    """Returns the LLM prompt asking for tunable knobs under the paper's rules."""
    longest = max((len(run) for run in re.findall(r"`+", source)), default=0)
    fence = "`" * max(3, longest + 1)
    return render("tune_knobs_prompt.md.j2", source=source, language=language, max_knobs=MAX_KNOBS, fence=fence)


def parse_knob_reply(reply: str, source: str) -> tuple[list[Knob], list[str]]:
    """Returns the valid knobs of a model's `{"hparams": [...]}` reply and why each other entry was dropped."""
    specs, problem = _hparams(reply)
    if problem:
        return [], [problem]
    tree = ast.parse(source)
    first = prelude_lines(source, tree) + 1
    pinned = pinned_lines(source)
    literals = [lit for lit in numeric_literals(tree, source, parents_of(tree), operands=True)
                if lit.line >= first and lit.line not in pinned]
    knobs: list[Knob] = []
    problems: list[str] = []
    for number, spec in enumerate(specs, start=1):
        knob, why = _spec_knob(spec, source, literals, {k.name for k in knobs}, {(k.line, k.col) for k in knobs})
        if knob is None:
            problems.append(f"entry {number}: {why}")
        elif len(knobs) >= MAX_KNOBS:
            problems.append(f"entry {number}: more than {MAX_KNOBS} knobs; dropped")
        else:
            knobs.append(knob)
    return sorted(knobs, key=lambda k: (k.line, k.col)), problems


def _hparams(reply: str) -> tuple[list[Mapping[str, object]], str | None]:
    """Returns the reply's `hparams` entries, or why there are none."""
    start, end = reply.find("{"), reply.rfind("}")
    if start < 0 or end <= start:
        return [], "the reply holds no JSON object"
    try:
        data = json.loads(reply[start:end + 1])
    except json.JSONDecodeError as err:
        return [], f"the reply's JSON does not parse ({err.msg} at character {err.pos})"
    entries = data.get("hparams") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return [], 'the reply has no "hparams" list'
    return [entry for entry in entries if isinstance(entry, dict)], None


def _spec_knob(
    spec: Mapping[str, object], source: str, literals: Sequence[Literal], names: set[str], places: set[tuple[int, int]]
) -> tuple[Knob | None, str]:
    """Returns the knob one reply entry names, or None and why it was dropped."""
    missing = [key for key in ("name", "source_literal", "context_line", "low", "high") if key not in spec]
    if missing:
        return None, f"missing {', '.join(missing)}"
    low, high = _float(spec["low"]), _float(spec["high"])
    if low is None or high is None:
        return None, "low or high is not a number"
    literal = _locate(str(spec["source_literal"]).strip(), str(spec["context_line"]).strip(), source, literals)
    if literal is None:
        return None, f"{spec['source_literal']!r} is not a literal of the line {str(spec['context_line']).strip()!r}"
    name = snake_case(str(spec["name"])) or f"literal_l{literal.line}"
    if name in names or (literal.line, literal.col) in places:
        return None, f"{name!r} repeats an earlier knob"
    kind = "int" if isinstance(literal.value, int) else "float"
    scale = str(spec.get("scale", "linear"))
    low, high, scale = _checked_range(literal.value, kind, min(low, high), max(low, high), scale)
    knob = Knob(name, literal.line, literal.col, literal.end_col, literal.text, literal.value, kind, low, high, scale,
                "llm", str(spec.get("rationale", ""))[:300])
    return knob, ""


def _checked_range(
    value: int | float, kind: str, low: float, high: float, scale: str
) -> tuple[int | float, int | float, str]:
    """Returns the model's range widened to hold the default, with the paper's hard rules applied."""
    low, high = min(low, value), max(high, value)
    if kind == "int":
        low_int, high_int = (max(1, math.floor(low)) if value >= 1 else math.floor(low)), math.ceil(high)
        low, high = low_int, max(high_int, low_int + 1)
    elif high <= low:
        low, high = (value / _SPAN, value * _SPAN) if value > 0 else (value - 1.0, value + 1.0)
    if low > 0 and high / low >= 100:
        scale = "log"
    return low, high, scale if scale in SCALES and (scale == "linear" or low > 0) else "linear"


def _locate(text: str, context: str, source: str, literals: Sequence[Literal]) -> Literal | None:
    """Returns the literal `text` on the first line containing `context`, matched as the paper's rewrite does."""
    if not text or not context or text not in source:
        return None
    pattern = re.compile(r"(?<![\w.])" + re.escape(text) + r"(?![\w.])")
    for number, line in enumerate(split_lines(source), start=1):
        if context not in line:
            continue
        found = pattern.search(line)
        if found is None:
            return None
        return next((lit for lit in literals if (lit.line, lit.col) == (number, found.start())), None)
    return None


def _float(value: object) -> float | None:
    return None if isinstance(value, bool) else finite_number(str(value))
