"""program.md texts for the tests' small programs: one Target, one protected evaluator, a `score` metric."""

from __future__ import annotations

from typing import Mapping


def program_md(
    title: str,
    goal: str,
    *,
    frontmatter: Mapping[str, object] | None = None,
    target: tuple[str, ...] = ("code/value.py",),
    protected: tuple[str, ...] = ("code/evaluate.py",),
) -> str:
    """Returns a program.md whose evaluation runs `python3 code/evaluate.py` and reads `score` (higher is better)."""
    head = "".join(f"{key}: {value}\n" for key, value in (frontmatter or {}).items())
    return (
        (f"---\n{head}---\n\n" if head else "")
        + f"# {title}\n\n## Goal\n\n{goal}\n\n## Target\n\n"
        + "".join(f"- `{path}`\n" for path in target)
        + "\nDo NOT modify:\n"
        + "".join(f"- `{path}`\n" for path in protected)
        + "\n## Evaluation\n\n```bash\npython3 code/evaluate.py\n```\n\nThe metric is `score`. Higher is better.\n"
    )
