"""The package keeps its line length (120 characters, black-style): issue 39's house rule, checked here."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "autoloop_py"
LIMIT = 120


def test_no_line_of_the_package_is_longer_than_the_limit() -> None:
    long = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {len(line)} characters"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > LIMIT
    ]
    assert long == []
