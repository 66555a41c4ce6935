"""The EvoX sandbox worker: runs one strategy request in this (separate, limited) process.

Started by evox_sandbox as `python -I -S -B evox_worker.py`. Reads one JSON request on stdin:
{code, genomes, seed, num_context, mode: "sample"|"validate", draws, limits}; sets resource
limits, installs an audit hook refusing network, process creation, signals and file writes, then
executes the strategy from the given source and writes one JSON reply on the original stdout.
Uses the standard library only (plus the contract module), since site-packages is not loaded.
"""

from __future__ import annotations

import builtins
import functools
import json
import math
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

if __name__ == "__main__":  # run by path: make the package importable without site-packages
    sys.path.append(str(Path(__file__).resolve().parents[3]))  # after the stdlib, so nothing shadows it

from autoloop_py.strategies.evox.contract import (  # noqa: E402
    Choice,
    Genome,
    StrategyBase,
    choice_problem,
    validation_genomes,
)

CONTRACT_MODULE = "autoloop_py.strategies.evox.contract"
ALLOWED_MODULES = (
    "__future__", "random", "math", "statistics", "collections", "heapq", "itertools", "functools",
    "bisect", "dataclasses", "typing", "operator", "re", "json", "hashlib", "copy", "enum", "abc",
    "fractions", "decimal", "string", "textwrap", "difflib",
)  # fmt: skip
STRATEGY_FILENAME = "<strategy>"
TOLERANCE = 1e-10
REMOVED_BUILTINS = ("open", "eval", "exec", "compile", "globals", "locals", "vars", "breakpoint", "input",
                    "exit", "quit", "help")  # fmt: skip
REFUSED_EVENTS = (
    "socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
    "os.forkpty", "os.startfile", "os.kill", "os.killpg", "os.remove", "os.rename", "os.rmdir",
    "os.mkdir", "os.chmod", "os.chown", "os.lchown", "os.truncate", "os.symlink", "os.link",
    "os.utime", "os.putenv", "os.unsetenv", "os.chdir", "os.chflags", "shutil.", "ctypes.",
    "resource.setrlimit", "resource.prlimit", "signal.pthread_kill", "sqlite3.", "pty.spawn",
    "webbrowser.", "urllib.", "ftplib.", "smtplib.", "http.",
)  # fmt: skip
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class Refused(PermissionError):
    """An operation the sandbox does not allow."""


class Failure(Exception):
    """A strategy failure of a given kind, reported back to the runner."""

    def __init__(self, kind: str, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.line = line


def is_allowed_module(name: str) -> bool:
    """Returns whether a strategy may import the module with this (absolute) name."""
    if name == CONTRACT_MODULE:
        return True
    return any(name == allowed or name.startswith(allowed + ".") for allowed in ALLOWED_MODULES)


def write_refused(event: str, args: tuple[Any, ...]) -> bool:
    """Returns whether an audit event is a file write (an `open` for writing, by mode or flags)."""
    if event != "open" or len(args) < 3:
        return False
    mode, flags = args[1], args[2]
    if isinstance(mode, str):
        return any(char in mode for char in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def make_audit_hook(refused: list[str]) -> Callable[[str, tuple[Any, ...]], None]:
    """Returns an audit hook that records and refuses network, processes, signals and file writes."""

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event.startswith(REFUSED_EVENTS) or write_refused(event, args):
            refused.append(event)
            raise Refused(f"the EvoX sandbox does not allow {event}")

    return hook


def limit_resources(memory_mb: int, cpu_seconds: int, output_bytes: int) -> None:
    """Caps address space, CPU time and file size (stdout/stderr are files) for this process."""
    try:
        import resource
    except ImportError:  # not POSIX: only the runner's wall-clock timeout applies
        return
    memory = memory_mb * 1024 * 1024
    wanted = [
        (resource.RLIMIT_AS, memory, memory),
        (resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1),
        (resource.RLIMIT_FSIZE, output_bytes, output_bytes),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    for limit, soft, hard in wanted:
        try:
            resource.setrlimit(limit, (soft, hard))
        except (ValueError, OSError) as err:  # e.g. macOS refuses some RLIMIT_AS values
            print(f"evox worker: could not set resource limit {limit}: {err}", file=sys.stderr)


def load_strategy(code: str) -> type[StrategyBase]:
    """Executes the strategy source with guarded builtins and returns its EvolvedStrategy class."""
    namespace: dict[str, Any] = {"__builtins__": _guarded_builtins(), "__name__": "evolved_strategy"}
    try:
        exec(compile(code, STRATEGY_FILENAME, "exec"), namespace)
    except SyntaxError as err:
        raise Failure("syntax", f"{err.msg}", err.lineno) from err
    except MemoryError:
        raise
    except Exception as err:
        raise _crash("loading the module", err) from err
    cls = namespace.get("EvolvedStrategy")
    if not (isinstance(cls, type) and issubclass(cls, StrategyBase)):
        raise Failure("contract", "the module must define `class EvolvedStrategy(StrategyBase)`")
    return cls


def _guarded_builtins() -> dict[str, Any]:
    """Returns builtins without code execution and file access, and with an allow-listed __import__."""
    guarded = {name: value for name, value in vars(builtins).items() if name not in REMOVED_BUILTINS}
    real_import = builtins.__import__

    def guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
                       ) -> Any:  # fmt: skip
        if level != 0 or not is_allowed_module(name):
            raise Failure("imports", f"import of {name!r} is not allowed in a strategy")
        private = [item for item in fromlist or () if str(item).startswith("_")]
        if private:
            raise Failure("imports", f"importing private names ({', '.join(private)}) from {name!r} is not allowed")
        return real_import(name, globals, locals, fromlist, level)

    guarded["__import__"] = guarded_import
    return guarded


def _strategy_line(err: BaseException) -> int | None:
    """Returns the line of the strategy source where err was raised, if it was raised there."""
    frames = traceback.extract_tb(err.__traceback__)
    lines = [frame.lineno for frame in frames if frame.filename == STRATEGY_FILENAME]
    return lines[-1] if lines else None


def _crash(doing: str, err: BaseException) -> Failure:
    """Returns the crash failure for an exception raised by strategy code."""
    if isinstance(err, Failure):
        return err
    line = _strategy_line(err)
    where = f" (line {line})" if line is not None else ""
    return Failure("crash", f"{doing} raised {type(err).__name__}: {err}{where}", line)


def make_genomes(raw: Iterable[dict[str, Any]]) -> list[Genome]:
    """Returns read-only records for the JSON genomes, in replay order (iteration, then id)."""
    genomes = [
        Genome(
            id=int(item["id"]),
            code=str(item["code"]),
            metrics=dict(item["metrics"]),
            parent_id=item.get("parent_id"),
            iteration=int(item["iteration"]),
            label=str(item.get("label", "")),
            context_ids=tuple(item.get("context_ids", ())),
        )
        for item in raw
    ]
    return sorted(genomes, key=lambda g: (g.iteration, g.id))


def call(doing: str, function: Callable[..., Any], *args: Any) -> Any:
    """Calls strategy code, turning its exceptions into failures (MemoryError stays a MemoryError)."""
    try:
        return function(*args)
    except (MemoryError, Failure):
        raise
    except RecursionError as err:
        raise Failure("crash", f"{doing} recursed too deeply", _strategy_line(err)) from err
    except Exception as err:
        raise _crash(doing, err) from err


def new_strategy(cls: type[StrategyBase], seed: int) -> StrategyBase:
    """Returns a fresh strategy instance seeded with seed."""
    strategy = call(f"EvolvedStrategy({seed})", cls, seed)
    if not isinstance(getattr(strategy, "genomes", None), dict):
        raise Failure("contract", "EvolvedStrategy.__init__ must call super().__init__(seed) (self.genomes is missing)")
    return strategy


def replay(strategy: StrategyBase, genomes: Iterable[Genome]) -> None:
    """Adds genomes in replay order, checking that add() returns each genome's id."""
    for genome in genomes:
        returned = call(f"add(genome #{genome.id})", strategy.add, genome)
        if returned != genome.id:
            raise Failure("contract", f"add(genome #{genome.id}) returned {returned!r}; it must return genome.id")


def draw(strategy: StrategyBase, num_context: int) -> tuple[tuple[Any, Any], Choice]:
    """Calls sample(num_context) once; returns what it returned and the choice as label/id pairs."""
    result = call(f"sample({num_context})", strategy.sample, num_context)
    if not (isinstance(result, tuple) and len(result) == 2):
        got = type(result).__name__
        raise Failure("invalid-sample", f"sample() must return a 2-tuple (parent, context), got {got}")
    parent, context = result
    if not isinstance(parent, dict) or not isinstance(context, dict):
        raise Failure("invalid-sample", "sample() must return two dicts: {label: genome} and {label: [genomes]}")
    choice: Choice = (
        [(_label(key), _record_id(value, "parent")) for key, value in parent.items()],
        [(_label(key), _record_ids(value)) for key, value in context.items()],
    )
    return (parent, context), choice


def _label(key: Any) -> str:
    if not isinstance(key, str):
        raise Failure("invalid-sample", f"labels must be strings, got {key!r}")
    return key


def _record_id(value: Any, role: str) -> int:
    if not isinstance(value, Genome):
        raise Failure("invalid-sample", f"the {role} must be a Genome record, got {type(value).__name__}")
    if not isinstance(value.id, int) or isinstance(value.id, bool):
        raise Failure("invalid-sample", f"the {role} has id {value.id!r}; ids are integers")
    return value.id


def _record_ids(value: Any) -> list[int]:
    if not isinstance(value, (list, tuple)):
        raise Failure("invalid-sample", f"context values must be lists of genomes, got {type(value).__name__}")
    return [_record_id(item, "context entry") for item in value]


def same_metric(a: Any, b: Any) -> bool:
    """Returns whether two metric values are equal (numbers within 1e-10; NaN equals NaN)."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= TOLERANCE
    return type(a) is type(b) and a == b


def mutated_ids(original: dict[int, dict[str, Any]], seen: Iterable[Genome]) -> list[int]:
    """Returns the ids of records whose metrics differ from the originals sent by the runner."""
    changed: set[int] = set()
    for genome in seen:
        before = original.get(genome.id)
        if before is None:
            continue
        try:
            after = dict(genome.metrics)
        except Exception:
            changed.add(genome.id)
            continue
        if after.keys() != before.keys() or not all(same_metric(before[k], after[k]) for k in before):
            changed.add(genome.id)
    return sorted(changed)


def records_seen(strategy: StrategyBase, genomes: list[Genome], samples: list[tuple[Any, Any]]) -> list[Genome]:
    """Returns every record the strategy could have changed: the originals, its store and its returns."""
    stored = [g for g in getattr(strategy, "genomes", {}).values() if isinstance(g, Genome)]
    returned = [g for parent, context in samples for g in _flatten(parent, context)]
    return genomes + stored + returned


def _flatten(parent: Any, context: Any) -> list[Genome]:
    found = list(parent.values()) if isinstance(parent, dict) else []
    for value in context.values() if isinstance(context, dict) else []:
        found.extend(value if isinstance(value, (list, tuple)) else [])
    return [g for g in found if isinstance(g, Genome)]


def run_sample(request: dict[str, Any]) -> dict[str, Any]:
    """Replays the genomes into a fresh strategy and draws `draws` samples."""
    cls = load_strategy(request["code"])
    genomes = make_genomes(request["genomes"])
    original = {g.id: dict(g.metrics) for g in genomes}
    strategy = new_strategy(cls, int(request["seed"]))
    replay(strategy, genomes)
    returned, choices = [], []
    for _ in range(int(request.get("draws", 1))):
        result, choice = draw(strategy, int(request["num_context"]))
        returned.append(result)
        choices.append(choice)
    mutated = mutated_ids(original, records_seen(strategy, genomes, returned))
    return {"ok": True, "samples": choices, "mutated": mutated}


def run_validate(request: dict[str, Any]) -> dict[str, Any]:
    """Runs every functional contract check on fresh instances; replies with the problems found."""
    cls = load_strategy(request["code"])
    seed = int(request["seed"])
    problems: list[list[Any]] = []
    # Between them: all genomes (failed ones too) sampled five times, a population of five sampled three times.
    checks = (check_add_and_sample, functools.partial(check_replayed, count=None, times=5),
              functools.partial(check_replayed, count=5, times=3), check_same_seed)
    for check in checks:
        try:
            check(cls, seed)
        except Failure as failure:
            problems.append([failure.kind, failure.message, failure.line])
    return {"ok": True, "problems": problems}


def check_add_and_sample(cls: type[StrategyBase], seed: int) -> None:
    """Adds one genome (id returned, stored, metrics intact), ten more, then samples 4 ten times."""
    first, *more = validation_genomes()[:11]
    strategy = new_strategy(cls, seed)
    replay(strategy, [first])
    if first.id not in strategy.genomes:
        raise Failure("contract", f"add(genome #{first.id}) did not store the genome in self.genomes")
    expect_intact(strategy, [first], [])
    replay(strategy, more)
    if len(strategy.genomes) < 10:
        raise Failure("contract", f"after adding 11 genomes only {len(strategy.genomes)} are stored; keep at least 10")
    expect_samples(strategy, [first, *more], num_context=4, times=10)


def check_replayed(cls: type[StrategyBase], seed: int, count: int | None, times: int) -> None:
    """Replays the first `count` validation genomes (None: all, failed ones without a numeric score among them) into
    a fresh instance, then samples 3 `times` times."""
    strategy = new_strategy(cls, seed)
    genomes = validation_genomes()[:count]
    replay(strategy, genomes)
    expect_samples(strategy, genomes, num_context=3, times=times)


def check_same_seed(cls: type[StrategyBase], seed: int) -> None:
    """Checks that two fresh instances with the same seed make the same five choices."""
    runs = []
    for _ in range(2):
        strategy = new_strategy(cls, seed)
        replay(strategy, validation_genomes())
        runs.append([draw(strategy, 4)[1] for _ in range(5)])
    if runs[0] != runs[1]:
        raise Failure(
            "invalid-sample",
            "not deterministic: two fresh instances with the same seed sampled differently; "
            "take all randomness from self.rng and never order by id() or hash()",
        )


def expect_samples(strategy: StrategyBase, genomes: list[Genome], num_context: int, times: int) -> None:
    """Samples `times` times, checking each choice and that no metrics changed."""
    known = [g.id for g in genomes]
    returned = []
    for _ in range(times):
        result, choice = draw(strategy, num_context)
        returned.append(result)
        problem = choice_problem(choice, known, num_context)
        if problem is not None:
            raise Failure("invalid-sample", f"sample({num_context}): {problem}")
    expect_intact(strategy, genomes, returned)


def expect_intact(strategy: StrategyBase, genomes: list[Genome], returned: list[tuple[Any, Any]]) -> None:
    """Raises a "mutated" failure when any record's metrics changed."""
    pristine = {g.id: dict(g.metrics) for g in validation_genomes()}
    original = {g.id: pristine[g.id] for g in genomes}
    mutated = mutated_ids(original, records_seen(strategy, genomes, returned))
    if mutated:
        raise Failure("mutated", f"the metrics of {', '.join(f'#{i}' for i in mutated)} changed; never modify scores")


def handle(request: dict[str, Any], refused: list[str]) -> dict[str, Any]:
    """Runs one request and returns the reply (a failure reply for strategy faults)."""
    try:
        reply = run_validate(request) if request.get("mode") == "validate" else run_sample(request)
    except MemoryError:
        return {"ok": False, "kind": "memory", "message": "the strategy ran out of memory", "line": None}
    except Failure as failure:
        reply = {"ok": False, "kind": failure.kind, "message": failure.message, "line": failure.line}
    if refused:
        message = f"the strategy tried {', '.join(sorted(set(refused)))}, which the sandbox does not allow"
        return {"ok": False, "kind": "crash", "message": message, "line": None}
    return reply


def main() -> int:
    """Reads the request, limits and guards this process, runs the request and writes the reply."""
    request = json.loads(sys.stdin.read())
    limits = request.get("limits", {})
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # whatever the strategy prints goes to stderr, not into the reply
    sys.stdout = sys.stderr
    limit_resources(int(limits.get("memory_mb", 512)), int(limits.get("cpu_seconds", 10)),
                    int(limits.get("output_bytes", 4 << 20)))  # fmt: skip
    refused: list[str] = []
    sys.addaudithook(make_audit_hook(refused))
    reply = handle(request, refused)
    os.write(reply_fd, (json.dumps(reply) + "\n").encode("utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
