"""Tests for the EvoX sandbox: the static check, the limited worker process, and the runner-side checks."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from autoloop_py.errors import AutoloopError
from autoloop_py.strategies.evox import sandbox as evox_sandbox
from autoloop_py.strategies.evox.contract import validation_genomes
from autoloop_py.strategies.evox.sandbox import (
    Genome,
    Sample,
    SandboxLimits,
    StrategyFailure,
    initial_strategy,
    sample,
    validate,
)
from autoloop_py.strategies.evox.worker import make_audit_hook, write_refused

FAST = SandboxLimits(seconds=5.0, memory_mb=512, cpu_seconds=5)

def check_source(code: str) -> list[str]:
    """Returns the static problems of a strategy source as "line N: ..." ([] when it passes)."""
    return [str(problem) for problem in evox_sandbox._static_problems(code)]


HEADER = "from autoloop_py.strategies.evox.contract import StrategyBase\n\n\nclass EvolvedStrategy(StrategyBase):\n"


def strategy(body: str, header: str = HEADER) -> str:
    """Returns a strategy module whose class body is body (dedented, then indented once)."""
    return header + textwrap.indent(textwrap.dedent(body), "    ")


def sampling(body: str) -> str:
    """Returns a strategy whose sample() runs body and then defers to StrategyBase.sample."""
    inner = textwrap.indent(textwrap.dedent(body), "    ")
    return strategy("def sample(self, num_context=4):\n" + inner + "    return super().sample(num_context)\n")


def run_unchecked(code: str) -> dict[str, Any]:
    """Runs the worker on code WITHOUT the static check (what a check bypass would reach)."""
    request = evox_sandbox._sample_request(code, validation_genomes(), 1, 4, draws=1)
    return evox_sandbox._run_worker(request, FAST)


def failure_of(code: str, limits: SandboxLimits = FAST) -> StrategyFailure:
    with pytest.raises(StrategyFailure) as caught:
        sample(code, validation_genomes(), 1, 4, limits)
    return caught.value


# --- the static check -------------------------------------------------------------------------


def test_initial_strategy_passes_the_static_check() -> None:
    assert "class EvolvedStrategy(StrategyBase)" in initial_strategy()
    assert check_source(initial_strategy()) == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("import os", "line 1: import of 'os' is not allowed"),
        ("import subprocess", "line 1: import of 'subprocess' is not allowed"),
        ("from socket import socket", "line 1: import of 'socket' is not allowed"),
        ("import importlib.util", "line 1: import of 'importlib.util' is not allowed"),
        ("from autoloop_py import evaluate", "line 1: import of 'autoloop_py' is not allowed"),
        ("from . import helper", "line 1: import of '.' is not allowed"),
        ("from random import _os", "line 1: importing the private name '_os' is not allowed"),
        ("x = __import__('os')", "line 1: `__import__` is not allowed"),
        ("x = ().__class__.__subclasses__()", "line 1: the attribute `.__subclasses__` is not allowed"),
        ("x = open('out.txt', 'w')", "line 1: `open` is not allowed"),
        ("x = eval('1')", "line 1: `eval` is not allowed"),
        ("x = __builtins__", "line 1: the name `__builtins__` is not allowed"),
        ("x = getattr(1, 'real' + '')", "line 1: getattr() needs a literal attribute name"),
        ("x = getattr(1, '__class__')", "line 1: getattr() on `__class__` is not allowed"),
        ("import random\nx = random._os", "line 2: the private attribute `._os` is only allowed on self or cls"),
        ("x = (i for i in ()).gi_frame", "line 1: frame/code introspection (`.gi_frame`) is not allowed"),
    ],
)
def test_static_check_rejects_unsafe_code_naming_the_line(line: str, expected: str) -> None:
    problems = check_source(line + "\n" + initial_strategy())
    assert any(problem.startswith(expected) for problem in problems), problems


def test_static_check_allows_the_stdlib_allow_list_and_own_private_names() -> None:
    code = strategy(
        """\
        def sample(self, num_context=4):
            self._helper()
            return super().sample(num_context)

        def _helper(self):
            return getattr(self, "rng")
        """,
        header="from __future__ import annotations\nimport collections.abc\nimport math, heapq\n"
        "from statistics import mean\n" + HEADER,
    )
    assert check_source(code) == []


def test_static_check_reports_a_syntax_error_with_its_line() -> None:
    assert check_source("x = 1\ndef broken(:\n    pass\n") == ["line 2: syntax error: invalid syntax"]


def test_static_check_requires_the_class() -> None:
    assert check_source("import math\n") == [
        "line 1: the module must define `class EvolvedStrategy(StrategyBase)` at top level"
    ]
    assert check_source("class EvolvedStrategy:\n    pass\n") == ["line 1: EvolvedStrategy must subclass StrategyBase"]


def test_static_check_requires_num_context_as_second_parameter_of_sample() -> None:
    problems = check_source(strategy("def sample(self, n=4):\n    return super().sample(n)\n"))
    assert problems == [
        "line 5: sample must take num_context as its 2nd parameter: def sample(self, num_context: int = 4)"
    ]
    assert check_source(strategy("def add(self):\n    return 0\n")) == [
        "line 5: add must take the genome: def add(self, genome: Genome) -> int"
    ]


def test_static_problems_fail_sample_before_any_process_starts() -> None:
    failure = failure_of("import os\n" + initial_strategy())
    assert failure.kind == "imports" and failure.line == 1
    assert isinstance(failure, AutoloopError)
    assert failure_of("def f(:\n").kind == "syntax"
    assert failure_of("import math\n").kind == "contract"


def test_validate_reports_static_problems_with_their_kind() -> None:
    assert validate("import socket\n" + initial_strategy(), seed=1)[0].startswith(
        "imports: line 1: import of 'socket' is not allowed"
    )


# --- running the initial strategy -------------------------------------------------------------


def test_initial_strategy_validates() -> None:
    assert validate(initial_strategy(), seed=3, limits=FAST) == []


def test_initial_strategy_samples_deterministically_in_the_sandbox() -> None:
    genomes = validation_genomes()
    first = sample(initial_strategy(), genomes, 11, 4, FAST)
    assert first == sample(initial_strategy(), list(reversed(genomes)), 11, 4, FAST)
    assert first.label in ("", "diverge", "refine")
    assert first.parent_id in {g.id for g in genomes}
    assert len(first.context_ids) == 4 and first.parent_id not in first.context_ids


def test_sample_of_a_single_genome() -> None:
    only = [Genome(7, "print(1)", {"score": 0.25, "note": "first"}, None, 0)]
    assert sample(initial_strategy(), only, 1, 4, FAST) == Sample(parent_id=7, label="", context_ids=())


def test_sample_needs_genomes() -> None:
    with pytest.raises(ValueError, match="from-scratch"):
        sample(initial_strategy(), [], 1, 4)


# --- runtime failures are stopped and classified ----------------------------------------------


def test_an_endless_loop_is_stopped_by_the_cpu_limit() -> None:
    # The wall limit is far off so a loaded machine cannot reach it first: the message says which limit stopped it.
    failure = failure_of(sampling("while True:\n    pass\n"), SandboxLimits(seconds=60.0, cpu_seconds=1))
    assert failure.kind == "timeout" and "more than 1 s of CPU" in failure.message


def test_an_endless_loop_is_stopped_by_the_wall_clock() -> None:
    started = time.monotonic()
    failure = failure_of(sampling("while True:\n    pass\n"), SandboxLimits(seconds=1.0, cpu_seconds=30))
    assert failure.kind == "timeout" and "within 1 s" in failure.message
    assert time.monotonic() - started < 3


def test_allocating_4_gb_fails_fast_on_the_memory_limit() -> None:
    started = time.monotonic()
    failure = failure_of(sampling("hoard = bytearray(4 << 30)\n"))
    assert failure.kind == "memory"
    assert validate(sampling("hoard = [0] * (1 << 29)\n"), seed=1, limits=FAST) == [
        "memory: the strategy ran out of memory"
    ]
    assert time.monotonic() - started < 3


def test_a_strategy_that_changes_scores_is_rejected() -> None:
    code = sampling(
        """\
        import dataclasses
        first = self.genomes[1]
        self.genomes[1] = dataclasses.replace(first, metrics={"score": 99.0})
        """
    )
    failure = failure_of(code)
    assert failure.kind == "mutated" and "#1" in failure.message
    assert validate(code, seed=1, limits=FAST) == ["mutated: the metrics of #1 changed; never modify scores"]


def test_a_parent_that_does_not_exist_is_rejected() -> None:
    code = strategy(
        """\
        def sample(self, num_context=4):
            import dataclasses
            return {"": dataclasses.replace(self.genomes[1], id=999)}, {}
        """
    )
    failure = failure_of(code)
    assert failure.kind == "invalid-sample"
    assert failure.message == "sample(4): the parent #999 is not a stored genome"
    assert validate(code, seed=1, limits=FAST) == ["invalid-sample: sample(4): the parent #999 is not a stored genome"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("return {'': self.genomes[1], 'refine': self.genomes[2]}, {}", "exactly one parent, got 2"),
        ("return {'': self.genomes[1]}, {'': [self.genomes[2], self.genomes[2]]}", "the context repeats #2"),
        ("return {'': self.genomes[1]}, {'similar': [self.genomes[2]]}", "context labels must be"),
        ("return {'': self.genomes[1]}, {'': list(self.genomes.values())}", "at most 4"),
        ("return {'': 1}, {}", "the parent must be a Genome record, got int"),
        ("return [self.genomes[1]]", "must return a 2-tuple"),
    ],
)
def test_malformed_samples_are_rejected(body: str, reason: str) -> None:
    failure = failure_of(strategy(f"def sample(self, num_context=4):\n    {body}\n"))
    assert failure.kind == "invalid-sample" and reason in failure.message


def test_a_strategy_depending_on_hash_randomization_fails_validation() -> None:
    code = strategy(
        """\
        def __init__(self, seed=0):
            super().__init__(seed)
            self.calls = 0

        def sample(self, num_context=4):
            self.calls += 1
            ids = sorted(self.genomes)
            return {"": self.genomes[ids[hash(f"draw {self.calls}") % len(ids)]]}, {}
        """
    )
    (problem,) = validate(code, seed=1, limits=FAST)
    assert problem.startswith("invalid-sample: not deterministic: two processes with the same seed")


def test_a_strategy_using_the_global_random_fails_validation() -> None:
    code = strategy(
        "def sample(self, num_context=4):\n    import random\n"
        "    return {'': self.genomes[random.choice(sorted(self.genomes))]}, {}\n"
    )
    (problem,) = validate(code, seed=1, limits=FAST)
    assert problem.startswith("invalid-sample: not deterministic: two fresh instances with the same seed")


def test_a_strategy_that_raises_reports_its_line() -> None:
    failure = failure_of(sampling("raise ValueError('no parent for you')\n"))
    assert (failure.kind, failure.line) == ("crash", 6)
    assert failure.message == "sample(4) raised ValueError: no parent for you (line 6)"


@pytest.mark.parametrize(
    ("body", "kind", "reason"),
    [
        ("def add(self, genome):\n    self.genomes[genome.id] = genome\n", "contract", "returned None"),
        ("def __init__(self, seed=0):\n    self.rng = None\n", "contract", "must call super().__init__(seed)"),
        ("def add(self, genome):\n    return genome.id\n", "contract", "did not store the genome"),
        ("def __init__(self):\n    super().__init__(0)\n", "crash", "EvolvedStrategy(1) raised TypeError"),
    ],
)
def test_validate_names_contract_faults(body: str, kind: str, reason: str) -> None:
    problems = validate(strategy(body), seed=1, limits=FAST)
    assert problems and problems[0].startswith(f"{kind}: ") and reason in problems[0], problems


def test_validate_reports_each_kind_once() -> None:
    problems = validate(sampling("raise KeyError('x')\n"), seed=1, limits=FAST)
    assert problems == ["crash: sample(4) raised KeyError: 'x' (line 6)"]


def test_a_flood_of_output_is_capped() -> None:
    failure = failure_of(sampling("while True:\n    print('x' * 100000)\n"))
    assert failure.kind == "crash" and "File too large" in failure.message


# --- the worker's own guards, with the static check bypassed ----------------------------------


def test_the_worker_refuses_imports_outside_the_allow_list() -> None:
    with pytest.raises(StrategyFailure) as caught:
        run_unchecked(sampling("import os\n"))
    assert caught.value.kind == "imports" and "'os'" in caught.value.message


@pytest.mark.parametrize(
    ("body", "event"),
    [
        (
            "import random\nreal_import = random._os.sys.modules['builtins'].__import__\n"
            "real_import('socket').socket()\n",
            "socket.__new__",
        ),
        ("import random\nrandom._os.system('true')\n", "os.system"),
        (
            "import random\nreal_import = random._os.sys.modules['builtins'].__import__\n"
            "real_import('subprocess').run(['true'])\n",
            "subprocess.Popen",
        ),
        ("import random\nrandom._os.fork()\n", "os.fork"),
        ("import random\nrandom._os.kill(random._os.getpid(), 0)\n", "os.kill"),
        ("import random\nrandom._os.open('{target}', random._os.O_WRONLY | random._os.O_CREAT)\n", "open"),
        ("import random\nrandom._os.sys.modules['builtins'].open('{target}', 'w')\n", "open"),
        ("import random\nrandom._os.remove('{keep}')\n", "os.remove"),
        ("import random\ntry:\n    random._os.system('true')\nexcept Exception:\n    pass\n", "os.system"),
    ],
)
def test_the_worker_refuses_network_processes_and_writes(tmp_path: Path, body: str, event: str) -> None:
    target, keep = tmp_path / "written.txt", tmp_path / "keep.txt"
    keep.write_text("keep")
    code = sampling(body.format(target=target, keep=keep))
    assert check_source(code) != []  # the static check alone would have stopped it
    with pytest.raises(StrategyFailure) as caught:
        run_unchecked(code)
    assert caught.value.kind == "crash"
    assert caught.value.message == f"the strategy tried {event}, which the sandbox does not allow"
    assert not target.exists() and keep.read_text() == "keep"


def test_write_refused_reads_modes_and_flags() -> None:
    import os

    assert write_refused("open", ("f", "w", 0)) and write_refused("open", ("f", "rb+", 0))
    assert write_refused("open", ("f", None, os.O_WRONLY | os.O_CREAT))
    assert not write_refused("open", ("f", "r", 0)) and not write_refused("open", ("f", None, os.O_RDONLY))
    assert not write_refused("import", ("os", None, None, None, None))


def test_audit_hook_records_what_it_refuses() -> None:
    refused: list[str] = []
    hook = make_audit_hook(refused)
    hook("import", ("math",))
    with pytest.raises(PermissionError, match="socket.connect"):
        hook("socket.connect", (None, ("example.org", 80)))
    assert refused == ["socket.connect"]
