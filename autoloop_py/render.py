"""Jinja2 rendering of every prompt and generated file from `autoloop_py/templates/`."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jinja2


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """Returns the package's template environment (strict, trailing newlines kept)."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("autoloop_py", "templates"),
        auto_reload=False,  # package data does not change under a run; checking mtimes costs a stat per render
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render(template: str, **context: Any) -> str:
    """Renders a template of the package with the given context."""
    return environment().get_template(template).render(**context)
