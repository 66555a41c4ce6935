"""Long runs: "kept means better" checked after every iteration, for every flow in FLOWS.

A seeded offline proposer (`tune`: random numeric edits of the Target's literals, the real iteration path) works on a
Target of three numbers; the evaluator's scores are a known function of them (`measure`). After every `autoloop run`
the harness asserts:
- the tip of `autoloop/<name>` holds the code of the candidate the state names best (its measured score is Best
  Metric; under objectives its values are on the Kept Front);
- no kept candidate is worse than (one metric) or dominated by (objectives) one kept before it, the baseline included;
- Best Metric, the history, the Population and the trace agree;
- the state file reads back to the text written, and every state the runner rendered while recording equals the
  parse of its text;
- under `novelty: embedding` (_check_novelty), a skipped candidate was not evaluated, committed or added to the
  Population, its history entry and trace row name the nearest evaluated candidate and a similarity above the
  threshold (recomputed from the two sources), an evaluated one lies at most at it from its parent, the embedding
  model's calls are in each iteration's cost, Spent and the Models table (local vectors spend nothing); at the end
  the flow skipped some and kept some, and `status` and the report's data list the skips.
Half way a person edits the state file (a Current Priority, a Population note, a Prompts row), as `autoloop edit`
would. The `default-prompts` flow proposes with a scripted model on loopback instead (`scripted`, below), whose
edits improve only under the instruction the person added or the guide wrote.

Default: ITERATIONS per flow; `AUTOLOOP_LONGRUN=150 pytest tests/longrun` runs the long version. To add a feature,
add a row to FLOWS (and an invariant below when the feature has one of its own).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import types
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from autoloop_py.analysis import code_vector
from autoloop_py.analysis.html_report import skipped_data
from autoloop_py.cli import main
from autoloop_py.loop.record import recording
from autoloop_py.program.regions import evolved_code
from autoloop_py.proposers.model_calls import import_litellm
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import population_of
from autoloop_py.state.trace import blob_path, memory_trace
from autoloop_py.strategies import pareto
from tests.fake_openai import fake_openai
from tests.programs import install_tiny_strategy_program, program_md

NAME = "knobs"
FOLDER = f".autoloop/programs/{NAME}"
VALUE = f"{FOLDER}/code/value.py"
ITERATIONS = int(os.environ.get("AUTOLOOP_LONGRUN", "8"))
TARGET = "# EVOLVE-BLOCK-START\ndef knobs():\n    a = 1.0\n    b = 2.0\n    return a, b, 3\n# EVOLVE-BLOCK-END\n"
# The evaluator: a known function of A, B and C (the harness measures the branch's code with the same function).
MEASURE = '''
def measure(text):
    names = {}
    exec(text, names)
    a, b, c = names["knobs"]()
    return {"score": round(10 - (a - 3.7) ** 2 - (b - 0.5) ** 2 - (c - 7) ** 2 / 10, 9),
            "cost": round(abs(a) + abs(b) + abs(c), 9)}
'''
EVALUATE = MEASURE + '''
import json, os, pathlib
metrics = measure(pathlib.Path("code/value.py").read_text())
print(json.dumps({"valid": 1} if os.environ.get("AUTOLOOP_STAGE") == "1" else metrics))
'''
_NAMES: dict[str, Any] = {}
exec(MEASURE, _NAMES)
measure: Callable[[str], dict[str, float]] = _NAMES["measure"]
OBJECTIVES = "[{score: higher}, {cost: lower}]"
STAGES = "[{name: validity}, {name: score}]"
# A one-literal edit of the Target scores 0.857 to its parent, a two-literal one 0.714: tune's edits are skipped some
# of the time. With a `role: embedding` model (a loopback one, pricing each request's TOKENS), its calls are spent.
NOVELTY = {"novelty": "embedding", "novelty-threshold": "0.8"}
EMBEDDER = "openai/embedder"
PRICE = 0.001
TOKENS = 10
CONFIGS = {"evox": "auto_generate_variation_operators: false\n", "adaevolve": ""}


@dataclass(frozen=True)
class Flow:
    """One configuration the harness runs: a strategy (None: the default flow), frontmatter keys, slots."""

    name: str
    strategy: str | None = None
    frontmatter: dict[str, str] = field(default_factory=dict)
    parallel: int = 1
    # Iterations per `run` without slots: each record but the run's last is committed while the next is proposed.
    per_run: int = 1

    @property
    def prompts(self) -> bool:
        """Returns whether the flow draws prompt variants (a scripted model proposes and writes variants)."""
        return "prompt-evolve-every" in self.frontmatter

    @property
    def threshold(self) -> float | None:
        """Returns the `novelty-threshold` of a flow under `novelty: embedding` (None: another flow)."""
        return float(self.frontmatter["novelty-threshold"]) if self.frontmatter.get("novelty") == "embedding" else None

    @property
    def embeds(self) -> bool:
        """Returns whether a `role: embedding` model (on loopback) embeds the flow's candidates."""
        return "role: embedding" in self.frontmatter.get("models", "")


FLOWS = [
    Flow("default"),
    Flow("default-objectives", frontmatter={"objectives": OBJECTIVES}),
    Flow("default-stages-repeats", frontmatter={"evaluation-stages": STAGES, "repeats": "3"}),
    Flow("default-parallel", parallel=3),
    Flow("default-pipelined", per_run=3),
    Flow("default-prompts", frontmatter={"proposer": "llm", "models": "[openai/scripted]", "prompt-selection": "ucb",
                                         "prompt-evolve-every": "4"}),
    *(Flow(s, s) for s in ("alphaevolve", "adaevolve", "funsearch", "evox")),
    *(Flow(f"{s}-objectives", s, {"objectives": OBJECTIVES}) for s in ("alphaevolve", "adaevolve", "evox")),
    Flow("alphaevolve-stages-repeats", "alphaevolve", {"evaluation-stages": STAGES, "repeats": "2"}),
    Flow("alphaevolve-parallel", "alphaevolve", parallel=3),
    Flow("adaevolve-objectives-parallel", "adaevolve", {"objectives": OBJECTIVES}, parallel=3),
    Flow("default-novelty", frontmatter=NOVELTY),
    Flow("default-novelty-model", frontmatter={
        **NOVELTY, "models": f"[{{model: {EMBEDDER}, role: embedding, input-cost-per-token: {PRICE}}}]"}),
    Flow("adaevolve-novelty", "adaevolve", NOVELTY),
]


def _install(repo: Path, run_git: Callable[..., str], flow: Flow, seed: int) -> None:
    head = {"proposer": "tune", "seed": str(seed), **flow.frontmatter}
    files = {"program.md": program_md("Knobs", "Tune three knobs.", frontmatter=head),
             "code/value.py": TARGET, "code/evaluate.py": EVALUATE}
    if flow.strategy is None:
        for path, text in files.items():
            (repo / FOLDER / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / FOLDER / path).write_text(text, encoding="utf-8")
        run_git(repo, "add", "-A")
        run_git(repo, "commit", "-qm", "program")
        return
    install_tiny_strategy_program(repo, run_git, FOLDER, flow.strategy, files, CONFIGS.get(flow.strategy, ""))
    if flow.strategy == "funsearch":  # the playbook names the one function a version rewrites
        playbook = repo / FOLDER / "strategy/funsearch.md"
        lines = playbook.read_text(encoding="utf-8").splitlines(keepends=True)
        lines = [f"| function_to_evolve | knobs |{line.split('|')[3]}|\n" if line.startswith("| function_to_evolve")
                 else line for line in lines]
        playbook.write_text("".join(lines), encoding="utf-8")
        run_git(repo, "commit", "-qam", "the function to evolve")


EVOLVE_EVERY = 4
HAND_INSTRUCTION = "Nudge a up a little."
GUIDE_REPLY = "Here is one.\nINSTRUCTION: ## Nudge a up | by a quarter\n"
_A_RE = re.compile(r"^    a = (-?[0-9.e+-]+)$", re.MULTILINE)


def scripted(body: dict[str, Any]) -> str:
    """The scripted model: told to nudge, it moves A a quarter toward 3.7 (kept); else it moves B away (rejected)."""
    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user")
    if "INSTRUCTION: <the new instruction>" in prompt:
        return GUIDE_REPLY
    found = _A_RE.search(prompt)
    assert found, prompt[-800:]
    a = float(found.group(1))
    if "## Instruction\n\nNudge a up" in prompt:
        change = f"    a = {found.group(1)}\n", f"    a = {a + 0.25 if a < 3.6 else a - 0.05:g}\n"
    else:
        change = "    return a, b, 3\n", "    return a, b + 1, 3\n"
    return (f"SUMMARY: scripted\n\n{VALUE}\n<<<<<<< SEARCH\n{change[0]}=======\n{change[1]}>>>>>>> REPLACE\n")


def _check_prompts(state: statefile.StateFile, memory: MemoryStore, edited: bool) -> None:
    """Every iteration names the variant it drew, in its history entry and trace row, and the table credits it."""
    rows = {row.name: row for row in statefile.prompts_of(state).rows}
    assert sum(row.calls for row in rows.values()) == state.machine.iteration_count
    detailed = [e for e in state.history if e.is_detailed]
    drawn = {e.iteration: re.search(r"^- \*\*Prompt\*\*: (\S+)$", e.text, re.MULTILINE) for e in detailed}
    assert all(found is not None and found.group(1) in rows for found in drawn.values()), drawn
    trace = memory_trace(memory.read, memory.list(f"traces/{NAME}/"), NAME, "score", "higher").rows
    named = {row.iteration_found: row.extra.get("metadata", {}).get("prompt") for row in trace}
    assert {i: found.group(1) for i, found in drawn.items() if found} == {i: named[i] for i in drawn}
    kept = sum(row.accepted for row in rows.values())  # all-time, so compared with the trace, not the folded history
    assert kept == sum(1 for row in trace if row.status == "accepted" and row.iteration_found)
    written = [name for name in rows if re.fullmatch(r"p\d+", name)]
    assert written == [f"p{i}" for i in range(EVOLVE_EVERY, state.machine.iteration_count + 1, EVOLVE_EVERY)]
    assert all(rows[name].instruction == "Nudge a up | by a quarter" for name in written)
    newest = f"p{state.machine.iteration_count}"
    if edited and rows["hand"].calls == 0:  # never drawn, so drawn first: unless the guide wrote one this iteration
        assert newest in rows and rows[newest].calls == 1, rows
    for name, row in rows.items():  # each variant is credited with the kept candidates its draws gave
        assert row.accepted == sum(1 for t in trace if t.status == "accepted" and named.get(t.iteration_found) == name)


class _Rendered:
    """Stands for state/file.py in recording.py: every state rendered there is checked against its parse."""

    def __init__(self) -> None:
        self.mismatches: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(statefile, name)

    def render_state(self, state: statefile.StateFile) -> str:
        text = statefile.render_state(state)
        again = statefile.parse_state(text, state.path)
        if again != state:
            differ = [f"{a.key}: {a!r} != {b!r}" for a, b in zip(state.sections, again.sections) if a != b]
            self.mismatches.append("; ".join(differ)[:2000] or "the sections differ in number")
        return text


@dataclass
class _Kept:
    """What the harness saw kept so far, in iteration order."""

    metrics: list[float] = field(default_factory=list)
    values: list[dict[str, float]] = field(default_factory=list)
    seen: int = 0
    # Under `novelty: embedding`: the iterations checked, the skipped ones, and the embedding requests made so far.
    screened: int = 0
    skipped: list[int] = field(default_factory=list)
    requests: int = 0


def _show(repo: Path, rev: str) -> str | None:
    done = subprocess.run(["git", "show", f"{rev}:{VALUE}"], cwd=repo, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def _objectives(entry_text: str, label: str) -> dict[str, float] | None:
    for line in entry_text.splitlines():
        if line.strip().startswith(f"- **{label}**:"):
            return pareto.parse_values(line.split(":", 1)[1])
    return None


def _check(repo: Path, memory: MemoryStore, flow: Flow, kept: _Kept, rendered: _Rendered) -> None:
    text = memory.read(f"{NAME}.md") or ""
    state = statefile.parse_state(text, f"{NAME}.md")
    assert statefile.render_state(state) == text
    assert rendered.mismatches == [], rendered.mismatches[0]
    machine = state.machine
    objectives = "objectives" in flow.frontmatter
    # Every iteration of this run, oldest first, still detailed.
    new = sorted((e for e in state.history if e.is_detailed and e.iteration and e.iteration > kept.seen),
                 key=lambda e: e.iteration or 0)
    assert [e.iteration for e in new] == list(range(kept.seen + 1, machine.iteration_count + 1))
    if not kept.metrics and machine.initial_metric is not None:
        kept.metrics.append(machine.initial_metric)
        kept.values.append(measure(_show(repo, "main") or ""))
    for entry in new:
        baseline = _objectives(entry.text, "Baseline objectives")
        if baseline is not None and baseline not in kept.values:
            kept.values.append(baseline)
        if entry.status != "accepted":
            continue
        assert entry.metric is not None
        if objectives:
            values = _objectives(entry.text, "Objectives")
            assert values is not None
            for before in kept.values:
                assert not _dominates(before, values) and before != values, (
                    f"iteration {entry.iteration} kept {values}, dominated by {before} kept before it")
            kept.values.append(values)
        else:
            assert entry.metric > max(kept.metrics), (
                f"iteration {entry.iteration} kept {entry.metric}, not better than {max(kept.metrics)}")
        kept.metrics.append(entry.metric)
    kept.seen = machine.iteration_count
    # Best Metric is the best kept; the branch's tip holds the candidate the state names best.
    assert machine.best_metric == max(kept.metrics)
    tip = _show(repo, f"autoloop/{NAME}") or _show(repo, "main") or ""
    if objectives:
        front = [dict(member) for member in machine.kept_front]
        assert measure(tip) in front, f"the tip {measure(tip)} is not on the Kept Front {front}"
        assert all(any(_dominates(m, v) or m == v for m in front) for v in kept.values)
    else:
        assert measure(tip)["score"] == machine.best_metric
    # The trace has a row for every iteration; the kept ones say so, with the history's metric.
    rows = memory_trace(memory.read, memory.list(f"traces/{NAME}/"), NAME, "score", "higher").rows
    accepted = {r.iteration_found: r.metrics.get("score") for r in rows if r.status == "accepted" and r.iteration_found}
    detailed = {e.iteration: e for e in state.history if e.is_detailed}
    assert {i: m for i, m in accepted.items() if i in detailed} == {
        i: e.metric for i, e in detailed.items() if e.status == "accepted"}
    assert len(accepted) == len(kept.metrics) - 1
    if flow.prompts:
        _check_prompts(state, memory, "`hand`" in text)
    if flow.strategy is not None:
        population = population_of(state, memory.read)
        fitness = [c.fitness for c in population.candidates if c.fitness is not None and c.status != "error"]
        if fitness and not objectives:
            assert max(fitness) <= machine.best_metric


def _dominates(a: dict[str, float], b: dict[str, float]) -> bool:
    return pareto.dominates((a["score"], -a["cost"]), (b["score"], -b["cost"]))


_SIMILAR_RE = re.compile(r"not evaluated: similarity ([0-9.]+) to candidate (\S+) is above novelty-threshold ([0-9.]+) "
                         r"\((\S+) vectors\)")
_COST_RE = re.compile(r"^- \*\*Cost\*\*: (\d+) tokens", re.MULTILINE)


def _check_novelty(repo: Path, memory: MemoryStore, flow: Flow, kept: _Kept, server: Any) -> None:
    """A skipped candidate was neither evaluated nor committed; its history entry and trace row name the nearest
    evaluated candidate and a similarity above the threshold, the one their sources give; an evaluated one lies at
    or below it from its parent (default flow); embedding calls are spent."""
    threshold = flow.threshold
    assert threshold is not None
    state = statefile.parse_state(memory.read(f"{NAME}.md") or "", f"{NAME}.md")
    rows = memory_trace(memory.read, memory.list(f"traces/{NAME}/"), NAME, "score", "higher").rows
    by_iteration, by_id = {row.iteration_found: row for row in rows}, {row.id: row for row in rows}
    population = {str(c.id): c for c in population_of(state, memory.read).candidates}
    branch = subprocess.run(["git", "rev-list", f"main..autoloop/{NAME}"], cwd=repo, capture_output=True, text=True)
    committed = {_show(repo, sha) for sha in branch.stdout.split()}
    new = [e for e in state.history if e.is_detailed and e.iteration and e.iteration > kept.screened]
    for entry in new:
        row = by_iteration[entry.iteration]
        verdict = row.extra.get("metadata", {}).get("novelty")
        found = _SIMILAR_RE.search(entry.text)
        if verdict is None or verdict["evaluated"]:
            assert found is None and row.metrics, entry.text
            parent = by_id.get(row.parent_id or "")
            if flow.strategy is None and parent is not None and "score" in parent.metrics:  # always a neighbour
                assert _similarity(_blob(memory, row), _blob(memory, parent)) <= threshold, (
                    f"iteration {entry.iteration} was evaluated, too similar to its parent {parent.id}")
            continue
        source = _blob(memory, row)
        assert source not in committed, f"iteration {entry.iteration} was not evaluated, but committed: {source}"
        kept.skipped.append(entry.iteration)
        if verdict["verdict"] != "similar":  # a repeat (its result reused) or recycled lines
            continue
        assert found is not None and entry.status == "rejected" and entry.metric is None, entry.text
        assert row.metrics == {} and "artifacts" not in row.extra, row
        assert all(c.code != source for c in population.values()), "a skipped candidate joined the Population"
        similarity = verdict["similarity"]
        assert verdict == {"verdict": "similar", "evaluated": False, "of": found.group(2), "similarity": similarity,
                           "threshold": threshold, "embedder": EMBEDDER if flow.embeds else "local"}
        assert found.groups() == (f"{similarity:.4f}", verdict["of"], f"{threshold:g}", verdict["embedder"])
        assert similarity > threshold
        # The nearest was evaluated and scored, and the two sources give the similarity recorded.
        if flow.strategy is not None:
            nearest = population[verdict["of"]]
            assert nearest.fitness is not None and nearest.code is not None
            code = nearest.code
        else:
            assert "score" in by_id[verdict["of"]].metrics
            code = _blob(memory, by_id[verdict["of"]])
        assert _similarity(source, code) == pytest.approx(similarity, abs=1e-6)
    requests = server.requests if server is not None else 0
    spent = state.machine.spent
    if flow.embeds:  # each iteration embeds its candidate at least: its Cost, Spent and the Models table count them
        assert all("input" in body for body in server.bodies), "a request other than an embedding one"
        tokens = [int(found.group(1)) if (found := _COST_RE.search(e.text)) else 0 for e in new]
        assert min(tokens) >= TOKENS and sum(tokens) == (requests - kept.requests) * TOKENS, tokens
        assert spent is not None and spent.tokens == requests * TOKENS
        assert spent.usd == pytest.approx(spent.tokens * PRICE)
        model = {row.name: row for row in statefile.models_of(state).rows}[EMBEDDER]
        assert (model.calls, model.tokens, model.usd) == (0, spent.tokens, pytest.approx(spent.usd))
    else:  # local code vectors cost nothing
        assert (spent is None or spent.tokens == 0) and not any(_COST_RE.search(e.text) for e in new)
    kept.requests = requests
    kept.screened = state.machine.iteration_count


def _similarity(one: str, other: str) -> float:
    return code_vector.cosine(*(code_vector.vector(evolved_code(text)) for text in (one, other)))


def _blob(memory: MemoryStore, row: Any) -> str:
    text = memory.read(f"traces/{NAME}/" + blob_path(row.solution_sha256, ".txt"))
    assert text is not None, row
    return text


def _check_skips_shown(repo: Path, memory: MemoryStore, state: statefile.StateFile, kept: _Kept,
                       capsys: pytest.CaptureFixture[str]) -> None:
    """The flow skipped some candidates and kept some; `status` and the report's data list the skips."""
    assert kept.skipped and len(kept.metrics) > 1, f"skipped {kept.skipped}, kept {kept.metrics[1:]}"
    detailed = [e.iteration for e in state.history if e.is_detailed]
    assert main(["status", NAME, "--repo", str(repo)]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    counted = len([i for i in kept.skipped if i in detailed])  # none among the latest: status says nothing of skips
    said = f"Not evaluated (novelty filter): {counted} of the last {len(detailed)} iterations" if counted else ""
    assert said in shown and (counted or "Not evaluated" not in shown), shown
    trace = memory_trace(memory.read, memory.list(f"traces/{NAME}/"), NAME, "score", "higher")
    assert [skip["it"] for skip in skipped_data(trace)] == kept.skipped


def _hand_edit(memory: MemoryStore) -> None:
    """Adds a Current Priority, edits a Population note and adds a Prompts variant, as a person would with
    `autoloop edit`."""
    def change(text: str | None) -> str:
        assert text is not None
        heading = "## 🎯 Current Priorities"
        assert heading in text
        edited = text.replace(heading, f"{heading}\n\n- Keep the third knob an integer.", 1)
        row = f"| `hand` | — | 0 | 0 | 0 | 0 | {HAND_INSTRUCTION} |\n"
        edited = re.sub(r"^(\| Variant \|.*\n\|[-|]+\|\n)", rf"\1{row}", edited, count=1, flags=re.MULTILINE)
        return edited.replace("- **Notes**:", "- **Notes**: (a person read this) ", 1)

    memory.update(f"{NAME}.md", change, "a person's edit")


@pytest.mark.parametrize("flow", FLOWS, ids=[f.name for f in FLOWS])
def test_kept_means_better(flow: Flow, git_repo: Path, run_git, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                           capsys: pytest.CaptureFixture[str]) -> None:
    _install(git_repo, run_git, flow, seed=sum(map(ord, flow.name)))
    stack = ExitStack()
    server = None
    if flow.prompts or flow.embeds:
        import_litellm()  # once per test process: then `run` calls the model here, starting no worker of its own
        monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
        server = stack.enter_context(fake_openai("reply", monkeypatch, scripted, TOKENS, _embed))
    with stack:
        _run_flow(flow, git_repo, monkeypatch, capsys, server)


def _embed(text: str) -> list[float]:
    """The loopback embedding model: the local code vector, so its skips are those the threshold promises."""
    return list(code_vector.vector(text))


def _run_flow(flow: Flow, git_repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
              server: Any) -> None:
    rendered = _Rendered()
    monkeypatch.setattr(recording, "statefile", rendered)
    memory = MemoryStore(git_repo)
    kept = _Kept()
    step = max(flow.parallel, flow.per_run)
    started = time.monotonic()
    for done in range(0, ITERATIONS, step):
        if done // step == ITERATIONS // step // 2:
            _hand_edit(memory)
        argv = ["run", "--repo", str(git_repo), "--program", NAME, "--iterations", str(step)]
        code = main(argv + (["--parallel", str(step)] if flow.parallel > 1 else []))
        said = capsys.readouterr()
        assert code == 0, f"{said.out[-3000:]}\n{said.err[-3000:]}"
        _check(git_repo, memory, flow, kept, rendered)
        if flow.threshold is not None:
            _check_novelty(git_repo, memory, flow, kept, server)
    state = statefile.parse_state(memory.read(f"{NAME}.md") or "")
    if flow.threshold is not None:
        _check_skips_shown(git_repo, memory, state, kept, capsys)
    assert state.machine.iteration_count >= ITERATIONS and "Keep the third knob an integer." in (state.section_text(
        statefile.PRIORITIES) or "")
    print(json.dumps({"flow": flow.name, "iterations": state.machine.iteration_count, "kept": len(kept.metrics) - 1,
                      "skipped": len(kept.skipped),
                      "seconds": round(time.monotonic() - started, 1), "best": state.machine.best_metric}))
