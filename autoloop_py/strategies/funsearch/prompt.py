"""The FunSearch prompt: the specification, the chosen versions as `f_v0 … f_v{k−1}`, the header of `f_vk`, the
maintainers' steering and the reply format."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from autoloop_py.errors import ProgramError
from autoloop_py.program.model import Program
from autoloop_py.render import render
from autoloop_py.strategies.funsearch.code import function_source, version_name, versioned_code
from autoloop_py.strategies.funsearch.config import FunSearchConfig
from autoloop_py.strategies.funsearch.strategy import SAMPLE, FunSearchDecision
from autoloop_py.strategies.prompt import DataBlock, fence_for

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FunSearchPromptView:
    """The one object `funsearch_prompt.md.j2` renders.

    Attributes:
      program: the program's name.
      goal: the Goal text.
      metric: the metric's name (None when unconfigured).
      direction: 'higher' or 'lower'.
      specification: the customised strategy/prompts/skeleton.md; specification_fence: a fence it cannot close.
      function: the evolved function's name.
      new_version: the name of the version to write (f_vk).
      earlier: the names of the versions shown (f_v0 … f_v{k−1}).
      code: the versions and the header of f_vk; code_fence: a fence it cannot close.
      from_target: no chosen version had the function, so the Target's own function is shown as v0.
      path: the Target file the new version goes back into.
      data: the maintainers' steering as fenced data sections, shown before the reply format.
      problem: the playbook's Problem framing ('' when it has none).
    """

    program: str
    goal: str
    metric: str | None
    direction: str
    specification: str
    specification_fence: str
    function: str
    new_version: str
    earlier: tuple[str, ...]
    code: str
    code_fence: str
    from_target: bool
    path: str
    data: tuple[DataBlock, ...] = ()
    problem: str = ""


def render_prompt(
    decision: FunSearchDecision, config: FunSearchConfig, *, program: Program, specification: str, current: str,
    path: str, data: tuple[DataBlock, ...] = (), problem: str = "",
) -> str:
    """Returns the FunSearch prompt for a `sample` decision; current is path's evolved code as it is now."""
    if decision.mode != SAMPLE:
        raise ValueError("a seed decision has no prompt: evaluate the Target as it is")
    name = config.function_to_evolve
    functions, from_target = _functions(decision, name, current, program)
    k = len(functions)
    code = versioned_code(functions, name)
    spec = specification.strip() + "\n" if specification.strip() else ""
    view = FunSearchPromptView(
        program=program.name,
        goal=program.goal.strip(),
        metric=program.metric,
        direction=program.direction,
        specification=spec,
        specification_fence=fence_for(spec),
        function=name,
        new_version=version_name(name, k),
        earlier=tuple(version_name(name, i) for i in range(k)),
        code=code,
        code_fence=fence_for(code),
        from_target=from_target,
        path=path,
        data=data,
        problem=problem,
    )
    return render("funsearch_prompt.md.j2", view=view)


def _functions(decision: FunSearchDecision, name: str, current: str, program: Program) -> tuple[list[str], bool]:
    """Returns the chosen versions' sources (v0 first), else the Target's function alone (and whether it is that)."""
    functions = []
    for pick in decision.picks:
        source = function_source(pick.candidate.code or "", name)
        if source is None:
            logger.warning(
                "candidate %d has no function `%s` in its stored code; left out of the prompt", pick.candidate.id, name
            )
        else:
            functions.append(source)
    if functions:
        return functions, False
    source = function_source(current, name)
    if source is None:
        raise ProgramError(
            f"the Target has no function `{name}`; define it or set `function_to_evolve` in the playbook", program.path
        )
    return [source], True
