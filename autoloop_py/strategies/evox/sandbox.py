"""The EvoX sandbox: check a strategy's source statically, then run it in a limited subprocess.

Strategy code never runs in the runner process. `sample()` and `validate()` start
`evox_worker.py` in its own session with a scrubbed environment, a wall-clock timeout that kills
its process group, and memory/CPU/output limits the worker sets on itself before it installs an
audit hook (no network, processes, signals or file writes) and executes the strategy. The reply is
checked again here, so a strategy cannot hand back a parent that does not exist.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.resources
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator, Sequence

from autoloop_py import tempdirs
from autoloop_py.errors import AutoloopError
from autoloop_py.strategies.evox.contract import Choice, Genome, choice_problem, validation_genomes
from autoloop_py.strategies.evox.worker import ALLOWED_MODULES, CONTRACT_MODULE, is_allowed_module

__all__ = [
    "Genome", "Sample", "SandboxLimits", "StrategyFailure",
    "initial_strategy", "sample", "validate",
]  # fmt: skip

logger = logging.getLogger(__name__)

WORKER = Path(__file__).with_name("worker.py")
INITIAL_STRATEGY = "templates/strategies/evox/initial_strategy.py"
OUTPUT_CAP = 4 << 20
DETERMINISM_DRAWS = 5
# Only what the interpreter itself may need to start; nothing a strategy could use.
PASSED_ENV = ("PATH", "LANG", "LD_LIBRARY_PATH", "SYSTEMROOT", "TMPDIR")
FORBIDDEN_NAMES = frozenset({
    "__import__", "eval", "exec", "compile", "open", "globals", "locals", "vars", "breakpoint",
    "input", "exit", "quit", "help", "memoryview",
})  # fmt: skip
ATTRIBUTE_CALLS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
# Frame and code introspection reaches the worker's globals and real builtins.
INTROSPECTION_ATTRS = frozenset({
    "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "gi_frame", "gi_code", "cr_frame",
    "cr_code", "ag_frame", "ag_code", "tb_frame", "tb_next", "co_code", "co_consts",
})  # fmt: skip
OWN_OBJECTS = frozenset({"self", "cls"})
KINDS = ("imports", "syntax", "contract", "timeout", "memory", "crash", "invalid-sample", "mutated")


@dataclass(frozen=True)
class SandboxLimits:
    """How much a strategy run may use.

    Attributes:
      seconds: wall-clock time for the whole worker process, start-up included.
      memory_mb: address-space limit of the worker (RLIMIT_AS), in MiB.
      cpu_seconds: CPU-time limit of the worker (RLIMIT_CPU).
    """

    seconds: float = 10.0
    memory_mb: int = 512
    cpu_seconds: int = 10


@dataclass(frozen=True)
class Sample:
    """The runner-checked choice of one `sample()` call.

    Attributes:
      parent_id: the candidate to change next (one of the genomes passed in).
      label: "", "diverge" or "refine".
      context_ids: other candidates to show as context (distinct, never the parent).
    """

    parent_id: int
    label: str
    context_ids: tuple[int, ...]


class StrategyFailure(AutoloopError):
    """A strategy was rejected or failed while running; `kind` names how (see KINDS)."""

    def __init__(self, kind: str, message: str, line: int | None = None) -> None:
        self.kind = kind
        super().__init__(message, line=line)


@dataclass(frozen=True)
class _Problem:
    """One static problem of a strategy source.

    Attributes:
      kind: "syntax", "imports" or "contract".
      line: 1-based line in the source.
      text: what is wrong and what to do instead.
    """

    kind: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.text}"


def initial_strategy() -> str:
    """Returns the source of the initial EvoX strategy shipped with autoloop."""
    return (importlib.resources.files("autoloop_py") / INITIAL_STRATEGY).read_text(encoding="utf-8")


def sample(
    code: str, genomes: Sequence[Genome], seed: int, num_context: int, limits: SandboxLimits = SandboxLimits()
) -> Sample:
    """Replays genomes into the strategy in a sandbox and returns its checked choice; raises StrategyFailure."""
    if not genomes:
        raise ValueError("EvoX sample() needs at least one genome; run a from-scratch iteration instead")
    _raise_static(code)
    reply = _run_worker(_sample_request(code, genomes, seed, num_context, draws=1), limits)
    choice = _checked_choices(reply, [g.id for g in genomes], num_context)[0]
    (label, parent_id), = choice[0]
    context = tuple(i for _, group in choice[1] for i in group if i != parent_id)
    return Sample(parent_id=parent_id, label=label, context_ids=context)


def validate(code: str, seed: int, limits: SandboxLimits = SandboxLimits()) -> list[str]:
    """Returns why a strategy is unusable, one "kind: reason" per failure ([] when it is valid)."""
    static = _static_problems(code)
    if static:
        return [f"{problem.kind}: {problem}" for problem in static]
    try:
        reply = _run_worker({"mode": "validate", "code": code, "seed": seed, "genomes": [], "num_context": 4}, limits)
        failures = [StrategyFailure(*_problem_fields(item)) for item in _field(reply, "problems", list)]
        return _one_per_kind(failures) or _determinism_problems(code, seed, limits)
    except StrategyFailure as failure:
        return [_describe(failure)]


def _one_per_kind(failures: list[StrategyFailure]) -> list[str]:
    """Returns the first reason of each failure kind, in order (later checks repeat earlier faults)."""
    first: dict[str, StrategyFailure] = {}
    for failure in failures:
        first.setdefault(failure.kind, failure)
    return [_describe(failure) for failure in first.values()]


def _describe(failure: StrategyFailure) -> str:
    return f"{failure.kind}: {failure.message}"


def _problem_fields(item: Any) -> tuple[str, str, int | None]:
    """Returns (kind, message, line) of one problem in a validate reply."""
    if not (isinstance(item, list) and len(item) == 3 and item[0] in KINDS and isinstance(item[1], str)):
        raise StrategyFailure("crash", f"the sandbox worker sent an unreadable problem: {item!r:.200}")
    return item[0], item[1], item[2] if isinstance(item[2], int) else None


def _determinism_problems(code: str, seed: int, limits: SandboxLimits) -> list[str]:
    """Samples the validation genomes in two separate processes with one seed; they must agree."""
    genomes = validation_genomes()
    request = _sample_request(code, genomes, seed, 4, draws=DETERMINISM_DRAWS)
    runs = [_checked_choices(_run_worker(request, limits), [g.id for g in genomes], 4) for _ in range(2)]
    if runs[0] != runs[1]:
        return [
            "invalid-sample: not deterministic: two processes with the same seed sampled differently; "
            "take all randomness from self.rng and never order by id(), hash() or set iteration"
        ]
    return []


def _raise_static(code: str) -> None:
    """Raises StrategyFailure for the first kind of static problem found in code."""
    problems = _static_problems(code)
    if problems:
        raise StrategyFailure(problems[0].kind, "; ".join(map(str, problems)), problems[0].line)


def _sample_request(code: str, genomes: Sequence[Genome], seed: int, num_context: int, draws: int) -> dict[str, Any]:
    return {
        "mode": "sample", "code": code, "seed": seed, "num_context": num_context, "draws": draws,
        "genomes": [_genome_json(genome) for genome in genomes],
    }  # fmt: skip


def _genome_json(genome: Genome) -> dict[str, Any]:
    return {
        "id": genome.id, "code": genome.code, "metrics": dict(genome.metrics), "parent_id": genome.parent_id,
        "iteration": genome.iteration, "label": genome.label, "context_ids": list(genome.context_ids),
    }  # fmt: skip


def _checked_choices(reply: dict[str, Any], known: list[int], num_context: int) -> list[Choice]:
    """Returns the choices of a sample reply after checking them here, in the runner."""
    mutated = _field(reply, "mutated", list)
    if mutated:
        shown = ", ".join(f"#{i}" for i in mutated[:10])
        raise StrategyFailure("mutated", f"the strategy changed the metrics of {shown}; it must never modify scores")
    choices = [_choice(raw) for raw in _field(reply, "samples", list)]
    for choice in choices:
        problem = choice_problem(choice, known, num_context)
        if problem is not None:
            raise StrategyFailure("invalid-sample", f"sample({num_context}): {problem}")
    if not choices:
        raise StrategyFailure("crash", "the sandbox worker sent no sample")
    return choices


def _choice(raw: Any) -> Choice:
    """Returns one choice of a worker reply in typed form; anything malformed is a crash."""
    try:
        parent_raw, context_raw = raw
        parent = [(str(label), _int(i)) for label, i in parent_raw]
        context = [(str(label), [_int(i) for i in ids]) for label, ids in context_raw]
    except (TypeError, ValueError) as err:
        raise StrategyFailure("crash", f"the sandbox worker sent an unreadable sample: {err}") from err
    return parent, context


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not an id")
    return value


def _field(reply: dict[str, Any], name: str, kind: type) -> Any:
    value = reply.get(name)
    if not isinstance(value, kind):
        raise StrategyFailure("crash", f"the sandbox worker's reply has no {name!r}")
    return value


def _static_problems(code: str) -> list[_Problem]:
    """Returns the syntax, import and contract problems of a strategy source, by line."""
    try:
        tree = ast.parse(code, filename="<strategy>")
    except SyntaxError as err:
        return [_Problem("syntax", err.lineno or 1, f"syntax error: {err.msg}")]
    problems = [problem for node in ast.walk(tree) for problem in _node_problems(node)]
    problems.extend(_class_problems(tree))
    return sorted(problems, key=lambda problem: problem.line)


def _node_problems(node: ast.AST) -> Iterator[_Problem]:
    """Yields the problems of one AST node (imports, forbidden names and attributes)."""
    if isinstance(node, ast.Import):
        yield from _import_problems(node, [alias.name for alias in node.names], [])
    elif isinstance(node, ast.ImportFrom):
        names = [alias.name for alias in node.names]
        yield from _import_problems(node, [("." * node.level) + (node.module or "")], names)
    elif isinstance(node, ast.Name):
        yield from _name_problems(node)
    elif isinstance(node, ast.Attribute):
        yield from _attribute_problems(node)
    elif isinstance(node, ast.Call):
        yield from _attribute_call_problems(node)


def _import_problems(node: ast.stmt, modules: list[str], names: list[str]) -> Iterator[_Problem]:
    allowed = ", ".join(ALLOWED_MODULES[1:]) + f" and {CONTRACT_MODULE}"
    for module in modules:
        if not is_allowed_module(module):
            text = f"import of {module!r} is not allowed; strategies may import {allowed}"
            yield _Problem("imports", node.lineno, text)
    for name in names:
        if name.startswith("_"):
            yield _Problem("imports", node.lineno, f"importing the private name {name!r} is not allowed")


def _name_problems(node: ast.Name) -> Iterator[_Problem]:
    if node.id in FORBIDDEN_NAMES:
        yield _Problem("imports", node.lineno, f"`{node.id}` is not allowed in a strategy")
    elif node.id.startswith("__") and node.id.endswith("__") and node.id != "__name__":
        yield _Problem("imports", node.lineno, f"the name `{node.id}` is not allowed in a strategy")


def _attribute_problems(node: ast.Attribute) -> Iterator[_Problem]:
    attr = node.attr
    if attr in INTROSPECTION_ATTRS:
        yield _Problem("imports", node.lineno, f"frame/code introspection (`.{attr}`) is not allowed")
    elif attr.startswith("__") and attr.endswith("__"):
        if not (attr == "__init__" and _is_super_call(node.value)):
            yield _Problem("imports", node.lineno, f"the attribute `.{attr}` is not allowed; only super().__init__ is")
    elif attr.startswith("_") and not _is_own(node.value):
        yield _Problem("imports", node.lineno, f"the private attribute `.{attr}` is only allowed on self or cls")


def _attribute_call_problems(node: ast.Call) -> Iterator[_Problem]:
    """Yields a problem for getattr-like calls whose attribute name is not a public literal."""
    if not (isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_CALLS):
        return
    name = node.args[1] if len(node.args) > 1 else None
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        yield _Problem("imports", node.lineno, f"{node.func.id}() needs a literal attribute name")
    elif name.value.startswith("__"):
        yield _Problem("imports", node.lineno, f"{node.func.id}() on `{name.value}` is not allowed")


def _is_super_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _is_own(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in OWN_OBJECTS) or _is_super_call(node)


def _class_problems(tree: ast.Module) -> list[_Problem]:
    """Returns contract problems: EvolvedStrategy(StrategyBase) must exist, with sample(self, num_context)."""
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "EvolvedStrategy"]
    if not classes:
        return [_Problem("contract", 1, "the module must define `class EvolvedStrategy(StrategyBase)` at top level")]
    cls = classes[-1]
    problems = []
    if not any(_base_name(base) == "StrategyBase" for base in cls.bases):
        problems.append(_Problem("contract", cls.lineno, "EvolvedStrategy must subclass StrategyBase"))
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in ("sample", "add"):
            problems.extend(_method_problems(item))
    return problems


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def _method_problems(method: ast.FunctionDef | ast.AsyncFunctionDef) -> list[_Problem]:
    """Returns contract problems of add()/sample(): plain methods with the right 2nd parameter."""
    params = [arg.arg for arg in method.args.posonlyargs + method.args.args]
    if isinstance(method, ast.AsyncFunctionDef):
        return [_Problem("contract", method.lineno, f"{method.name}() must be a plain method, not async")]
    if method.name == "sample" and (len(params) < 2 or params[1] != "num_context"):
        return [_Problem("contract", method.lineno, "sample must take num_context as its 2nd parameter: "
                         "def sample(self, num_context: int = 4)")]  # fmt: skip
    if method.name == "add" and len(params) < 2:
        return [_Problem("contract", method.lineno, "add must take the genome: def add(self, genome: Genome) -> int")]
    return []


def _run_worker(request: dict[str, Any], limits: SandboxLimits) -> dict[str, Any]:
    """Runs the worker on one request within limits and returns its reply; raises StrategyFailure."""
    memory = {"memory_mb": limits.memory_mb, "cpu_seconds": limits.cpu_seconds, "output_bytes": OUTPUT_CAP}
    payload = json.dumps({**request, "limits": memory}).encode("utf-8")
    with tempdirs.temporary("autoloop-evox-") as workdir, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:  # fmt: skip
        returncode, timed_out = _start_and_wait(payload, Path(workdir), out, err, limits.seconds)
        stdout, stderr = _read(out), _read(err)
    if stderr.strip():
        logger.debug("EvoX strategy stderr:\n%s", stderr[-4000:])
    return _reply(returncode, timed_out, stdout, stderr, limits)


def _start_and_wait(payload: bytes, workdir: Path, out: IO[bytes], err: IO[bytes], seconds: float) -> tuple[int, bool]:
    """Starts the worker in its own session; kills its whole group when it outlives seconds."""
    command = [sys.executable, "-I", "-S", "-B", "-X", "utf8", str(WORKER)]
    env = {name: value for name, value in os.environ.items() if name in PASSED_ENV or name.startswith("LC_")}
    process = subprocess.Popen(
        command, cwd=workdir, env=env, stdin=subprocess.PIPE, stdout=out, stderr=err, start_new_session=True
    )
    try:
        process.communicate(payload, timeout=seconds)
        return process.returncode, False
    except subprocess.TimeoutExpired:
        # Not yet reaped, so its pid (the group id) cannot have been reused.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return process.returncode, True


def _read(stream: IO[bytes]) -> str:
    stream.seek(0)
    return stream.read(OUTPUT_CAP).decode("utf-8", errors="replace")


def _reply(returncode: int, timed_out: bool, stdout: str, stderr: str, limits: SandboxLimits) -> dict[str, Any]:
    """Returns the worker's reply, or raises the failure its exit shows."""
    if timed_out:
        raise StrategyFailure("timeout", f"the strategy did not finish within {limits.seconds:g} s; "
                              "look for a loop that never ends or work that grows too fast")  # fmt: skip
    if returncode == -signal.SIGXCPU:
        raise StrategyFailure("timeout", f"the strategy used more than {limits.cpu_seconds} s of CPU")
    reply = _last_json(stdout)
    if reply is None:
        raise _exit_failure(returncode, stderr, limits)
    if reply.get("ok") is True:
        return reply
    kind = reply.get("kind") if reply.get("kind") in KINDS else "crash"
    line = reply.get("line") if isinstance(reply.get("line"), int) else None
    raise StrategyFailure(str(kind), str(reply.get("message", "the strategy failed")), line)


def _exit_failure(returncode: int, stderr: str, limits: SandboxLimits) -> StrategyFailure:
    """Returns the failure for a worker that exited without a reply."""
    if "MemoryError" in stderr:
        return StrategyFailure("memory", f"the strategy needed more than {limits.memory_mb} MB of memory")
    if returncode == -signal.SIGXFSZ:
        return StrategyFailure("crash", f"the strategy printed more than {OUTPUT_CAP} bytes")
    tail = stderr.strip().splitlines()[-1:] or ["no output"]
    detail = tail[0][:300]
    return StrategyFailure("crash", f"the strategy process exited with status {returncode} and no reply: {detail}")


def _last_json(stdout: str) -> dict[str, Any] | None:
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        reply = json.loads(lines[-1])
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None
