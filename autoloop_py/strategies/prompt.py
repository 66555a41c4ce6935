"""Prompts: the iteration prompt (everything the model is told for one proposal) and the retry prompt."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from pathlib import PurePosixPath
from typing import Any, Mapping, Sequence

from autoloop_py.program.edits import EditFailure
from autoloop_py.program.model import Program
from autoloop_py.program.regions import evolve_regions
from autoloop_py.render import render
from autoloop_py.state.file import StateFile
from autoloop_py.state.history import prompt_text
from autoloop_py.state.population import Candidate, format_fitness

_LANGUAGES = {
    ".py": "python", ".js": "javascript", ".ts": "typescript", ".rs": "rust", ".go": "go", ".c": "c",
    ".h": "c", ".cpp": "cpp", ".hpp": "cpp", ".java": "java", ".rb": "ruby", ".sh": "bash", ".md": "markdown",
    ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".sql": "sql", ".html": "html",
}
_BACKTICK_RUN = re.compile(r"`+")
_REPLY_HEADING = "\n## How to reply\n"
RECENTLY_DELETED = "Recently deleted lines (do not re-add without a new reason)"
EVALUATOR_FEEDBACK = "Evaluator feedback"


@dataclass(frozen=True)
class PromptContext:
    """What the iteration prompt is rendered from.

    Attributes:
      program: the program being improved.
      files: Target path -> current content.
      best_metric: the best metric so far, or None before any accepted candidate.
      iteration: the number of the iteration being run.
      priorities: what people asked to try first (from the state file).
      lessons: transferable heuristics learned in earlier iterations.
      foreclosed: avenues already shown not to work.
      recent_history: raw markdown of the newest few history entries.
      directives: steering text from people (quoted as data).
      recently_deleted: lines the parent's lineage deleted, each with where and why (quoted as data).
    """

    program: Program
    files: Mapping[str, str]
    best_metric: float | None
    iteration: int
    priorities: tuple[str, ...] = ()
    lessons: tuple[str, ...] = ()
    foreclosed: tuple[str, ...] = ()
    recent_history: tuple[str, ...] = ()
    directives: tuple[str, ...] = ()
    recently_deleted: tuple[str, ...] = ()


@dataclass(frozen=True)
class Steering:
    """What the maintainers tell every proposal, whatever the strategy.

    Attributes:
      priorities: the state file's Current Priorities.
      lessons: its Lessons Learned.
      foreclosed: its Foreclosed Avenues.
      directives: people's steering comments (and a CI fix request) for this iteration.
    """

    priorities: tuple[str, ...] = ()
    lessons: tuple[str, ...] = ()
    foreclosed: tuple[str, ...] = ()
    directives: tuple[str, ...] = ()


def steering_of(state: StateFile, directives: tuple[str, ...] = ()) -> Steering:
    """Returns the steering a state file and this iteration's comments give."""
    return Steering(state.priorities, state.lessons, state.foreclosed, directives)


def steering_blocks(steering: Steering) -> list[DataBlock]:
    """Returns the non-empty steering sections as fenced data, in the order every prompt shows them."""
    sections: Sequence[tuple[str, tuple[str, ...], bool]] = (
        ("Steering from people", steering.directives, False),
        ("Priorities", steering.priorities, True),
        ("Lessons from earlier iterations", steering.lessons, True),
        ("Foreclosed avenues (already shown not to work)", steering.foreclosed, True),
    )
    return [block for title, items, bullets in sections if (block := data_block(title, items, bullets)) is not None]


def data_block(title: str, items: Sequence[str], bullets: bool = True) -> DataBlock | None:
    """Returns the non-blank items as one fenced data block (bulleted, or paragraphs), None when there are none."""
    texts = [item.strip() for item in items if item.strip()]
    if not texts:
        return None
    body = "\n".join(f"- {t}" for t in texts) if bullets else "\n\n".join(texts)
    return DataBlock(title, body + "\n", fence_for(body))


@dataclass(frozen=True)
class FileView:
    """A Target file as the prompt shows it.

    Attributes:
      path: repo-relative path.
      content: the content, ending with a newline.
      fence: a backtick fence longer than any backtick run inside the content.
      language: the fence's info string ('' when unknown).
      evolve: the file has EVOLVE-BLOCK markers, so only the block may change.
    """

    path: str
    content: str
    fence: str
    language: str
    evolve: bool


@dataclass(frozen=True)
class DataBlock:
    """Text from people or earlier iterations, shown fenced so the model reads it as data.

    Attributes:
      title: the section heading.
      body: the items, one bullet each (history entries verbatim).
      fence: a fence that the body cannot close.
    """

    title: str
    body: str
    fence: str


@dataclass(frozen=True, kw_only=True)
class TargetView:
    """What every proposal prompt shows of the program and its Target (the iteration's and the strategies' views).

    Attributes:
      goal: the program's Goal.
      metric: the metric's name, or None for an unconfigured program.
      direction: 'higher' or 'lower'.
      best: the best metric so far as text, or None.
      files: the Target files as they are in the worktree.
      include: the Target patterns (new files may be created where they match).
      exclude: the Do-not-modify patterns.
      data: the non-empty sections of text from people (and, in the iteration prompt, earlier iterations).
      example_path: the path used in the reply example.
    """

    goal: str
    metric: str | None
    direction: str
    best: str | None
    files: tuple[FileView, ...]
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    data: tuple[DataBlock, ...]
    example_path: str

    @property
    def evolve(self) -> bool:
        """Returns whether any Target file has EVOLVE-BLOCK markers."""
        return any(f.evolve for f in self.files)


@dataclass(frozen=True, kw_only=True)
class PromptView(TargetView):
    """The one object the iteration template renders: the context, resolved to display text.

    Attributes:
      strategy: the program's Evolution Strategy notes ('' when absent).
      iteration: the iteration number.
      command: the evaluation command, or None.
      command_fence: a fence the command cannot close.
    """

    strategy: str
    iteration: int
    command: str | None
    command_fence: str


@dataclass(frozen=True, kw_only=True)
class SolutionView(TargetView):
    """What a strategy's solution prompt shows besides its decision (each strategy's view adds its own fields).

    Attributes:
      program: the program's name.
      problem: the playbook's Problem framing ('' when it has none).
      framing: the framing file's text; framing_fence: a fence it cannot close.
      data: the maintainers' steering (comments, Priorities, Lessons, Foreclosed Avenues), fenced as data.
    """

    program: str
    problem: str
    framing: str
    framing_fence: str


def solution_fields(
    program: Program, files: Mapping[str, str], best_metric: float | None, framing: str, steering: Steering,
    problem: str,
) -> dict[str, Any]:
    """Returns the SolutionView fields of a strategy's prompt (the iteration number is not shown: the decision says)."""
    base = prompt_view(PromptContext(program=program, files=files, best_metric=best_metric, iteration=0))
    shared = {field.name: getattr(base, field.name) for field in fields(TargetView)}
    return {
        **shared, "program": program.name, "problem": problem, "framing": with_newline(framing.strip()),
        "framing_fence": fence_for(framing), "data": tuple(steering_blocks(steering)),
    }


@dataclass(frozen=True)
class ProgramView:
    """A program as a strategy's prompt shows it.

    Attributes:
      candidate: the program's entry.
      fitness: its raw fitness as text.
      fence: a fence its code cannot close.
      code: its source ('' when only a reference is stored).
      note: what the strategy says of it (AdaEvolve: its archive status; EvoX: how it compares with its parent).
    """

    candidate: Candidate
    fitness: str
    fence: str
    code: str
    note: str = ""


def program_view(candidate: Candidate, note: str = "") -> ProgramView:
    """Returns a program's display form."""
    code = with_newline(candidate.code or "")
    return ProgramView(candidate, format_fitness(candidate.fitness), fence_for(code), code, note)


def render_iteration_prompt(context: PromptContext) -> str:
    """Returns the full instruction for one proposal."""
    return render("iteration_prompt.md.j2", view=prompt_view(context))


def prompt_view(context: PromptContext) -> PromptView:
    """Returns the display form of a prompt context."""
    program = context.program
    files = tuple(_file_view(path, content) for path, content in sorted(context.files.items()))
    command = program.evaluation.command if program.evaluation else None
    return PromptView(
        goal=program.goal.strip(),
        strategy=program.strategy_text.strip(),
        metric=program.metric,
        direction=program.direction,
        best=None if context.best_metric is None else f"{context.best_metric:.6g}",
        iteration=context.iteration,
        files=files,
        include=program.target.include,
        exclude=program.target.exclude,
        command=command,
        command_fence=fence_for(command or ""),
        data=tuple(_data_blocks(context)),
        example_path=files[0].path if files else "path/to/file.py",
    )


def _file_view(path: str, content: str) -> FileView:
    """Returns how one Target file is shown."""
    shown = content if content.endswith("\n") or not content else content + "\n"
    language = _LANGUAGES.get(PurePosixPath(path).suffix.lower(), "")
    return FileView(path, shown, fence_for(content), language, bool(evolve_regions(content)))


def _data_blocks(context: PromptContext) -> list[DataBlock]:
    """Returns the non-empty data sections in prompt order."""
    steering = Steering(context.priorities, context.lessons, context.foreclosed, context.directives)
    more = (
        data_block(RECENTLY_DELETED, context.recently_deleted),
        data_block("Recent history", context.recent_history, False),
    )
    return [*steering_blocks(steering), *(block for block in more if block is not None)]


def with_feedback_section(prompt: str, items: Sequence[str]) -> str:
    """Returns the prompt with the evaluator feedback items as a fenced data section before `## How to reply`."""
    return with_data_section(prompt, EVALUATOR_FEEDBACK, items, bullets=False)


def with_data_section(prompt: str, title: str, items: Sequence[str], bullets: bool = True) -> str:
    """Returns the prompt with a fenced data section of items (bullets, else paragraphs) before its `## How to reply`.

    Unchanged when there are no items.
    """
    block = data_block(title, items, bullets)
    if block is None:
        return prompt
    return _before_reply(prompt, render("data_section.md.j2", block=block))


def with_instruction(prompt: str, instruction: str) -> str:
    """Returns the prompt with a prompt variant's instruction as a section before its `## How to reply` ('': as is)."""
    return _before_reply(prompt, render("prompt_instruction.md.j2", instruction=instruction)) if instruction else prompt


def _before_reply(prompt: str, section: str) -> str:
    """Returns the prompt with a section inserted before its last `## How to reply` (appended when it has none)."""
    at = prompt.rfind(_REPLY_HEADING)
    if at < 0:
        return prompt.rstrip("\n") + "\n\n" + section
    return prompt[:at] + "\n" + section + prompt[at:]


def fence_for(text: str) -> str:
    """Returns a backtick fence longer than any run of backticks in text (at least three)."""
    longest = max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0)
    return "`" * max(3, longest + 1)


@dataclass(frozen=True)
class RetryView:
    """What the retry prompt tells the model after a reply could not be applied.

    Attributes:
      parse_error: the parse error (with its `^^^ Expected` pointer), or None when the reply parsed.
      applied: the files whose edits were applied and kept ('' when none).
      failures: the failures, nearest lines ending with a newline.
      fence: a fence that none of the quoted text can close.
    """

    parse_error: str | None
    applied: str
    failures: tuple[EditFailure, ...]
    fence: str


def render_retry_prompt(
    failures: Sequence[EditFailure], applied: Sequence[str] = (), parse_error: str | None = None
) -> str:
    """Returns the follow-up message telling the model which edits failed, why, and the nearest real lines."""
    shown = tuple(replace(f, nearest_lines=with_newline(f.nearest_lines)) for f in failures)
    quoted = "\n".join([parse_error or "", *(f.nearest_lines for f in shown)])
    view = RetryView(parse_error, ", ".join(sorted(applied)), shown, fence_for(quoted))
    return render("retry_prompt.md.j2", view=view)


def with_newline(text: str) -> str:
    """Returns text ending with a newline (empty text stays empty)."""
    return text if not text or text.endswith("\n") else text + "\n"


def prompt_context(
    program: Program,
    files: Mapping[str, str],
    state: StateFile,
    best: float | None,
    iteration: int,
    directives: tuple[str, ...] = (),
    recently_deleted: tuple[str, ...] = (),
) -> PromptContext:
    """Returns the default flow's prompt context from the state file's people-written sections."""
    return PromptContext(
        program=program,
        files=files,
        best_metric=best,
        iteration=iteration,
        priorities=state.priorities,
        lessons=state.lessons,
        foreclosed=state.foreclosed,
        recent_history=tuple(prompt_text(entry.text) for entry in state.history[:5]),
        directives=directives,
        recently_deleted=recently_deleted,
    )
