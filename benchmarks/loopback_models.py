"""The `--loopback` mode of benchmarks/model_bandit.py: the real CLI against loopback model servers of scripted quality.

Each arm is a loopback OpenAI-compatible server (a small http.server here: tests/fake_openai.py needs pytest).
It reads the current `x = N` of the counter program from the prompt and answers an edit block: with the
arm's keep probability it raises x by U(0, gain) (the candidate is kept), otherwise it lowers x (rejected).
Every reply reports TOKENS prompt and TOKENS completion tokens, and the program's `models:` list prices
them so that one call costs the arm's price. `autoloop run --proposer llm --iterations N` runs once per
method over a fresh temporary repository; regret, spend and gain come from the state file's Models table.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import os
import random
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Protocol, Sequence

from autoloop_py.cli import main as autoloop
from autoloop_py.state.file import parse_state
from autoloop_py.state.model_stats import parse_models_section

TOKENS = 1000
FOLDER = ".autoloop/programs/counter"
X_RE = re.compile(r"^x = (-?[0-9.]+)$", re.MULTILINE)

PROGRAM = """\
---
evaluation-timeout: 30
model-selection: {method}
models:
{models}---

# Counter

## Goal

Make `x` as large as possible.

## Target

- `code/value.py`

Do NOT modify:
- `code/evaluate.py`

## Evaluation

```bash
cd "$AUTOLOOP_PROGRAM_DIR" && python3 code/evaluate.py
```

The metric is `score`. Higher is better.
"""

VALUE = "# EVOLVE-BLOCK-START\nx = 1.0\n# EVOLVE-BLOCK-END\n"
EVALUATE = 'import json\nns = {}\nexec(open("code/value.py").read(), ns)\nprint(json.dumps({"score": ns["x"]}))\n'


class Arm(Protocol):
    """An arm of benchmarks/model_bandit.py: keep probability, the most a kept edit gains, price per call."""

    name: str
    keep: float
    gain: float
    usd: float

    @property
    def per_dollar(self) -> float: ...


class _Handler(http.server.BaseHTTPRequestHandler):
    server: "_Server"

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user")
        found = X_RE.search(prompt)
        old = found.group(1) if found else "1.0"
        with self.server.lock:
            arm, rng = self.server.arm, self.server.rng
            step = rng.uniform(0, arm.gain) if rng.random() < arm.keep else -rng.uniform(0.1, 1.0)
        content = (f"SUMMARY: move x by {step:.4f}\n\n{FOLDER}/code/value.py\n<<<<<<< SEARCH\nx = {old}\n"
                   f"=======\nx = {float(old) + step:.6f}\n>>>>>>> REPLACE\n")
        reply = json.dumps({
            "id": "x", "object": "chat.completion", "created": 0, "model": arm.name,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": TOKENS, "completion_tokens": TOKENS, "total_tokens": 2 * TOKENS},
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, arm: Arm, seed: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.arm, self.rng, self.lock = arm, random.Random(f"{arm.name}:{seed}"), threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextlib.contextmanager
def _servers(arms: Sequence[Arm], seed: int) -> Iterator[list[_Server]]:
    servers = [_Server(arm, seed) for arm in arms]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield servers
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def model_name(arm: Arm) -> str:
    """Returns the litellm name of the arm's server: `openai/<arm name without its prefix>`."""
    return "openai/" + arm.name.rsplit("/", 1)[-1]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def build_repo(base: Path, method: str, servers: Sequence[_Server]) -> Path:
    """Returns a scratch repository (bare origin) holding the counter program whose `models:` are the servers."""
    models = "".join(
        f"  - model: {model_name(server.arm)}\n    api-base: {server.base_url}\n"
        f"    input-cost-per-token: {server.arm.usd / (2 * TOKENS):.12f}\n"
        f"    output-cost-per-token: {server.arm.usd / (2 * TOKENS):.12f}\n"
        for server in servers
    )
    work, origin = base / "work", base / "origin.git"
    _git(base, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(base, "init", "-q", "-b", "main", str(work))
    _git(work, "config", "user.name", "bench")
    _git(work, "config", "user.email", "bench@example.invalid")
    (work / FOLDER / "code").mkdir(parents=True)
    (work / FOLDER / "program.md").write_text(PROGRAM.format(method=method, models=models))
    (work / FOLDER / "code/value.py").write_text(VALUE)
    (work / FOLDER / "code/evaluate.py").write_text(EVALUATE)
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "bench")
    _git(work, "remote", "add", "origin", str(origin))
    _git(work, "push", "-q", "origin", "main")
    return work


def run_method(arms: Sequence[Arm], method: str, iterations: int, seed: int) -> dict[str, Any]:
    """Runs `autoloop run --proposer llm` for one method; returns its regret, spend, gain, calls per model, seconds."""
    best = max(arm.per_dollar for arm in arms)
    with _servers(arms, seed) as servers, tempfile.TemporaryDirectory() as tmp:
        repo = build_repo(Path(tmp), method, servers)
        started = time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()):
            status = autoloop(["run", "--repo", str(repo), "--program", "counter", "--proposer", "llm",
                               "--iterations", str(iterations)])
        seconds = time.monotonic() - started
        if status != 0:
            raise SystemExit(f"autoloop run ({method}) exited {status}")
        state = parse_state(_git(repo, "show", "origin/memory/autoloop:counter.md") + "\n", "counter.md")
        rows = {row.name: row for row in parse_models_section(state.section_text("models"), state.path).rows}
    used = {arm: rows[model_name(arm)] for arm in arms if model_name(arm) in rows}
    return {
        "regret": sum(row.calls * arm.usd * (best - arm.per_dollar) for arm, row in used.items()),
        "spend": sum(row.usd for row in used.values()),
        "gain": sum(row.improvement for row in used.values()),
        "calls": {arm.name: row.calls for arm, row in used.items()},
        "best": sum(row.calls for arm, row in used.items() if arm.per_dollar == best),
        "seconds": seconds,
    }


def run_loopback(arms: Sequence[Arm], iterations: int, seed: int) -> None:
    """Prints, per method, the regret, spend and gain of `iterations` real iterations against the loopback arms."""
    os.environ.pop("AUTOLOOP_MODEL", None)
    os.environ.pop("AUTOLOOP_MOCK_RESPONSE", None)
    os.environ.setdefault("OPENAI_API_KEY", "sk-loopback-not-a-key")
    print(f"{iterations} iterations per method, seed {seed} (loopback model servers, real `autoloop run` CLI)")
    print(f"{'method':<10} {'regret':>8} {'spend $':>8} {'gain':>8} {'gain per $':>11} {'best-arm pulls':>15} "
          f"{'seconds':>8}  calls per model")
    for method in ("weighted", "ucb", "thompson"):
        got = run_method(arms, method, iterations, seed)
        calls = sum(got["calls"].values()) or 1
        print(f"{method:<10} {got['regret']:>8.3f} {got['spend']:>8.3f} {got['gain']:>8.2f} "
              f"{got['gain'] / (got['spend'] or 1):>11.1f} {got['best'] / calls:>15.0%} {got['seconds']:>8.0f}  "
              + ", ".join(f"{name} {count}" for name, count in got["calls"].items()), flush=True)
