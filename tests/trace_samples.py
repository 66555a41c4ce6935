"""A hand-built run with known diagnostics, shared by the trace, analysis and analyze tests.

Lineage A → B → C → D (iterations 0..3) and a sibling branch A → E → F (iterations 1, 2):
- B drops `# step size 0.5`, `rate = 0.10`, `value = helper(x)`; adds `rate = 0.25`, `value = fallback(x)`.
- C turns `rate = 0.25` into `rate = 0.5`: a number-only re-add of B's `rate = 0.10` (tuning, span 1).
- D re-adds `value = helper(x)` (literal, span 2), `# step size 0.75` (a comment re-add: trivial, span 2)
  and `cache = memo(x)`, which only the sibling F deleted (run-wide literal, span 1; not in D's lineage).
- Scores (higher is better): A 1, B 2, E 1.5 (rejected), C 3, F failed, D 4: the final best is D.

Also small runs that EvoReplay's own classifier was run on (ONE_EDIT … CPP), which write_evotrace writes as
another framework's EvoTrace directory.
"""

from __future__ import annotations

import json
from pathlib import Path

from autoloop_py.analysis import Node
from autoloop_py.state import trace
from autoloop_py.state.trace import TraceRow, sha256_text

A = "import math\n# step size 0.5\nrate = 0.10\nvalue = helper(x)\nresult = value * rate\n"
B = "import math\nrate = 0.25\nvalue = fallback(x)\nresult = value * rate\n"
C = "import math\nrate = 0.5\nvalue = fallback(x)\nresult = value * rate\n"
D = "import math\n# step size 0.75\nrate = 0.5\nvalue = helper(x)\ncache = memo(x)\nresult = value * rate\n"
E = "import math\n# step size 0.5\nrate = 0.10\nvalue = helper(x)\ncache = memo(x)\nresult = value * rate\n"
F = A

# id, iteration, parent, source, score (None: failed), status
PROGRAMS = (
    ("A", 0, None, A, 1.0, "accepted"),
    ("B", 1, "A", B, 2.0, "accepted"),
    ("E", 1, "A", E, 1.5, "rejected"),
    ("C", 2, "B", C, 3.0, "accepted"),
    ("F", 2, "E", F, None, "failed"),
    ("D", 3, "C", D, 4.0, "accepted"),
)
PROGRAM = "sample"


def nodes() -> tuple[Node, ...]:
    """Returns the run as analysis nodes."""
    return tuple(Node(i, parent, it, score, status, source) for i, it, parent, source, score, status in PROGRAMS)


def rows() -> list[TraceRow]:
    """Returns the run's rows as the runner would record them (shas not yet filled in)."""
    return [
        TraceRow(
            id=i, iteration_found=it, parent_id=parent, status=status,
            metrics={"error": "evaluation crashed"} if score is None else {"value": score},
            changes=f"candidate {i}", operator="seed" if parent is None else "mutation", model="test/model",
            model_name="model", timestamp=f"2025-01-0{it + 1}T00:00:00+00:00", tokens=100 + it, cost=0.01,
        )
        for i, it, parent, source, score, status in PROGRAMS
    ]


def memory_files() -> dict[str, str]:
    """Returns the memory-branch files of the run: rows, blobs and replay_env.json."""
    files: dict[str, str] = {}
    for row, program in zip(rows(), PROGRAMS):
        prompts = {} if row.parent_id is None else {"diff_user": {"system": "sys", "user": f"improve {row.parent_id}",
                                                                  "responses": [f"reply for {row.id} ✓"]}}
        files.update(trace.row_files(PROGRAM, row, program[3], prompts))
    env = {"evaluation": {"command": "python score.py", "metric": "value", "direction": "higher"}}
    files[f"{trace.trace_dir(PROGRAM)}/replay_env.json"] = json.dumps(env)
    return files


def write_run(out: Path) -> Path:
    """Exports the run to `out` in the EvoTrace layout and returns it."""
    files = memory_files()
    return trace.export(files.get, sorted(files), PROGRAM, out)


# Runs whose run-wide cycling classes EvoReplay's own classifier (1773db1) gave; tests hold its outputs.
# Rows are (id, iteration, parent, source) in programs.jsonl order.
Rows = tuple[tuple[str, int, str | None, str], ...]
_RATE = "value = helper(x)\nresult = value * rate\n"
# One edit removes `rate = 0.5` and `rate = 0.9` at iteration 1; its child re-adds `rate = 0.9`.
ONE_EDIT: Rows = (
    ("s", 0, None, "rate = 0.5\nrate = 0.9\n" + _RATE),
    ("a", 1, "s", _RATE),
    ("b", 2, "a", "rate = 0.9\n" + _RATE),
)
# Three siblings remove the rate line (as 0.9, 0.7, 0.5) at iteration 2, listed m1, z1, a1; c re-adds 0.9.
SIBLINGS: Rows = (
    ("s", 0, None, "rate = 0.1\n" + _RATE),
    ("p9", 1, "s", "rate = 0.9\n" + _RATE),
    ("p7", 1, "s", "rate = 0.7\n" + _RATE),
    ("p5", 1, "s", "rate = 0.5\n" + _RATE),
    ("m1", 2, "p9", _RATE),
    ("z1", 2, "p7", _RATE),
    ("a1", 2, "p5", _RATE),
    ("c", 3, "a1", "rate = 0.9\n" + _RATE),
)
# b re-adds `value = helper(x)` twice in one edit.
TWICE: Rows = (
    ("s", 0, None, "value = helper(x)\nresult = value * rate\n"),
    ("a", 1, "s", "value = other(x)\nresult = value * rate\n"),
    ("b", 2, "a", "value = helper(x)\nvalue = other(x)\nvalue = helper(x)\ncount = len(x)\nresult = value * rate\n"
                  "extra = 1\n"),
)
# `k=10` removed, `k=100` added: 3 characters once numbers are collapsed.
SHORT: Rows = (
    ("s", 0, None, "k=10\nbody()\n"), ("a", 1, "s", "body()\n"), ("b", 2, "a", "k=100\n10, 20, 30,\nbody()\n"),
)
# C++ increments, which EvoReplay mistakes for diff headers.
CPP: Rows = (
    ("s", 0, None, "int main() {\n++counter;\nrun(counter);\n}\n"),
    ("a", 1, "s", "int main() {\nrun(counter);\n}\n"),
    ("b", 2, "a", "int main() {\n++counter;\nrun(counter);\n}\n"),
)


def write_evotrace(out: Path, rows: Rows) -> Path:
    """Writes rows as another framework's EvoTrace run (programs.jsonl in the given order, source blobs)."""
    for _, _, _, source in rows:
        sha = sha256_text(source)
        blob = out / "blobs" / sha[:2] / f"{sha}.txt"
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_text(source, encoding="utf-8")
    lines = [json.dumps({"id": i, "iteration_found": it, "parent_id": parent, "status": "accepted",
                         "metrics": {"combined_score": float(it)}, "solution_sha256": sha256_text(source)})
             for i, it, parent, source in rows]
    (out / "programs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
