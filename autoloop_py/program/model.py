"""Program: discovery of `.autoloop/programs/*`, frontmatter, sections and the Target allowlist."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable

import yaml

from autoloop_py import markdown as md
from autoloop_py.program import names as program_names
from autoloop_py.program.interval import parse_schedule
from autoloop_py.errors import ProgramError

PROGRAMS_DIR = Path(".autoloop/programs")
UNCONFIGURED_SENTINEL = "<!-- AUTOLOOP:UNCONFIGURED -->"
_PLACEHOLDER_RE = re.compile(r"\bTODO\b|\bREPLACE[ _-]?ME\b|<REPLACE\b")
_METRIC_RE = re.compile(r"metric\s+is\s+`([^`]+)`", re.IGNORECASE)
_LOWER_RE = re.compile(r"lower\s+is\s+better", re.IGNORECASE)
_HIGHER_RE = re.compile(r"higher\s+is\s+better", re.IGNORECASE)
_SHELL_INFOS = ("bash", "sh", "shell", "console", "")


@dataclass(frozen=True)
class ProgramConfig:
    """Frontmatter settings of a program.

    Attributes:
      schedule: upstream schedule string (`every 6h`, `daily`...), or None for always due.
      target_metric: stop (complete) once the best metric reaches this value.
      metric_direction: "higher" or "lower"; None when neither frontmatter nor prose says.
      timeout_minutes: the CI job's time limit (upstream key).
      proposer: default proposer for this program (tune, llm, agent).
      model: litellm model name for the llm proposer.
      evaluation_timeout: seconds one evaluation run may take.
      repeats: evaluations per candidate; the median counts.
      min_delta: the smallest improvement that counts as one.
      seed: base seed of every random choice for this program.
      novelty_filter: skip repeats and mostly-recycled candidates, and show recently deleted lines in prompts.
      novelty_threshold: the share of re-added deleted lines at which a candidate counts as recycled
        (novelty.DEFAULT_THRESHOLD; the paper measures about 0.3 for a typical edit).
      isolation: how evaluations and agents are confined: auto (bubblewrap when it works), bwrap, none.
      evaluation_network: let the evaluation use the network (inside bubblewrap it has none by default).
      llm_timeout: seconds one model request may take (`llm-timeout`).
      llm_retries: further requests after a timed-out or failed one (`llm-retries`).
      budget_usd: dollars the program may spend on model calls in all (None: no cap).
      budget_usd_per_day: dollars per UTC day.
      budget_tokens: model tokens in all.
      budget_tokens_per_day: model tokens per UTC day.
      max_file_bytes: the largest Target file a candidate may write; a larger one is rejected before evaluation.
      extra: frontmatter keys this version does not know, kept for strategies.
    """

    schedule: str | None = None
    target_metric: float | None = None
    metric_direction: str | None = None
    timeout_minutes: float | None = None
    proposer: str | None = None
    model: str | None = None
    evaluation_timeout: float = 300.0
    repeats: int = 1
    min_delta: float = 0.0
    seed: int = 0
    novelty_filter: bool = True
    novelty_threshold: float = 0.8
    isolation: str = "auto"
    evaluation_network: bool = False
    llm_timeout: float = 120.0
    llm_retries: int = 2
    budget_usd: float | None = None
    budget_usd_per_day: float | None = None
    budget_tokens: float | None = None
    budget_tokens_per_day: float | None = None
    max_file_bytes: int = 1 << 20
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """The files a candidate may change.

    Attributes:
      include: repo-relative POSIX glob patterns a candidate may write.
      exclude: repo-relative patterns it may never write, even when included.
      line: 0-based line of the `## Target` heading in program.md.
    """

    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    line: int = 0

    def allows(self, path: str) -> bool:
        """Returns whether a repo-relative POSIX path may be changed by a candidate."""
        if ".." in PurePosixPath(path).parts or path.startswith("/"):
            return False
        if any(glob_match(p, path) for p in self.exclude):
            return False
        return any(glob_match(p, path) for p in self.include)


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

    @property
    def base_dir(self) -> Path:
        """Returns the folder (relative to the root) that relative paths and the evaluation start from."""
        return self.directory if self.directory is not None else Path(".")

    @property
    def direction(self) -> str:
        """Returns 'higher' or 'lower' (default higher, as upstream)."""
        return self.config.metric_direction or "higher"


def discover(root: Path) -> list[Path]:
    """Returns program.md paths (relative to root) in upstream order: folders, then bare files."""
    base = root / PROGRAMS_DIR
    if not base.is_dir():
        return []
    folders = sorted(p for p in base.iterdir() if (p / "program.md").is_file())
    bare = sorted(p for p in base.glob("*.md") if p.is_file())
    return [p.relative_to(root) for p in [f / "program.md" for f in folders] + bare]


def program_name(path: Path) -> str:
    """Returns the program name for a program.md path (parent folder) or bare file (stem)."""
    return path.parent.name if path.name == "program.md" else path.stem


def load_programs(root: Path) -> list[Program]:
    """Loads every program under root; raises the first ProgramError (see `check_all`)."""
    paths = discover(root)
    clashes = _clashes(paths)
    if clashes:
        raise clashes[0]
    return [load_program(root, p) for p in paths]


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
        ProgramError(program_names.duplicate_message(program_name(rel), clashes[program_name(rel).casefold()], rel), rel)
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
    config, body_offset = _parse_frontmatter(text, rel, problems, warnings)
    unconfigured = UNCONFIGURED_SENTINEL in text
    found = [s for s in md.split_sections(text) if s.heading is not None]
    sections = {name: s for name in _SECTIONS if (s := md.section_named(found, name)) is not None}
    goal = sections["goal"].body.strip() if "goal" in sections else ""
    base = directory if directory is not None else Path(".")
    target = _parse_target(sections.get("target"), root, base, rel, problems)
    evaluation = _parse_evaluation(sections.get("evaluation"), rel, problems)
    strategy = sections.get("evolution strategy")
    if _PLACEHOLDER_RE.search("\n".join(sections[k].text for k in ("goal", "target", "evaluation") if k in sections)):
        unconfigured = True
    if config.metric_direction is None and "evaluation" in sections:
        body = sections["evaluation"].body
        if _LOWER_RE.search(body):
            config = _replace(config, metric_direction="lower")
        elif _HIGHER_RE.search(body):
            config = _replace(config, metric_direction="higher")
    if unconfigured:
        problems = [p for p in problems if "matches nothing" not in p.message]
    if not unconfigured:
        if not goal:
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
    )
    if unconfigured:
        return program, []
    return program, problems


def _replace(config: ProgramConfig, **changes: Any) -> ProgramConfig:
    from dataclasses import replace

    return replace(config, **changes)


_SECTIONS = ("goal", "target", "evaluation", "evolution strategy")
# Keys upstream autoloop reads leniently (a bad value is a warning there): what we assume instead.
_LENIENT = {
    "metric_direction": (None, "assuming what the Evaluation prose says, else `higher` (as upstream autoloop)"),
    "target_metric": (None, "ignoring it: the program never completes on its own"),
    "timeout_minutes": (None, "ignoring it"),
}
_FRONTMATTER_RE = re.compile(r"\A((?:\s*<!--.*?-->\s*\n)*)---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)

_KEYS = {
    "schedule": "schedule",
    "target-metric": "target_metric",
    "target_metric": "target_metric",
    "metric-direction": "metric_direction",
    "metric_direction": "metric_direction",
    "timeout-minutes": "timeout_minutes",
    "timeout_minutes": "timeout_minutes",
    "proposer": "proposer",
    "model": "model",
    "evaluation-timeout": "evaluation_timeout",
    "evaluation_timeout": "evaluation_timeout",
    "repeats": "repeats",
    "min-delta": "min_delta",
    "min_delta": "min_delta",
    "seed": "seed",
    "novelty-filter": "novelty_filter",
    "novelty_filter": "novelty_filter",
    "novelty-threshold": "novelty_threshold",
    "novelty_threshold": "novelty_threshold",
    "isolation": "isolation",
    "evaluation-network": "evaluation_network",
    "evaluation_network": "evaluation_network",
    "llm-timeout": "llm_timeout",
    "llm_timeout": "llm_timeout",
    "llm-retries": "llm_retries",
    "llm_retries": "llm_retries",
    **{spelling: name for name in ("budget_usd", "budget_usd_per_day", "budget_tokens", "budget_tokens_per_day")
       for spelling in (name, name.replace("_", "-"))},
    "max-file-bytes": "max_file_bytes",
    "max_file_bytes": "max_file_bytes",
}


def _parse_frontmatter(
    text: str, rel: Path, problems: list[ProgramError], warnings: list[str]
) -> tuple[ProgramConfig, int]:
    match = _FRONTMATTER_RE.match(text)
    if not match:
        return ProgramConfig(), 0
    first_line = match.group(1).count("\n") + 2
    try:
        data = yaml.safe_load(match.group(2)) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = first_line + mark.line if mark is not None else first_line
        problems.append(ProgramError(f"invalid YAML frontmatter: {getattr(err, 'problem', err)}", rel, line))
        return ProgramConfig(), match.end()
    if not isinstance(data, dict):
        problems.append(ProgramError("frontmatter must be a mapping of `key: value` lines", rel, first_line))
        return ProgramConfig(), match.end()
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        line = first_line + _key_line(match.group(2), str(key))
        field_name = _KEYS.get(str(key))
        if field_name is None:
            extra[str(key)] = value
            continue
        try:
            values[field_name] = _coerce(field_name, value)
        except ValueError as err:
            if field_name not in _LENIENT:
                problems.append(ProgramError(f"frontmatter `{key}`: {err}", rel, line))
                continue
            assumed, what = _LENIENT[field_name]
            values[field_name] = assumed
            warnings.append(f"{rel}:{line}: frontmatter `{key}`: {err}; {what}")
    return ProgramConfig(**values, extra=extra), match.end()


def _key_line(block: str, key: str) -> int:
    for i, line in enumerate(block.splitlines()):
        if line.strip().startswith(f"{key}:"):
            return i
    return 0


_DEFAULTED = (
    "evaluation_timeout", "repeats", "min_delta", "seed", "novelty_filter", "novelty_threshold", "llm_timeout",
    "llm_retries", "max_file_bytes", "isolation", "evaluation_network",
)
_ISOLATIONS = ("auto", "bwrap", "none")
# Zero or less would mean "no time at all" (and `.inf` no limit at all), so these must be positive and finite.
_POSITIVE = ("evaluation_timeout", "timeout_minutes")
_LEAST = {"repeats": 1, "llm_retries": 0, "max_file_bytes": 1}


def _coerce(field_name: str, value: Any) -> Any:
    if value is None:
        return None if field_name not in _DEFAULTED else _default(field_name)
    if field_name == "isolation":
        if str(value).strip().lower() not in _ISOLATIONS:
            raise ValueError(f"must be one of {', '.join(_ISOLATIONS)}, got {value!r}")
        return str(value).strip().lower()
    if field_name in ("novelty_filter", "evaluation_network"):
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, got {value!r}")
        return value
    if field_name == "schedule":
        return _schedule(str(value).strip())
    if field_name in ("proposer", "model"):
        return str(value).strip()
    if field_name == "metric_direction":
        direction = str(value).strip().strip("'\"").lower()
        if direction not in ("higher", "lower"):
            raise ValueError(f"must be `higher` or `lower`, got {value!r}")
        return direction
    if field_name in ("repeats", "seed", "llm_retries", "max_file_bytes"):
        if isinstance(value, bool) or not isinstance(value, int) or (field_name != "seed" and value < _LEAST[field_name]):
            least = f" >= {_LEAST[field_name]}" if field_name != "seed" else ""
            raise ValueError(f"must be a whole number{least}, got {value!r}")
        return value
    if isinstance(value, bool):
        raise ValueError(f"must be a number, got {value!r}")
    try:
        number = float(str(value).strip().strip("'\""))
    except ValueError:
        raise ValueError(f"must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"must be a finite number, got {value!r}")
    if field_name in _POSITIVE and number <= 0:
        raise ValueError(f"must be a number above 0, got {value!r}")
    if field_name != "target_metric" and number < 0:
        raise ValueError(f"must be a non-negative number, got {value!r}")
    if field_name == "llm_timeout" and number <= 0:
        raise ValueError(f"must be a number of seconds above 0, got {value!r}")
    if field_name == "novelty_threshold" and not 0 < number <= 1:
        raise ValueError(f"must be a share above 0 and at most 1 (e.g. 0.8), got {value!r}")
    return number


def _schedule(text: str) -> str:
    """Returns the schedule when it reads as an interval above zero; raises ValueError saying why not."""
    if text:
        parse_schedule(text)
    return text


def _default(field_name: str) -> Any:
    return getattr(ProgramConfig(), field_name)


def _parse_target(section: md.Section | None, root: Path, base: Path, rel: Path, problems: list[ProgramError]) -> Target:
    if section is None:
        problems.append(ProgramError("missing `## Target` section (which files may change?)", rel))
        return Target(())
    include: list[str] = []
    exclude: list[str] = []
    prose: list[str] = []
    excluding = False
    for token in md.parse_blocks(section.body):
        if token["type"] == "paragraph":
            excluding = excluding or _says_do_not_modify(md.inline_text(token.get("children", [])))
            if not excluding:
                prose.extend(c["raw"].strip() for c in _codespans(token))
        elif token["type"] == "list":
            for spans, nested_exclude in _target_items(token, excluding):
                (exclude if nested_exclude else include).extend(spans)
    include = [p for p in include if looks_like_path(p, root, base)]
    exclude = [p for p in exclude if looks_like_path(p, root, base)]
    if not include:
        # A prose Target ("Only modify files in the test directory (e.g., `tests/`).") names its paths inline.
        include = [p for p in prose if looks_like_path(p, root, base)]
    if not include:
        problems.append(ProgramError("`## Target` lists no backticked file paths or globs", rel, section.start + 1))
    outside = {raw: why for raw in include + exclude if (why := _leaves_repository(root, raw, _resolve(root, base, raw)))}
    for raw, why in outside.items():
        problems.append(ProgramError(f"Target `{raw}` {why}", rel, _line_containing(section, f"`{raw}`")))
    include = [p for p in include if p not in outside]
    resolved_in = [_resolve(root, base, p) for p in include]
    resolved_ex = [_resolve(root, base, p) for p in exclude]
    for pattern, raw in zip(resolved_in, include):
        if not _matches_any(root, pattern):
            line = _line_containing(section, f"`{raw}`")
            problems.append(ProgramError(f"Target `{raw}` matches nothing; fix the path or create the file", rel, line))
    return Target(tuple(resolved_in), tuple(resolved_ex), section.start)


# Extensions that make a backticked word a file name even when no such file exists yet (so a typo is reported).
_FILE_SUFFIXES = frozenset(
    "py pyi ipynb js mjs cjs jsx ts tsx json jsonl yaml yml toml ini cfg conf md rst txt csv tsv c h cc cpp cxx hpp "
    "rs go java kt kts scala rb php pl lua r jl swift m mm cs fs sql sh bash zsh ps1 html htm css scss vue svelte "
    "xml proto graphql tf lock mk cmake gradle dart ex exs erl hs ml zig nim v sv vhd".split()
)
_NOT_PATH_CHARS = frozenset(" \t()=,;:'\"<>{}|+&!%^$#@~")


def looks_like_path(span: str, root: Path, base: Path) -> bool:
    """Returns whether a backticked Target span names a file, folder or glob (not a marker name or code).

    `code/search.py`, `tests/`, `src/**/*.ts`, `Makefile` (when it exists) are paths; `EVOLVE-BLOCK-START`,
    `run_search` and `f(x, y)` are not.
    """
    text = span.strip()
    if not text or any(ch in _NOT_PATH_CHARS for ch in text):
        return False
    if "/" in text or any(ch in text for ch in "*?["):
        return True
    if (root / base / text).exists() or (root / text).exists():
        return True
    stem, dot, suffix = text.rpartition(".")
    return bool(dot and stem and suffix.lower() in _FILE_SUFFIXES)


def _line_containing(section: md.Section, needle: str) -> int:
    for i, line in enumerate(section.text.splitlines()):
        if needle in line:
            return section.start + i + 1
    return section.start + 1


def _target_items(list_token: md.Token, excluding: bool) -> Iterable[tuple[list[str], bool]]:
    for item in list_token.get("children", []):
        own = [c for c in item.get("children", []) if c["type"] != "list"]
        text = " ".join(md.inline_text(c.get("children", [])) for c in own)
        says = _says_do_not_modify(text)
        paths = [c["raw"].strip() for c in own for c in _codespans(c)]
        yield paths, excluding or says
        for sub in item.get("children", []):
            if sub["type"] == "list":
                yield from _target_items(sub, excluding or says)


def _codespans(token: md.Token) -> Iterable[md.Token]:
    if token.get("type") == "codespan":
        yield token
    for child in token.get("children", []) or []:
        yield from _codespans(child)


def _says_do_not_modify(text: str) -> bool:
    lowered = text.lower()
    return "do not modify" in lowered or "don't modify" in lowered or "must not modify" in lowered


def _leaves_repository(root: Path, raw: str, pattern: str) -> str:
    """Returns how a Target path leads outside the repository (`..`, absolute, a symlink out), or ''."""
    pure = PurePosixPath(raw.strip())
    if pure.is_absolute() or Path(raw.strip()).is_absolute():
        return "is an absolute path; write it relative to the program folder or the repository root"
    if ".." in pure.parts:
        return "holds `..`; Target paths stay inside the repository"
    top = root.resolve()
    if any(ch in pattern for ch in "*?["):
        prefix = pattern.split("*")[0].split("?")[0].split("[")[0]
        start = root / prefix.rsplit("/", 1)[0] if "/" in prefix else root
        found = [start, *(p for p in start.rglob("*") if glob_match(pattern, p.relative_to(root).as_posix()))] \
            if start.is_dir() else []
    else:
        found = [root / pattern] if (root / pattern).exists() or (root / pattern).is_symlink() else []
    for path in found:
        real = path.resolve()
        if real != top and top not in real.parents:
            return f"leads outside the repository through a symbolic link ({path.relative_to(root).as_posix()})"
    return ""


def _resolve(root: Path, base: Path, pattern: str) -> str:
    """Returns a repo-relative pattern: relative to the program folder if it matches there, else the root."""
    pattern = pattern.strip().removeprefix("./")
    if pattern.startswith("/"):
        return pattern.lstrip("/")
    local = f"{base.as_posix()}/{pattern}" if str(base) != "." else pattern
    if str(base) == "." or _matches_any(root, local) or not _matches_any(root, pattern):
        return local
    return pattern


def _matches_any(root: Path, pattern: str) -> bool:
    if not any(ch in pattern for ch in "*?["):
        return (root / pattern).exists()
    prefix = pattern.split("*")[0].split("?")[0].split("[")[0]
    start = root / prefix.rsplit("/", 1)[0] if "/" in prefix else root
    if not start.is_dir():
        return False
    for path in start.rglob("*"):
        if path.is_file() and glob_match(pattern, path.relative_to(root).as_posix()):
            return True
    return False


def glob_match(pattern: str, path: str) -> bool:
    """Returns whether a POSIX path matches a glob where `**` spans folders and `*` does not."""
    return re.fullmatch(_glob_regex(pattern), path) is not None


def _glob_regex(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    if pattern.endswith("/"):
        out.append(".*")
    return "".join(out)


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
    return Evaluation(command.strip(), metric_match.group(1).strip(), section.start + 1 + line + 1)


def target_files(target: Target, root: Path) -> list[str]:
    """Returns the existing files under root (repo-relative, sorted) that the Target allows."""
    found: set[str] = set()
    for pattern in target.include:
        if not any(ch in pattern for ch in "*?[") and not pattern.endswith("/"):
            if (root / pattern).is_file() and target.allows(pattern):
                found.add(pattern)
            continue
        prefix = pattern.split("*")[0].split("?")[0].split("[")[0]
        start = root / prefix.rsplit("/", 1)[0] if "/" in prefix else root
        if start.is_dir():
            for path in start.rglob("*"):
                rel = path.relative_to(root).as_posix()
                if path.is_file() and ".git" not in path.parts and target.allows(rel):
                    found.add(rel)
    return sorted(found)
