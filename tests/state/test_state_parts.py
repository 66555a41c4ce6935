"""Tests for autoloop_py.state.parts: the number convention shared by every section."""

from __future__ import annotations

from autoloop_py.state.parts import format_number


def test_format_number() -> None:
    assert [format_number(x) for x in (3.0, 0.364237, -2.5, 1e20, 1e-07)] == ["3", "0.364237", "-2.5", "1e+20", "1e-07"]
