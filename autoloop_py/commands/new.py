"""`autoloop new NAME --strategy S`: scaffold a program folder, optionally adopting a strategy template."""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import yaml
from rich.console import Console

from autoloop_py.commands.common import repo_root, subparser
from autoloop_py.errors import AutoloopError, ProgramError
from autoloop_py.program import names as program_names
from autoloop_py.program.model import PROGRAMS_DIR, UNCONFIGURED_SENTINEL
from autoloop_py.program.playbook import Marker, customize_markers, resolve_markers
from autoloop_py.program.strategy_template import (  # noqa: F401 - re-exported for the commands that adopt templates
    GUIDE,
    PLAYBOOK_TEMPLATE,
    StrategyTemplate,
    copy_plan,
    pointer_block,
    program_files,
)
from autoloop_py.render import render

if TYPE_CHECKING:
    from importlib.abc import Traversable

STRATEGIES_DIR = Path(".autoloop/strategies")
PACKAGE_STRATEGIES = resources.files("autoloop_py") / "templates" / "strategies"
NO_STRATEGY = "none"
TARGET = "solution.py"
NOTE = (
    "<!-- autoloop new: resolve every CUSTOMIZE marker (`autoloop customize {name}`, an --answers file, "
    "or by hand; `autoloop check` lists them). These two lines go once none is left. -->"
)


def add_parser(commands: Any) -> None:
    """Registers `autoloop new`."""
    parser = subparser(
        commands, "new",
        "autoloop new perf_sort --strategy alphaevolve --answers answers.yaml\n"
        "  autoloop new fast_parse --target src/parse.py --answers answers.yaml   # over existing files",
    )
    parser.add_argument("name", help="the program's name (its folder under .autoloop/programs/)")
    parser.add_argument(
        "--strategy",
        default=NO_STRATEGY,
        help=f"{' | '.join(package_strategies())} (autoloop's own), a folder of .autoloop/strategies/, "
        "or `none` (default: plain hill climbing)",
    )
    parser.add_argument(
        "--target", nargs="+", action="extend", metavar="PATH",
        help="existing files the program improves (repository-relative): no stub code/ is written, and the "
        "Evaluation's command and metric become markers to answer",
    )
    parser.add_argument(
        "--answers", type=Path,
        help="a YAML file answering the <CUSTOMIZE…> markers: `label: text` or `file:line: text` "
        "(see docs/configuration.md)",
    )
    parser.set_defaults(handler=cmd_new)


# Runs read program.md from the remote's default branch, so a new program runs once it is pushed.
RESOLVED = ("every <CUSTOMIZE…> marker is resolved; `autoloop check` validates the program, then commit and push "
            "it: `autoloop run` reads it from the remote's default branch")


def cmd_new(args: argparse.Namespace, console: Console) -> int:
    """Writes the program folder and lists the markers still to resolve."""
    root = repo_root(args.repo)
    name = _checked_name(root, args.name)
    template = None if args.strategy == NO_STRATEGY else pick_template(root, args.strategy, (NO_STRATEGY,))
    targets = _checked_targets(root, args.target or [])
    files = finish_program_md(answered(scaffold(name, template, targets), name, args.answers))
    folder = PROGRAMS_DIR / name
    write_files(root / folder, files)
    console.print(f"created {folder}/: {', '.join(files)}", markup=False, highlight=False)
    if report_markers(console, folder, files, RESOLVED, "resolve"):
        console.print(
            f"Resolve them with `autoloop customize {name}` (a model drafts them for review), "
            "with --answers, or by hand; `autoloop check` lists what is left.",
            markup=False,
        )
    return 0


def pick_template(root: Path, name: str, others: tuple[str, ...] = ()) -> StrategyTemplate:
    """Returns the strategy template named; raises AutoloopError listing the templates (and others) when none is."""
    templates = strategy_templates(root)
    if name not in templates:
        choices = ", ".join([*templates, *others])
        raise AutoloopError(f"no strategy template named '{name}'; choose one of: {choices}")
    return templates[name]


def answered(files: Mapping[str, str], name: str, answers: Path | None) -> dict[str, str]:
    """Returns files with `program-name` answered by name and, given an answers file, every marker it answers."""
    files = fill_markers(files, {"program-name": name}, Path("(program name)"))
    return files if answers is None else fill_markers(files, load_answers(answers), answers, strict=True)


def write_files(base: Path, files: Mapping[str, str]) -> None:
    """Writes each file (base-relative path -> text), making its folders."""
    for rel, text in files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text, encoding="utf-8")


def report_markers(console: Console, folder: Path, files: Mapping[str, str], done: str, verb: str) -> list[Marker]:
    """Prints the <CUSTOMIZE…> markers left in the files ("… are left to <verb>:"), or done if none is; returns them."""
    markers = [m for rel, text in files.items() for m in customize_markers(text, folder / rel)]
    left = "1 <CUSTOMIZE…> marker is" if len(markers) == 1 else f"{len(markers)} <CUSTOMIZE…> markers are"
    console.print(f"{left} left to {verb}:" if markers else done, markup=False, highlight=False)
    for marker in markers:
        console.print(f"  {marker.path}:{marker.line}: {marker.preview}", markup=False, highlight=False)
    return markers


def strategy_templates(root: Path) -> dict[str, StrategyTemplate]:
    """Returns the strategy templates by name: the repository's `.autoloop/strategies/*/` over autoloop's own."""
    found: dict[str, StrategyTemplate] = {}
    for base, origin in ((PACKAGE_STRATEGIES, None), (root / STRATEGIES_DIR, STRATEGIES_DIR)):
        for folder in template_folders(base):
            where = "autoloop" if origin is None else str(origin / folder.name)
            found[folder.name] = StrategyTemplate(folder.name, where, markdown_files(folder))
    return found


def template_folders(base: Traversable) -> list[Traversable]:
    """Returns the folders of base that hold a strategy playbook, by name."""
    if not base.is_dir():
        return []
    return sorted((e for e in base.iterdir() if e.is_dir() and (e / PLAYBOOK_TEMPLATE).is_file()), key=lambda e: e.name)


def markdown_files(folder: Traversable) -> dict[str, str]:
    """Returns (folder-relative POSIX path -> text) of the markdown files under a folder, by name.

    Names starting with `_` or `.` are passed over.
    """
    found: dict[str, str] = {}
    for child in sorted(folder.iterdir(), key=lambda e: e.name):
        if child.name.startswith(("_", ".")):
            continue
        if child.is_dir():
            found.update({f"{child.name}/{rel}": text for rel, text in markdown_files(child).items()})
        elif child.name.endswith(".md"):
            found[child.name] = child.read_text(encoding="utf-8")
    return found


def package_strategies() -> list[str]:
    """Returns the names of the strategy templates autoloop ships."""
    return [folder.name for folder in template_folders(PACKAGE_STRATEGIES)]


def scaffold(name: str, template: StrategyTemplate | None, targets: tuple[str, ...] = ()) -> dict[str, str]:
    """Returns the new program's files (program-folder relative) before any marker is answered.

    targets: existing repository files the program improves; then no stub code/ is written.
    """
    files: dict[str, str] = {}
    section = render("scaffold/prose_strategy.md.j2")
    if template is not None:
        files.update(program_files(template))
        section = pointer_block(template, list(files))
    program = render(
        "scaffold/program.md.j2",
        sentinel=UNCONFIGURED_SENTINEL,
        note=NOTE.format(name=name),
        name=name,
        target=TARGET,
        targets=list(targets),
        strategy_section=section,
    )
    code = {} if targets else {
        f"code/{TARGET}": render("scaffold/solution.py.j2", name=name),
        "code/evaluate.py": render("scaffold/evaluate.py.j2", target=TARGET),
    }
    return {"program.md": program, **code, **files}


def fill_markers(
    files: Mapping[str, str], answers: Mapping[str, Any], source: Path, strict: bool = False
) -> dict[str, str]:
    """Returns files with the answered markers replaced; strict refuses answers that match no marker."""
    resolved, unused = resolve_markers(files, answers, source)
    if strict and unused:
        listed = ", ".join(f"`{key}`" for key in unused)
        raise ProgramError(f"{listed} matched no <CUSTOMIZE…> marker; use a marker's text or file:line", source)
    return resolved


def load_answers(path: Path) -> dict[str, Any]:
    """Returns the answers file: a YAML mapping of marker text or `file:line` to replacement text."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise AutoloopError(f"cannot read the answers file: {err.strerror}", path) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ProgramError(f"invalid YAML: {getattr(err, 'problem', None) or err}", path, line) from None
    if not isinstance(data, dict):
        raise ProgramError('must be a mapping such as `program-name: sorter` or `"strategy/x.md:12": text`', path, 1)
    return {str(key): value for key, value in data.items()}


def finish_program_md(files: Mapping[str, str]) -> dict[str, str]:
    """Returns files with program.md's UNCONFIGURED sentinel and note removed once no file holds a marker."""
    if "program.md" not in files or any(customize_markers(text, Path(rel)) for rel, text in files.items()):
        return dict(files)
    kept = [line for line in files["program.md"].splitlines(keepends=True) if not _is_scaffold_line(line)]
    return {**files, "program.md": "".join(kept)}


def _is_scaffold_line(line: str) -> bool:
    stripped = line.strip()
    return stripped == UNCONFIGURED_SENTINEL or stripped.startswith("<!-- autoloop new:")


def _checked_name(root: Path, name: str) -> str:
    problem = program_names.name_problem(name)
    if problem is not None or name.endswith(".md"):
        raise AutoloopError(f"'{name}' is not a usable program name ({problem or 'it ends with .md'}); "
                            "use letters, digits, `_`, `-` and `.`")
    for existing in (root / PROGRAMS_DIR / name, root / PROGRAMS_DIR / f"{name}.md"):
        if existing.exists():
            rel = existing.relative_to(root)
            raise AutoloopError(f"program '{name}' already exists at {rel}; pick another name or remove it first")
    return name


def _checked_targets(root: Path, paths: list[str]) -> tuple[str, ...]:
    """Returns the --target paths repository-relative; each must be an existing file inside the repository."""
    found: list[str] = []
    for given in paths:
        path = Path(given)
        # Repository-relative first, then relative to where the command runs.
        places = [path] if path.is_absolute() else [root / path, Path.cwd() / path]
        resolved = next((p for p in places if p.exists()), places[0])
        try:
            rel = resolved.resolve().relative_to(root.resolve())
        except ValueError:
            raise AutoloopError(f"--target {given}: not inside the repository {root}") from None
        if not resolved.is_file():
            raise AutoloopError(f"--target {given}: no such file in the repository; give existing files")
        found.append(rel.as_posix())
    return tuple(dict.fromkeys(found))
