"""A program's own dependencies: `requirements:` in its frontmatter, a requirements.txt in its folder, and
a `pip install …` its evaluation command begins with (upstream's examples install their packages so).

The evaluation runs in a sandbox without network, where such a `pip install` can only succeed once the
packages are there: `autoloop deps` installs them beforehand, `autoloop check` says so.
"""

from __future__ import annotations

import io
import shlex
from dataclasses import dataclass
from pathlib import Path

from autoloop_py.errors import ProgramError
from autoloop_py.program.model import Program

# Looked for in this order inside the program folder (upstream's examples keep theirs in code/).
REQUIREMENTS_FILES = ("requirements.txt", "code/requirements.txt")
# pip options that change nothing about what is installed: dropped when a leading `pip install` is read.
_QUIET_OPTIONS = frozenset({"-q", "-qq", "-qqq", "--quiet", "--no-cache-dir", "--disable-pip-version-check",
                            "--no-warn-script-location", "--user", "-U", "--upgrade"})
# Shell punctuation (operators, redirections): the statement's words end at the first token made of it.
_PUNCTUATION = frozenset("();<>|&\n")


@dataclass(frozen=True)
class Requirements:
    """What pip installs for a program before it is evaluated.

    Attributes:
      args: the arguments after `pip install` (requirement specifiers, or `-r <file>`).
      source: where they come from, for messages.
      from_evaluation: whether some come from a `pip install` the evaluation begins with.
    """

    args: tuple[str, ...]
    source: str
    from_evaluation: bool = False


@dataclass(frozen=True)
class LeadingPipInstall:
    """A `pip install …` the evaluation command begins with.

    Attributes:
      args: what it installs (specifiers, `-r <file>`), without the options that only change pip's output.
      text: the statement as written, for messages.
    """

    args: tuple[str, ...]
    text: str


def leading_pip_install(command: str) -> LeadingPipInstall | None:
    """Returns the `pip install …` (`pip3`, `python3 -m pip`) the command's first statement is, or None.

    Raises ValueError for a pip option other than the quiet ones and `-r FILE`: an index URL or an editable
    install is not something autoloop installs on a program's word.
    """
    words, stop, _ = _first_statement(_without_comment_lines(command))
    if stop[:1] in ("<", ">") and words and words[-1].isdigit():
        words = words[:-1]  # the descriptor of a redirection (`2>/dev/null`)
    start = _install_start(words)
    if start is None:
        return None
    args: list[str] = []
    rest = iter(words[start:])
    for word in rest:
        if word in ("-r", "--requirement"):
            path = next(rest, "")
            if "://" in path or Path(path).is_absolute() or ".." in Path(path).parts:
                raise ValueError(f"`-r {path}` is not a file of the repository; name one by its relative path")
            args += ["-r", path]
        elif word in _QUIET_OPTIONS:
            continue
        elif word.startswith("-"):
            raise ValueError(f"pip option {word!r} is not passed on; list requirements only (or `-r FILE`)")
        else:
            args.append(word)
    if not args or "" in args:
        return None
    return LeadingPipInstall(tuple(args), " ".join(shlex.quote(w) for w in words))


def _without_comment_lines(command: str) -> str:
    """Returns the command without its leading blank and comment lines, backslash continuations joined."""
    lines = command.replace("\\\n", " ").splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("#")):
        lines.pop(0)
    return "\n".join(lines)


def _first_statement(command: str) -> tuple[list[str], str, int]:
    """Returns the words of the command's first statement, the operator that ends it ('' at the end) and the
    offset in command just past that operator.

    Tokens are read lazily: a quoted argument of a later statement (an inline `python3 -c "…"` over many
    lines) is never parsed.
    """
    stream = io.StringIO(command)
    lexer = shlex.shlex(stream, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    words: list[str] = []
    try:
        for token in iter(lexer.get_token, lexer.eof):
            if token and set(token) <= _PUNCTUATION:
                # read ahead, pushed back
                return words, token, stream.tell() - len(getattr(lexer, "_pushback_chars", ()))
            words.append(token)
    except ValueError:
        return [], "", 0  # an unterminated quote inside the first statement
    return words, "", len(command)


def without_leading_pip_install(command: str) -> str:
    """Returns the command without a `pip install …` it begins with, when `&&`, `;` or a new line ends it.

    For a sandbox without network: `autoloop deps` installed those packages before, and the statement would
    only fail there (pip cannot reach its index, nor write where it installs). Otherwise the command as is.
    """
    body = _without_comment_lines(command)
    words, stop, end = _first_statement(body)
    if _install_start(words) is None or stop.strip(" \n") not in ("&&", ";", ""):
        return command
    try:
        if leading_pip_install(command) is None:
            return command
    except ValueError:
        return command
    return body[end:].lstrip()


def _install_start(words: list[str]) -> int | None:
    """Returns the index after `install` when words are `pip install`, `pip3 install` or `python… -m pip install`."""
    if len(words) >= 2 and words[0] in ("pip", "pip3") and words[1] == "install":
        return 2
    if len(words) >= 4 and Path(words[0]).name.startswith("python") and words[1:4] == ["-m", "pip", "install"]:
        return 4
    return None


def program_requirements(root: Path, program: Program) -> Requirements:
    """Returns the program's requirements: the frontmatter's `requirements:` (a list or one line), else a file,
    and the packages of a `pip install` the evaluation begins with.

    Raises ProgramError when `requirements:` is neither a string nor a list of strings, or when the leading
    `pip install` carries a pip option other than quiet ones and `-r FILE`.
    """
    found = _declared_or_file(root, program)
    command = program.evaluation.command if program.evaluation is not None else ""
    try:
        leading = leading_pip_install(command)
    except ValueError as err:
        line = program.evaluation.line if program.evaluation is not None else None
        raise ProgramError(f"the evaluation's `pip install`: {err}", program.path, line) from None
    if leading is None:
        return found
    known = set(requirement_names(root, found))
    extra = tuple(arg for arg in leading.args if arg.startswith("-") or arg not in known)
    source = f"the evaluation's `{leading.text}`"
    return Requirements(found.args + extra, source if not found.args else f"{found.source} and {source}", True)


def _declared_or_file(root: Path, program: Program) -> Requirements:
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


def requirement_names(root: Path, found: Requirements) -> list[str]:
    """Returns the requirements pip would install, those of each `-r FILE` read from the file (for messages)."""
    names: list[str] = []
    args = iter(found.args)
    for arg in args:
        if arg != "-r":
            names.append(arg)
            continue
        try:
            text = (root / next(args, "")).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        names += [line.split("#", 1)[0].strip() for line in text.splitlines()
                  if line.split("#", 1)[0].strip() and not line.lstrip().startswith("-")]
    return names
