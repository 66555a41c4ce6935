"""Program: discovery of `.autoloop/programs/*`, frontmatter, sections and the Target allowlist."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from autoloop_py import markdown as md
from autoloop_py.errors import ProgramError
from autoloop_py.github.agentic_scheduler import discover  # folders, then bare files: the scheduler's order
from autoloop_py.program import names as program_names
from autoloop_py.program.direction import read_direction
from autoloop_py.program.frontmatter import ProgramConfig, key_line, parse_frontmatter
from autoloop_py.program.target import Target, parse_target

PROGRAMS_DIR = Path(".autoloop/programs")
UNCONFIGURED_SENTINEL = "<!-- AUTOLOOP:UNCONFIGURED -->"
_PLACEHOLDER_RE = re.compile(r"\bTODO\b|\bREPLACE[ _-]?ME\b|<REPLACE\b")
_METRIC_RE = re.compile(r"metric\s+is\s+`([^`]+)`", re.IGNORECASE)
_SHELL_INFOS = ("bash", "sh", "shell", "console", "")
# An evaluation report's keys that are never a metric (loop/evaluation_report.RESERVED_KEYS), and what they are.
_RESERVED_KEYS = {"error": "the reason the candidate is invalid", "feedback": "text for the model"}


@dataclass(frozen=True)
class Evaluation:
    """How a candidate is scored.

    Attributes:
      command: the shell command (the fenced bash block of `## Evaluation`).
      metric: key of the metric in the JSON object the command prints last.
      line: 1-based line of the command in program.md.
    """

    command: str
    metric: str
    line: int


@dataclass(frozen=True)
class Program:
    """A program: what to improve, which files may change, and how to measure.

    Attributes:
      name: folder name (or stem of a bare `.md`).
      path: program.md, relative to the repository root.
      directory: the program folder relative to the root; None for a bare `.md` program.
      goal: the Goal section's text.
      target: the Target allowlist.
      evaluation: the Evaluation command and metric (None only for unconfigured programs).
      strategy_text: the `## Evolution Strategy` section body ('' when absent).
      config: frontmatter settings.
      unconfigured: the file is a template (sentinel or placeholder text).
      text: the whole program.md.
      issue: the GitHub issue that defines the program (issue programs only).
      warnings: `file:line: message` notes on values read leniently, saying what was assumed.
      direction_problem: why the metric's direction cannot be read (none, unreadable, contradictory): `check`
        refuses it; `run` assumes `higher`, as upstream autoloop does, and warns.
    """

    name: str
    path: Path
    directory: Path | None
    goal: str
    target: Target
    evaluation: Evaluation | None
    strategy_text: str
    config: ProgramConfig
    unconfigured: bool
    text: str
    issue: int | None = None
    warnings: tuple[str, ...] = ()
    direction_problem: ProgramError | None = None

    @property
    def base_dir(self) -> Path:
        """Returns the folder (relative to the root) that relative paths and the evaluation start from."""
        return self.directory if self.directory is not None else Path(".")

    @property
    def metric(self) -> str | None:
        """Returns the metric's key; None for an unconfigured program, which has no evaluation."""
        return self.evaluation.metric if self.evaluation else None

    @property
    def direction(self) -> str:
        """Returns 'higher' or 'lower' (default higher, as upstream)."""
        return self.config.metric_direction or "higher"


def program_name(path: Path) -> str:
    """Returns the program name for a program.md path (parent folder) or bare file (stem)."""
    return path.parent.name if path.name == "program.md" else path.stem


def load_programs(root: Path) -> list[Program]:
    """Loads every program under root; raises the first ProgramError (see `check_all`)."""
    programs, problems = check_all(root)
    if problems:
        raise problems[0]
    return programs


def load_program(root: Path, rel: Path) -> Program:
    """Loads one program.md; raises ProgramError naming file and line on the first problem."""
    program, problems = _parse(root, rel)
    if problems:
        raise problems[0]
    assert program is not None
    return program


def require_on_base(program: Program, worktree: Path, base: str, remote: bool = True) -> None:
    """Raises ProgramError when the program's file is missing from a worktree made from `base`.

    The program was read from the local checkout, but iterations run on the base branch: a program
    that exists only in local, unpushed commits would fail later with a missing evaluator.
    """
    if program.path.is_absolute() or program.path.parts[:1] == (".git",):
        return  # an issue program, materialised outside the tree
    if not (worktree / program.path).is_file():
        step = "push it first" if remote else "commit it first"
        raise ProgramError(
            f"program {program.name} is not on {base} yet: {step} (autoloop runs on {base}, "
            "not on your local checkout)", program.path,
        )


def check_all(root: Path) -> tuple[list[Program], list[ProgramError]]:
    """Returns the programs that load and every problem found in any program."""
    programs: list[Program] = []
    paths = discover(root)
    problems = _clashes(paths)
    clashing = {p.path for p in problems}
    for rel in paths:
        if rel in clashing:
            continue  # a name used twice: neither program runs
        program, found = _parse(root, rel)
        problems.extend(found)
        if program is not None and not found:
            programs.append(program)
    return programs, problems


def find_program(programs: Iterable[Program], name: str) -> Program:
    """Returns the program called name, or raises an error listing the available ones."""
    programs = list(programs)
    for program in programs:
        if program.name == name:
            return program
    names = ", ".join(p.name for p in programs) or "none"
    raise ProgramError(f"no program named '{name}'. Available programs: {names}")


def _clashes(paths: list[Path]) -> list[ProgramError]:
    """Returns an error for every program whose name another program also has."""
    clashes = program_names.duplicates((program_name(rel), rel) for rel in paths)
    return [
        ProgramError(
            program_names.duplicate_message(program_name(rel), clashes[program_name(rel).casefold()], rel), rel
        )
        for rel in paths if program_name(rel).casefold() in clashes
    ]


def _parse(root: Path, rel: Path) -> tuple[Program | None, list[ProgramError]]:
    try:
        text = (root / rel).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        return None, [ProgramError(f"not UTF-8 text (byte {err.start}); save the file as UTF-8", rel)]
    name = program_name(rel)
    bad_name = program_names.name_problem(name)
    if bad_name is not None:
        return None, [ProgramError(f"{bad_name}; rename the {'folder' if rel.name == 'program.md' else 'file'}", rel)]
    problems: list[ProgramError] = []
    directory = rel.parent if rel.name == "program.md" else None
    warnings: list[str] = []
    config = parse_frontmatter(text, rel, problems, warnings)
    unconfigured = UNCONFIGURED_SENTINEL in text
    found = [s for s in md.split_sections(text) if s.heading is not None]
    sections = {name: s for name in _SECTIONS if (s := md.section_named(found, name)) is not None}
    goal = sections["goal"].body.strip() if "goal" in sections else ""
    base = directory if directory is not None else Path(".")
    target = parse_target(sections.get("target"), root, base, rel, problems)
    evaluation = _parse_evaluation(sections.get("evaluation"), rel, problems)
    strategy = sections.get("evolution strategy")
    if _PLACEHOLDER_RE.search("\n".join(sections[k].text for k in ("goal", "target", "evaluation") if k in sections)):
        unconfigured = True
    direction = read_direction(
        config.metric_direction, key_line(text, "metric_direction"), sections.get("evaluation"), rel,
        evaluation.metric if evaluation else None, config.objectives, key_line(text, "objectives"),
    )
    config = replace(config, metric_direction=direction.direction)
    if not goal and not unconfigured:
        problems.append(ProgramError("missing `## Goal` section (what should improve?)", rel))
    program = Program(
        name=name,
        path=rel,
        directory=directory,
        goal=goal,
        target=target,
        evaluation=evaluation,
        strategy_text=strategy.body.strip() if strategy else "",
        config=config,
        unconfigured=unconfigured,
        text=text,
        warnings=tuple(warnings),
        direction_problem=direction.problem,
    )
    return program, [] if unconfigured else problems  # a template's problems are its placeholders


_SECTIONS = ("goal", "target", "evaluation", "evolution strategy")
def _parse_evaluation(section: md.Section | None, rel: Path, problems: list[ProgramError]) -> Evaluation | None:
    if section is None:
        problems.append(ProgramError("missing `## Evaluation` section (how is a candidate scored?)", rel))
        return None
    blocks = md.fenced_code(section.body)
    shell = [b for b in blocks if b[0].split(" ")[0].lower() in _SHELL_INFOS]
    if not shell:
        problems.append(
            ProgramError("`## Evaluation` has no ```bash code block with the command to run", rel, section.start + 1)
        )
        return None
    _, command, line = shell[0]
    metric_match = _METRIC_RE.search(section.body)
    if not metric_match:
        problems.append(
            ProgramError(
                "`## Evaluation` does not name the metric; add a line like: The metric is `score`.",
                rel,
                section.start + 1,
            )
        )
        return None
    metric = metric_match.group(1).strip()
    if metric.lower() in _RESERVED_KEYS:
        where = section.start + 1 + section.body.count("\n", 0, metric_match.start()) + 1
        problems.append(
            ProgramError(
                f"the metric cannot be named `{metric}`: an evaluation's `{metric.lower()}` key is "
                f"{_RESERVED_KEYS[metric.lower()]}, never a score; rename the metric (e.g. `score`) here and in "
                "the evaluator's JSON",
                rel,
                where,
            )
        )
        return None
    return Evaluation(command.strip(), metric, section.start + 1 + line + 1)
