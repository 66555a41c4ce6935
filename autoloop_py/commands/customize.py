"""`autoloop customize NAME`: a model resolves the program's `<CUSTOMIZE…>` markers; review the diff, then --write.

litellm is imported only when the model is asked, so the other commands never pay for it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

from rich.console import Console

from autoloop_py.analysis.run_view import unified_diff
from autoloop_py.commands.common import load_named, repo_root, subparser
from autoloop_py.commands.new import RESOLVED, fill_markers, finish_program_md, load_answers, strategy_templates
from autoloop_py.commands.new import write_files
from autoloop_py.errors import AutoloopError
from autoloop_py.loop.iteration.model_use import check_budget, record_spend
from autoloop_py.program.model import Program
from autoloop_py.program.models import ModelSpec
from autoloop_py.program.playbook import customize_markers, file_named, find_playbook
from autoloop_py.proposers.base import Usage
from autoloop_py.proposers.llm import MOCK_ENV, MODEL_ENV, resolve_model, usage_of
from autoloop_py.proposers.llm_call import CallLimits, ModelCallError, limits_for
from autoloop_py.proposers.model_calls import InProcess
from autoloop_py.render import render

MAX_CONTEXT_CHARS = 20_000
ATTEMPTS = 2
_FENCE_RE = re.compile(r"```(?:json)?\s*\n(.*?)\n```", re.DOTALL)


def add_parser(commands: Any) -> None:
    """Registers `autoloop customize`."""
    parser = subparser(
        commands, "customize",
        "autoloop customize perf_sort --answers answers.yaml\n  autoloop customize perf_sort --model gpt-4o --write",
    )
    parser.add_argument("program", help="the program's name")
    parser.add_argument(
        "--answers", type=Path,
        help="a YAML file answering the markers (`label: text` or `file:line: text`, see docs/configuration.md); "
        "written at once",
    )
    parser.add_argument("--model", help=f"litellm model (else `model:` in program.md, else {MODEL_ENV})")
    parser.add_argument("--write", action="store_true", help="write the resolved files (default: only show the diff)")
    parser.set_defaults(handler=cmd_customize)


def cmd_customize(args: argparse.Namespace, console: Console) -> int:
    """Shows the model's resolution of every marker as a diff; writes it with --write."""
    root = repo_root(args.repo)
    program = load_named(root, args.program, with_issues=False)
    folder = program.base_dir
    files = marker_files(root, folder)
    if not files:
        console.print(f"nothing to customize: {folder} has no <CUSTOMIZE…> markers", markup=False)
        return 0
    if args.answers is not None:
        return _from_answers(root, program, files, args.answers, console)
    model = args.model or resolve_model(program, None)
    if not model:
        raise AutoloopError(f"no model configured: pass --model, set `model:` in {program.path} or {MODEL_ENV}")
    prompt = render(
        "customize_prompt.md.j2", name=program.name, guide=_guide(root, program),
        context=_context(root, folder, files), files=files,
    )
    check_budget(root, program, "customize")
    spent: list[Usage] = []
    try:
        proposed = _ask(model, prompt, files, limits_for(program.config.llm_timeout, program.config.llm_retries), spent)
    finally:  # a reply that could not be used was paid for too
        record_spend(root, program, spent, "customize")
    current, changed = _changed(root, folder, files, proposed)
    for rel, text in changed.items():
        path = (folder / rel).as_posix()
        console.out(unified_diff(current[rel], text, 3, (f"a/{path}", f"b/{path}")), end="", highlight=False)
    if args.write:
        write_files(root / folder, changed)
        console.print(f"wrote {len(changed)} files; `autoloop check` validates the program", markup=False)
    else:
        console.print("nothing written: review the diff, then run again with --write to apply it", markup=False)
    return 0


def _from_answers(root: Path, program: Program, files: Mapping[str, str], answers: Path, console: Console) -> int:
    """Writes the files with the answered markers replaced (every answer must match a marker) and lists what is left."""
    folder = program.base_dir
    resolved = fill_markers(files, load_answers(answers), answers, strict=True)
    _, changed = _changed(root, folder, files, resolved)
    write_files(root / folder, changed)
    left = [m for rel, text in changed.items() for m in customize_markers(text, folder / rel)]
    left += [m for rel, text in files.items() if rel not in changed for m in customize_markers(text, folder / rel)]
    console.print(f"wrote {len(changed)} files from {answers}", markup=False, highlight=False)
    for marker in left:
        console.print(
            f"  still to resolve: {marker.path}:{marker.line}: {marker.preview}", markup=False, highlight=False
        )
    if not left:
        console.print(RESOLVED, markup=False)
    return 0


def _changed(
    root: Path, folder: Path, files: Mapping[str, str], resolved: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Returns the files as they are (program.md too) and, finished, those the resolved texts change."""
    current = {"program.md": (root / folder / "program.md").read_text(encoding="utf-8"), **files}
    finished = finish_program_md({**current, **resolved})
    return current, {rel: text for rel, text in finished.items() if current[rel] != text}


def marker_files(root: Path, folder: Path) -> dict[str, str]:
    """Returns program.md and the strategy/ markdown files that hold markers, program-folder relative."""
    candidates = [root / folder / "program.md", *sorted((root / folder / "strategy").rglob("*.md"))]
    texts = {path: path.read_text(encoding="utf-8") for path in candidates if path.is_file()}
    return {path.relative_to(root / folder).as_posix(): text for path, text in texts.items()
            if customize_markers(text, path)}


def parse_customization(reply: str, files: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Returns the new content per file of a model's JSON reply, and what is wrong with the reply."""
    data = _json_object(reply)
    if not isinstance(data, dict):
        return {}, ["the reply is not one JSON object mapping file paths to their full new content"]
    proposed: dict[str, str] = {}
    problems: list[str] = []
    for key, value in data.items():
        rel = file_named(str(key).strip().removeprefix("./"), files)
        if rel is None or not isinstance(value, str):
            why = "is not one of the files to rewrite" if rel is None else "has no text as its value"
            problems.append(f"`{key}` {why}")
            continue
        # Models often drop the final newline; keep the file's own ending.
        proposed[rel] = value + "\n" if files[rel].endswith("\n") and not value.endswith("\n") else value
    for rel in files:
        left = customize_markers(proposed.get(rel, files[rel]), Path(rel))
        problems.extend(f"{m.path}:{m.line} still has {m.preview}" for m in left)
    return proposed, problems


def _json_object(reply: str) -> Any:
    """Returns the JSON value of a reply: the whole text, a fenced block, or the outermost braces."""
    candidates = [reply.strip(), *_FENCE_RE.findall(reply)]
    if "{" in reply and "}" in reply:
        candidates.append(reply[reply.index("{") : reply.rindex("}") + 1])
    for text in candidates:
        try:
            return json.loads(text)
        except ValueError:
            continue
    return None


def _ask(
    model: str, prompt: str, files: Mapping[str, str], limits: CallLimits, spent: list[Usage] | None = None
) -> dict[str, str]:
    """Returns the model's resolved files, asking once more with the problems shown when a reply is unusable.

    spent: gets each reply's usage appended.
    """
    messages = [{"role": "user", "content": prompt}]
    problems: list[str] = []
    for _ in range(ATTEMPTS):
        reply = _complete(model, messages, limits, spent)
        proposed, problems = parse_customization(reply, files)
        if not problems:
            return proposed
        messages += [
            {"role": "assistant", "content": reply},
            {"role": "user", "content": render("customize_retry.md.j2", problems=problems, files=files)},
        ]
    shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
    raise AutoloopError(f"{model}'s reply could not be used ({shown}); run again or resolve the markers by hand")


def _complete(
    model: str, messages: list[dict[str, str]], limits: CallLimits, spent: list[Usage] | None = None
) -> str:
    """Sends the messages to the model via litellm (within llm-timeout and llm-retries); returns the reply's text."""
    kwargs: dict[str, Any] = {"model": model, "messages": list(messages)}
    if os.environ.get(MOCK_ENV) is not None:
        kwargs["mock_response"] = os.environ[MOCK_ENV]
    try:
        reply = InProcess().completion(kwargs, limits)
    except ModelCallError as err:
        raise AutoloopError(f"{model}: {err}") from None
    if spent is not None:
        spent.append(usage_of(reply, ModelSpec(model)))
    return reply.content


def _guide(root: Path, program: Program) -> str:
    """Returns the CUSTOMIZE.md of the strategy the program points to ('' without one)."""
    playbook = find_playbook(program, root)
    template = strategy_templates(root).get(playbook.name) if playbook is not None else None
    return template.guide if template is not None else ""


def _context(root: Path, folder: Path, files: Mapping[str, str]) -> dict[str, str]:
    """Returns program.md (unless it is to be rewritten) and the code/ files, each cut to a size a prompt can carry."""
    paths = [root / folder / "program.md", *sorted((root / folder / "code").rglob("*"))]
    context: dict[str, str] = {}
    for path in paths:
        rel = path.relative_to(root / folder).as_posix()
        if rel in files or not path.is_file() or "__pycache__" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        context[rel] = text if len(text) <= MAX_CONTEXT_CHARS else text[:MAX_CONTEXT_CHARS] + "\n… (cut)\n"
    return context
