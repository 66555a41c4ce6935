"""A strict grammar check of the Mermaid we emit (xychart-beta and flowchart LR), for tests that run anywhere.

It accepts only the subset autoloop writes, so anything unexpected is an error; where mermaid.js is
available, tests also render the same blocks with it (tests/browser.py).
"""

from __future__ import annotations

import re

NUMBER = r"-?\d+(?:\.\d+)?"
QUOTED = r'"[^"\n]*"'
_IDENT = r"[A-Za-z][\w]*"


def mermaid_blocks(markdown: str) -> list[str]:
    """Returns the bodies of the ```mermaid fences in a markdown text."""
    return re.findall(r"^```mermaid\n(.*?)^```$", markdown, re.M | re.S)


def check(block: str) -> list[str]:
    """Returns the grammar errors of one Mermaid block ([] when it is well formed)."""
    lines = [line for line in block.splitlines() if line.strip()]
    if not lines:
        return ["empty block"]
    if lines[0] == "xychart-beta":
        return _xychart(lines[1:])
    if lines[0] == "flowchart LR":
        return _flowchart(lines[1:])
    return [f"unknown diagram type {lines[0]!r}"]


def _numbers(text: str) -> list[float] | None:
    items = [item.strip() for item in text.split(",")]
    if not all(re.fullmatch(NUMBER, item) for item in items):
        return None
    return [float(item) for item in items]


def _xychart(lines: list[str]) -> list[str]:
    errors: list[str] = []
    seen: dict[str, int] = {}
    categories = 0
    for line in lines:
        text = line.strip()
        if m := re.fullmatch(rf"title {QUOTED}", text):
            seen["title"] = 1
        elif m := re.fullmatch(rf"x-axis {QUOTED} \[((?:{QUOTED}, )*{QUOTED})\]", text):
            categories = len(re.findall(QUOTED, m.group(1)))
            seen["x"] = categories
        elif m := re.fullmatch(rf"y-axis {QUOTED} ({NUMBER}) --> ({NUMBER})", text):
            if float(m.group(1)) >= float(m.group(2)):
                errors.append(f"y-axis range is empty: {text}")
            seen["y"] = 1
        elif m := re.fullmatch(r"(bar|line) \[(.*)\]", text):
            values = _numbers(m.group(2))
            if values is None:
                errors.append(f"{m.group(1)} has a value that is not a plain number: {text}")
            else:
                seen[m.group(1)] = len(values)
        else:
            errors.append(f"unexpected line: {text!r}")
    for key in ("title", "x", "y", "bar", "line"):
        if key not in seen:
            errors.append(f"missing {key}")
    for key in ("bar", "line"):
        if key in seen and seen[key] != categories:
            errors.append(f"{key} has {seen[key]} values for {categories} categories")
    return errors


def _flowchart(lines: list[str]) -> list[str]:
    errors: list[str] = []
    defined: set[str] = set()
    classes: set[str] = set()
    for line in lines:
        text = line.strip()
        if m := re.fullmatch(rf"({_IDENT})\[{QUOTED}\]", text):
            defined.add(m.group(1))
        elif m := re.fullmatch(rf"({_IDENT}) -->(?:\|{QUOTED}\|)? ({_IDENT})", text):
            for node in m.groups():
                if node not in defined:
                    errors.append(f"edge names undefined node {node}")
        elif m := re.fullmatch(rf"classDef ({_IDENT}) [\w#:,.-]+(?:,[\w#:.-]+)*", text):
            classes.add(m.group(1))
        elif m := re.fullmatch(rf"class ({_IDENT}) ({_IDENT})", text):
            if m.group(1) not in defined or m.group(2) not in classes:
                errors.append(f"class line names an unknown node or class: {text}")
        else:
            errors.append(f"unexpected line: {text!r}")
    if not defined:
        errors.append("no node")
    return errors
