"""A program's own dependencies: `requirements:` in its frontmatter, or a requirements.txt in its folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoloop_py.errors import ProgramError
from autoloop_py.program.model import Program

# Looked for in this order inside the program folder (upstream's examples keep theirs in code/).
REQUIREMENTS_FILES = ("requirements.txt", "code/requirements.txt")


@dataclass(frozen=True)
class Requirements:
    """What pip installs for a program before it is evaluated.

    Attributes:
      args: the arguments after `pip install` (requirement specifiers, or `-r <file>`).
      source: where they come from, for messages.
    """

    args: tuple[str, ...]
    source: str


def program_requirements(root: Path, program: Program) -> Requirements:
    """Returns the program's requirements: the frontmatter's `requirements:` (a list or one line), else a file.

    Raises ProgramError when `requirements:` is neither a string nor a list of strings.
    """
    declared = program.config.extra.get("requirements")
    if declared is not None:
        if isinstance(declared, str):
            items = declared.replace(",", " ").split()
        elif isinstance(declared, list) and all(isinstance(item, str) for item in declared):
            items = [item.strip() for item in declared if item.strip()]
        else:
            raise ProgramError("frontmatter `requirements`: give a list of pip requirements, e.g. [numpy, scipy]",
                               program.path)
        if any(item.startswith("-") for item in items):
            raise ProgramError("frontmatter `requirements`: pip options are not allowed; list requirements only",
                               program.path)
        return Requirements(tuple(items), f"{program.path} (requirements:)")
    if program.directory is not None:
        for name in REQUIREMENTS_FILES:
            path = program.directory / name
            if (root / path).is_file():
                return Requirements(("-r", path.as_posix()), path.as_posix())
    return Requirements((), "none")
