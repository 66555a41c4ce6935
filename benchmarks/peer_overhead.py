"""Prints our runner's cost per iteration next to OpenEvolve's on the same program and the same mock model.

What it measures. Both frameworks improve function_minimization's `search.py` for `--iterations`
iterations, one worker each, against one loopback OpenAI-compatible server that answers at once with
the same kind of edit (a SEARCH/REPLACE block that sets `initial_temperature`, a change that moves the
score but not the evaluation's run time). Runs are interleaved in `--pairs` pairs (the order flips each
pair). For each run it measures, through a wrapper process that waits for the whole tree:
- overhead per iteration: wall time minus the evaluations (runs x the median time of the unchanged
  evaluation, measured again just before each run) minus the server's own handling time, over the iterations;
- CPU per iteration: the CPU time of the whole process tree, evaluations included (equal for both), counted
  by a cgroup the run starts in (v1 cpuacct, else v2 cpu.stat; as root) until its last process ends. Without
  one, rusage, which misses the processes no one waits for (bubblewrap's children); the table says which;
- peak RSS: the largest resident set of any process of the tree;
- steady overhead: the same measure between the second and the last model request, so without what a
  run does once (imports, setup, the first evaluation; our first reply may wait for litellm's import);
- prompt tokens per request (litellm.token_counter, gpt-4o encoding) and time to the first request;
- the overhead fraction: the overhead's share of the run's wall time. With `--latency 3` the server
  waits 3 s before each reply, as a real model does, so this is the share users see.
Each is printed as ours/peer with min/median/max over the pairs, with the machine's load average.

OpenEvolve is installed from the package index into its own virtualenv (`--venv`, default
~/.cache/autoloop/bench/openevolve-<version>); when that fails the peer is skipped with the reason.
Our runner is the `autoloop` of this checkout (`python3 -m autoloop_py`), with its default isolation, its
package byte-compiled first as an install leaves it (OpenEvolve's virtualenv is): the runs set
PYTHONDONTWRITEBYTECODE, so each would otherwise compile every module it imports (`--from-source`).

    python benchmarks/peer_overhead.py [--pairs 5] [--iterations 50] [--openevolve 0.4.0] [--latency 3]

With `--profile`, it runs only our side once under cProfile, timed by the process's CPU time (not wall
time: the machine may be shared), and prints our functions' top 10 by cumulative CPU time:

    python benchmarks/peer_overhead.py --profile [--iterations 50] [--top 10]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from autoloop_py.sandbox.cgroup import CGROUP_MOUNT, PidsGroup, own_cgroup, read_file, remove_group

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / ".autoloop/programs/function_minimization/code"
PROGRAM_MD = """\
---
metric_direction: higher
evaluation-timeout: 60
seed: 7
novelty_filter: false
---

# Bench

## Goal

Find the global minimum of f(x, y); improve the search in `code/search.py`.

## Target

- `code/search.py`

## Evaluation

```bash
cd "${AUTOLOOP_PROGRAM_DIR:-.}" && python3 code/evaluate.py
```

The metric is `combined_score`. Higher is better.
"""
OE_EVALUATOR = '''\
"""OpenEvolve's side of the benchmark: the same evaluation script, in a subprocess, as autoloop runs it."""
import json, pathlib, shutil, subprocess, sys, tempfile

HERE = pathlib.Path(__file__).resolve().parent


def evaluate(program_path):
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(program_path, pathlib.Path(tmp) / "search.py")
        shutil.copy(HERE / "evaluate.py", pathlib.Path(tmp) / "evaluate.py")
        done = subprocess.run([EVAL_PYTHON, "evaluate.py"], cwd=tmp, capture_output=True, text=True, timeout=60)
    lines = [line for line in done.stdout.splitlines() if line.strip().startswith("{")]
    result = json.loads(lines[-1]) if lines else {"error": done.stderr[-300:]}
    if "error" in result:
        return {"combined_score": 0.0, "error": 1.0}
    return {k: v for k, v in result.items() if isinstance(v, (int, float))}
'''
# Both frameworks evaluate with the interpreter our program's `python3 code/evaluate.py` finds on PATH (not
# OpenEvolve's virtualenv Python, whose start-up can be several times shorter), so one figure is subtracted.
EVAL_PYTHON = shutil.which("python3") or sys.executable
OE_CONFIG = """\
max_iterations: {iterations}
checkpoint_interval: 100000
log_level: WARNING
random_seed: 42
diff_based_evolution: true
llm:
  api_base: {api_base}
  api_key: sk-bench
  models:
    - name: mock
      weight: 1.0
  timeout: 60
  retries: 0
database:
  population_size: 100
  num_islands: 1
evaluator:
  timeout: 60
  cascade_evaluation: false
  parallel_evaluations: 1
"""


@dataclass
class Server:
    """The loopback model: records each request's prompt, arrival and handling time."""

    arrivals: list[float] = field(default_factory=list)
    prompts: list[list[dict[str, str]]] = field(default_factory=list)
    handling: float = 0.0
    latency: float = 0.0  # seconds each reply waits, as a real model's does
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def delay(self) -> float:
        """Returns the seconds the next reply waits."""
        return self.latency

    def reply(self, messages: list[dict[str, str]]) -> str:
        """Returns the reply's text to a request's messages (this model ignores them)."""
        value = round(self.rng.uniform(0.2, 3.0), 4)
        return (f"SUMMARY: set initial_temperature to {value}\n\n"
                "<<<<<<< SEARCH\ndef search_algorithm(\n=======\n"
                f"initial_temperature = {value}\ndef search_algorithm(\n>>>>>>> REPLACE\n")

    def reset(self) -> None:
        with self.lock:
            self.arrivals.clear()
            self.prompts.clear()
            self.handling = 0.0


def serve(state: Server) -> ThreadingHTTPServer:
    """Starts the OpenAI-compatible server on 127.0.0.1 (chat completions only)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            started = time.perf_counter()
            arrived = time.time()
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            with state.lock:
                state.arrivals.append(arrived)
                state.prompts.append(body.get("messages", []))
                text = state.reply(body.get("messages", []))
                wait = state.delay()
            if wait > 0:
                time.sleep(wait)
            payload = json.dumps({
                "id": "chatcmpl-bench", "object": "chat.completion", "created": int(arrived), "model": "mock",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            with state.lock:
                state.handling += time.perf_counter() - started

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def measure(command: list[str], cwd: Path, env: dict[str, str]) -> dict[str, float]:
    """Runs a command in a wrapper that waits for its whole tree; returns wall, CPU and peak RSS."""
    wrapper = [sys.executable, __file__, "--measure", "--", *command]
    done = subprocess.run(wrapper, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _measure_main(command: list[str]) -> int:
    group = _cpu_group()
    started = time.time()
    argv = command if group is None else PidsGroup(group[0]).wrap(command)
    code = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=sys.stderr).returncode
    wall = time.time() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = {"started": started, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
               "rss_mb": usage.ru_maxrss / 1024, "cgroup": 0.0}
    if group is not None:
        members = PidsGroup(group[0]).members
        ends = time.monotonic() + 30
        while members() and time.monotonic() < ends:  # what the run left in the background finishes first
            time.sleep(0.05)
        figures.update(cpu=_cpu_seconds(*group), cgroup=1.0)
        PidsGroup(group[0]).kill_all()
        remove_group(group[0])
    print(json.dumps(figures))
    return code


def _cpu_group() -> tuple[Path, str] | None:
    """Returns a new cgroup that counts the CPU time of every process in it, and its counter file (None: none can
    be made, e.g. when not root). rusage misses the processes no one waits for (bubblewrap's children).

    cgroup v1's cpuacct, else v2's cpu.stat. On v2 a root runner's evaluations move to pids groups of their own,
    which may lie outside this one: then their CPU is missed, and rusage's figure may be the larger.
    """
    text = read_file("/proc/self/cgroup")
    v1, v2 = CGROUP_MOUNT / "cpuacct", CGROUP_MOUNT / (own_cgroup("", text) or "").lstrip("/")
    for parent, counter in ((v1 / (own_cgroup("cpuacct", text) or "").lstrip("/"), "cpuacct.usage"),
                            (v1, "cpuacct.usage"), (v2, "cpu.stat")):
        path = parent / f"autoloop-bench-{os.getpid()}"
        try:
            path.mkdir()
        except OSError:
            continue
        if (path / counter).is_file():
            return path, counter
        remove_group(path)
    return None


def _cpu_seconds(group: Path, counter: str) -> float:
    """Returns the CPU seconds the group's processes used (cpuacct.usage is in ns, cpu.stat's usage_usec in µs)."""
    text = (group / counter).read_text()
    if counter == "cpu.stat":
        return float(dict(line.split() for line in text.splitlines())["usage_usec"]) / 1e6
    return float(text) / 1e9


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def ours_setup(base: Path) -> Path:
    """Returns a scratch repository (with a bare origin) holding the bench program."""
    origin, repo = base / "origin.git", base / "repo"
    _git(base, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(base, "init", "-q", "-b", "main", str(repo))
    for key, value in (("user.name", "bench"), ("user.email", "bench@example.invalid")):
        _git(repo, "config", key, value)
    program = repo / ".autoloop/programs/bench"
    (program / "code").mkdir(parents=True)
    (program / "program.md").write_text(PROGRAM_MD)
    shutil.copy(EXAMPLE / "search.py", program / "code/search.py")
    shutil.copy(EXAMPLE / "evaluate.py", program / "code/evaluate.py")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "bench program")
    _git(repo, "remote", "add", "origin", str(origin))
    _git(repo, "push", "-q", "origin", "main")
    return repo


def peer_setup(base: Path, iterations: int, api_base: str) -> Path:
    """Returns OpenEvolve's run directory: initial program, evaluator wrapper, config."""
    run = base / "openevolve"
    run.mkdir(parents=True)
    shutil.copy(EXAMPLE / "search.py", run / "initial_program.py")
    shutil.copy(EXAMPLE / "evaluate.py", run / "evaluate.py")
    (run / "evaluator.py").write_text(OE_EVALUATOR.replace("EVAL_PYTHON", repr(EVAL_PYTHON)))
    (run / "config.yaml").write_text(OE_CONFIG.format(iterations=iterations, api_base=api_base))
    return run


def install_peer(venv: Path, version: str) -> Path | None:
    """Returns OpenEvolve's CLI in its own virtualenv (installed when missing), None with a message when it cannot be."""
    cli = venv / "bin" / "openevolve-run"
    if cli.exists():
        return cli
    print(f"installing openevolve=={version} into {venv} …", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        subprocess.run([str(venv / "bin/pip"), "install", "-q", f"openevolve=={version}"], check=True,
                       capture_output=True, timeout=1800)
    except (subprocess.SubprocessError, OSError) as err:
        print(f"skipping the peer: openevolve=={version} could not be installed ({err})")
        return None
    return cli if cli.exists() else None


def evaluation_seconds(repeats: int = 7) -> float:
    """Returns the median wall time of one evaluation of the unchanged search (a subprocess, as both run it)."""
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(EXAMPLE / "search.py", Path(tmp) / "search.py")
        shutil.copy(EXAMPLE / "evaluate.py", Path(tmp) / "evaluate.py")
        for _ in range(repeats):
            started = time.perf_counter()
            subprocess.run([EVAL_PYTHON, "evaluate.py"], cwd=tmp, capture_output=True, check=True)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def prompt_tokens(prompts: list[list[dict[str, str]]]) -> float:
    """Returns the median prompt size in tokens (gpt-4o encoding, counted offline)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network: the bundled price list
    import litellm  # imported here: only the figures need it

    counts = [litellm.token_counter(model="gpt-4o", messages=messages) for messages in prompts if messages]
    return float(statistics.median(counts)) if counts else float("nan")


def one_run(kind: str, base: Path, iterations: int, server: Server, url: str, cli: Path | None,
            eval_s: float) -> dict[str, float]:
    """Runs one framework for `iterations`; returns its figures."""
    server.reset()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AUTOLOOP_"))}
    env.update(OPENAI_API_KEY="sk-bench", OPENAI_API_BASE=url, OPENAI_BASE_URL=url, PYTHONDONTWRITEBYTECODE="1")
    if kind == "ours":
        repo = ours_setup(base)
        env["PYTHONPATH"] = str(ROOT)
        command = [sys.executable, "-m", "autoloop_py", "run", "--repo", str(repo), "--program", "bench",
                   "--iterations", str(iterations), "--proposer", "llm", "--model", "openai/mock"]
        figures = measure(command, base, env)
    else:
        assert cli is not None
        run = peer_setup(base, iterations, url)
        command = [str(cli), "initial_program.py", "evaluator.py", "--config", "config.yaml",
                   "--iterations", str(iterations), "--output", str(run / "out")]
        figures = measure(command, run, env)
    requests = len(server.arrivals)
    evaluations = iterations + 1  # both evaluate the initial program first
    overhead = figures["wall"] - evaluations * eval_s - server.handling
    # Between the second and the last request each iteration is one evaluation, one reply and the framework's
    # own work, so this is the overhead once started, without the imports and setup. (Not from the first: our
    # first reply may wait for litellm's import, which goes on after the first request is sent.)
    arrivals = sorted(server.arrivals)[1:]
    steady = ((arrivals[-1] - arrivals[0]) / (len(arrivals) - 1) - eval_s - server.handling / (len(arrivals) + 1)
              if len(arrivals) > 1 else float("nan"))
    return {
        "overhead": overhead / iterations,
        "fraction": overhead / figures["wall"],
        "steady": steady,
        "cpu": figures["cpu"] / iterations,
        "rss": figures["rss_mb"],
        "tokens": prompt_tokens(list(server.prompts)),
        "first": (server.arrivals[0] - figures["started"]) if server.arrivals else float("nan"),
        "requests": float(requests),
        "cgroup": figures["cgroup"],  # 1 when the CPU was counted by a cgroup
    }


# Runs `autoloop` (argv[2:]) under cProfile timed by this process's CPU time; saves the stats to argv[1].
_PROFILED = """\
import cProfile, sys, time
from autoloop_py.cli import main
profiler = cProfile.Profile(time.process_time)
try:
    code = profiler.runcall(main, sys.argv[2:])
finally:
    profiler.dump_stats(sys.argv[1])
raise SystemExit(code)
"""


def profile(iterations: int, top: int) -> int:
    """Runs our side once under the profiler; prints our functions' top `top` by cumulative CPU time."""
    import pstats

    state = Server()
    server = serve(state)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AUTOLOOP_"))}
    env.update(OPENAI_API_KEY="sk-bench", OPENAI_API_BASE=url, OPENAI_BASE_URL=url, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory(prefix="autoloop-profile-") as tmp:
        repo = ours_setup(Path(tmp))
        stats_file = Path(tmp) / "run.prof"
        command = [sys.executable, "-c", _PROFILED, str(stats_file), "run", "--repo", str(repo), "--program",
                   "bench", "--iterations", str(iterations), "--proposer", "llm", "--model", "openai/mock"]
        started = time.time()
        figures = measure(command, Path(tmp), env)
        first = (min(state.arrivals) - started) if state.arrivals else float("nan")
        stats = pstats.Stats(str(stats_file))
    server.shutdown()
    total = stats.total_tt  # type: ignore[attr-defined]
    print(f"{iterations} iterations, {len(state.arrivals)} model requests; load average {_load()}; "
          f"our process: {total:.2f} s CPU ({total / iterations:.3f} s/iteration); process tree: "
          f"{figures['cpu']:.2f} s CPU, {figures['wall']:.2f} s wall; first model request after {first:.2f} s")
    ours = [(key, row) for key, row in stats.stats.items()  # type: ignore[attr-defined]
            if "autoloop_py" in key[0] and "/templates/" not in key[0]]
    ours.sort(key=lambda item: item[1][3], reverse=True)
    print(f"\n{'cumulative CPU s':>16} {'per iteration':>14} {'calls':>7}  function (autoloop_py)")
    for (path, line, name), (_, calls, _, cumulative, _) in ours[:top]:
        where = path.split("autoloop_py/", 1)[-1]
        print(f"{cumulative:>16.3f} {cumulative / iterations:>14.4f} {calls:>7}  {where}:{line} {name}")
    return 0


def _load() -> str:
    """Returns the machine's load averages (1, 5, 15 minutes)."""
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--openevolve", default="0.4.0")
    parser.add_argument("--venv", type=Path, default=None)
    parser.add_argument("--profile", action="store_true",
                        help="run only ours, once, under cProfile (CPU time); print our functions' top --top")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.0, metavar="SECONDS",
                        help="seconds the model server waits before each reply (3 is a realistic model)")
    parser.add_argument("--from-source", action="store_true",
                        help="do not byte-compile our package first: each of our runs compiles what it imports")
    args = parser.parse_args()
    if not args.from_source:
        compileall.compile_dir(str(ROOT / "autoloop_py"), quiet=1)
    if args.profile:
        return profile(args.iterations, args.top)
    venv = args.venv or Path.home() / ".cache/autoloop/bench" / f"openevolve-{args.openevolve}"
    cli = install_peer(venv, args.openevolve)
    state = Server(latency=args.latency)
    server = serve(state)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    eval_s = evaluation_seconds()
    print(f"{os.cpu_count()} cores, load average {_load()}; one evaluation takes {eval_s:.3f} s (median); "
          f"the model replies after {args.latency:g} s; {args.pairs} interleaved pairs of {args.iterations} iterations")
    results: dict[str, list[dict[str, float]]] = {"ours": [], "peer": []}
    for pair in range(args.pairs):
        order = ("ours", "peer") if pair % 2 == 0 else ("peer", "ours")
        for kind in order:
            if kind == "peer" and cli is None:
                continue
            # Measured again before each run: on a shared machine the load, and so the evaluation's time, moves.
            eval_s = evaluation_seconds()
            with tempfile.TemporaryDirectory(prefix=f"autoloop-peer-{kind}-") as tmp:
                figures = one_run(kind, Path(tmp), args.iterations, state, url, cli, eval_s)
            results[kind].append(figures)
            print(f"pair {pair + 1} {kind:>4}: evaluation {eval_s:.3f} s, "
                  + ", ".join(f"{k} {v:.3f}" for k, v in figures.items())
                  + f"; load average {_load()}", flush=True)
    server.shutdown()
    _report(results, args.latency)
    return 0


def _report(results: dict[str, list[dict[str, float]]], latency: float = 0.0) -> None:
    counted = "cgroup" if all(r["cgroup"] for runs in results.values() for r in runs) else "rusage"
    names = {"overhead": "overhead s/iteration (minus evaluation and server)",
             "steady": "the same between second and last request",
             "fraction": f"overhead share of wall time ({latency:g} s replies)",
             "first": "time to first request s", "cpu": f"CPU s/iteration (process tree, {counted})",
             "rss": "peak RSS MB", "tokens": "prompt tokens per request", "requests": "model requests"}
    print(f"\nload average at the end {_load()}")
    print(f"{'measure':<52} {'ours (median)':>14} {'peer (median)':>14} {'ours/peer min / median / max':>30}")
    for key, label in names.items():
        ours = [r[key] for r in results["ours"]]
        peer = [r[key] for r in results["peer"]]
        ratios = [a / b for a, b in zip(ours, peer) if b]
        ratio = (f"{min(ratios):.2f} / {statistics.median(ratios):.2f} / {max(ratios):.2f}" if ratios else "n/a")
        print(f"{label:<52} {statistics.median(ours):>14.3f} "
              f"{(statistics.median(peer) if peer else float('nan')):>14.3f} {ratio:>30}")
    print(_fraction_line(results, latency))


def _fraction_line(results: dict[str, list[dict[str, float]]], latency: float) -> str:
    """Returns the sentence users read: the share of each framework's wall time that is its own overhead."""
    shares = {kind: statistics.median(r["fraction"] for r in runs) if runs else float("nan")
              for kind, runs in results.items()}
    first = {kind: statistics.median(r["first"] for r in runs) if runs else float("nan")
             for kind, runs in results.items()}
    peer = (f"OpenEvolve's {100 * shares['peer']:.1f}% (first request after {first['peer']:.2f} s)"
            if results["peer"] else "OpenEvolve was not run")
    return (f"\nwith the model replying after {latency:g} s: overhead is {100 * shares['ours']:.1f}% of our wall time "
            f"(first request after {first['ours']:.2f} s), {peer} (medians)")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--measure" and sys.argv[2] == "--":
        raise SystemExit(_measure_main(sys.argv[3:]))
    raise SystemExit(main())
