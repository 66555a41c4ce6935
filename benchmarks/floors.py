"""Prints the two costs under our per-iteration figures that no change inside autoloop can remove.

- `import litellm` in a fresh interpreter: wall time, CPU and peak RSS. The llm proposer's model worker
  pays it once, before its first request; it bounds the time to the first request and the peak RSS
  of `autoloop run --proposer llm` from below for as long as litellm is the model client.
- The first request itself: a fresh interpreter that imports litellm and at once sends one completion
  to a loopback server, timed from the interpreter's start to the server's receipt (litellm's first
  call imports more of itself). No runner can ask a model through litellm sooner.
- One durable record per iteration: writing a small file as a commit on a branch and pushing that
  branch to a bare origin with the git CLI (hash-object, mktree, commit-tree, update-ref, push). An
  iteration that keeps its candidate records two branches (`autoloop/<name>` and the memory branch).

Compare with `benchmarks/peer_overhead.py`, which prints what a whole run costs next to OpenEvolve.

    python benchmarks/floors.py [--repeats 5] [--records 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

IMPORT = """\
import json, resource, time
started = time.perf_counter()
import litellm  # noqa: F401
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": time.perf_counter() - started, "cpu": usage.ru_utime + usage.ru_stime,
                  "rss_mb": usage.ru_maxrss / 1024}))
"""


def import_costs(repeats: int) -> list[dict[str, float]]:
    """Returns wall, CPU and peak RSS of `import litellm` in `repeats` fresh interpreters (no network)."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # as the proposer sets it
    runs = []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-c", IMPORT], env=env, capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs


FIRST_REQUEST = """\
import sys, litellm
litellm.suppress_debug_info = True
litellm.completion(model="openai/floor", messages=[{"role": "user", "content": "hi"}], api_base=sys.argv[1],
                   api_key="sk-floor", timeout=60, max_retries=0, num_retries=0)
"""


def first_request_costs(repeats: int) -> list[float]:
    """Returns the seconds from a fresh interpreter's start to its first litellm request reaching a loopback server."""
    arrivals: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            arrivals.append(time.time())
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"id": "f", "object": "chat.completion", "created": 0, "model": "floor", "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    times = []
    try:
        for _ in range(repeats):
            arrivals.clear()
            started = time.time()
            subprocess.run([sys.executable, "-c", FIRST_REQUEST, url], env=env, capture_output=True, check=True)
            times.append(arrivals[0] - started)
    finally:
        server.shutdown()
    return times


IDENTITY = {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
            for what, value in (("NAME", "bench"), ("EMAIL", "bench@example.invalid"))}


def _git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, check=True,
                          env={**os.environ, **IDENTITY})
    return done.stdout.strip()


def record_costs(records: int) -> list[float]:
    """Returns the seconds of each of `records` commit-and-push rounds of one small file."""
    times = []
    with tempfile.TemporaryDirectory(prefix="autoloop-floor-") as tmp:
        base = Path(tmp)
        _git(base, "init", "-q", "--bare", "origin.git")
        _git(base, "init", "-q", "repo")
        repo = base / "repo"
        _git(repo, "commit", "-q", "--allow-empty", "-m", "0")
        _git(repo, "remote", "add", "origin", str(base / "origin.git"))
        _git(repo, "push", "-q", "origin", "HEAD:refs/heads/memory")
        tip = _git(repo, "rev-parse", "HEAD")
        for number in range(records):
            started = time.perf_counter()
            blob = _git(repo, "hash-object", "-w", "--stdin", stdin=f"| Iteration Count | {number} |\n" * 300)
            tree = _git(repo, "mktree", stdin=f"100644 blob {blob}\tstate.md\n")
            tip = _git(repo, "commit-tree", tree, "-p", tip, "-m", f"iteration {number}")
            _git(repo, "update-ref", "refs/heads/memory", tip)
            _git(repo, "push", "-q", "origin", "refs/heads/memory:refs/heads/memory")
            times.append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh interpreters that import litellm")
    parser.add_argument("--records", type=int, default=30, help="commit-and-push rounds")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load average {' / '.join(f'{v:.2f}' for v in os.getloadavg())}")
    try:
        runs = import_costs(args.repeats)
    except subprocess.CalledProcessError as error:
        print(f"import litellm failed: {error.stderr.strip()[-300:]}")
    else:
        median = {key: statistics.median(run[key] for run in runs) for key in ("wall", "cpu", "rss_mb")}
        print(f"import litellm (median of {args.repeats}): {median['wall']:.2f} s wall, {median['cpu']:.2f} s CPU, "
              f"{median['rss_mb']:.0f} MB peak RSS")
        first = first_request_costs(args.repeats)
        print(f"first litellm request of a fresh interpreter (median of {args.repeats}): "
              f"{statistics.median(first):.2f} s; min {min(first):.2f} s, max {max(first):.2f} s")
    times = record_costs(args.records)
    print(f"one commit + push of one branch (median of {args.records}): {statistics.median(times) * 1000:.1f} ms; "
          f"min {min(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
