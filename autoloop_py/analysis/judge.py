"""The LLM-as-judge edit taxonomy: nine edit labels, the judge's prompt and reply, its cache, retries and summaries.

One judgement per parent→child edit whose sources differ (EvoReplay's `edit_taxonomy`). The reply must
be a JSON object `{"labels": [...], "rationale": "..."}` using only the taxonomy's keys; an invalid
reply or a failed call is retried, and only valid verdicts are cached, keyed by sha256(model, prompt).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import re
import statistics
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any, Callable, Sequence

from autoloop_py.analysis import oriented
from autoloop_py.errors import error_line
from autoloop_py.render import render
from autoloop_py.state.trace import Trace

logger = logging.getLogger(__name__)

TEMPLATE = "judge_prompt.md.j2"
MAX_DIFF = 16_000
DIFF_HALF = 8_000
MAX_RATIONALE = 500
CPP_HINTS = ("#include", "::", "int main(")
# (model, prompt) -> the model's reply text.
Complete = Callable[[str, str], str]


@dataclass(frozen=True)
class Label:
    """One edit category of the taxonomy, as the judge is told about it.

    Attributes:
        key: the exact key the judge must return.
        title: a short human name.
        definition: what the category means.
        positive: cues that the label applies.
        negative: cues that another label fits better.
        example: a canonical diff.
        impact: the typical score impact, for breaking ties only.
    """

    key: str
    title: str
    definition: str
    positive: tuple[str, ...]
    negative: tuple[str, ...]
    example: str
    impact: str


TAXONOMY: tuple[Label, ...] = (
    Label("bug_fix", "Bug fix",
          "Corrects a latent defect: a missing guard, a wrong sign, an off-by-one, a mishandled sentinel.",
          ("a crash, NaN, overflow or out-of-bounds case is now handled", "an index, bound or comparison is corrected"),
          ("correct behaviour is changed to score better (local_refinement)",),
          "-    for i in range(1, n):\n+    for i in range(n):\n", "large when the parent failed, else small"),
    Label("external_dependency", "External dependency", "Introduces or removes an import of an external library.",
          ("a new import of a library (numpy, scipy, jax, a solver) is used",
           "a library import is dropped with its use"),
          ("imports are only reordered or regrouped (refactor)",),
          "+import numpy as np\n-    total = sum(values)\n+    total = np.sum(values)\n",
          "often large when the library brings a stronger method"),
    Label("architectural_change", "Architectural change",
          "Replaces a core algorithmic block with a substantively different approach.",
          ("the main search or construction is rewritten with another method", "most of the old block is deleted"),
          ("the old approach stays and a new one runs beside it (composition)",),
          "-    for _ in range(steps):\n-        x = x + rng.uniform(-step, step)\n"
          "+    simplex = initial_simplex(x)\n+    for _ in range(steps):\n"
          "+        simplex = nelder_mead_step(simplex)\n",
          "large, in either direction"),
    Label("composition", "Composition",
          "Adds a new component (operator, phase, branch) beside an existing one; the existing logic is kept.",
          ("a new phase runs before or after the existing one", "a new move is chosen with some probability"),
          ("the old component is removed or replaced (architectural_change)",),
          "     best = anneal(x0)\n+    best = local_polish(best)\n", "moderate gains"),
    Label("local_refinement", "Local refinement",
          "A targeted edit inside an existing routine; the routine's role and structure are kept.",
          ("a condition, expression or update rule inside one function is adjusted", "a few lines change in one place"),
          ("only literals change (hyperparameter_tuning)", "the routine is replaced wholesale (architectural_change)"),
          "-        if new < current:\n+        if new < current or rng.random() < math.exp((current - new) / t):\n",
          "small to moderate"),
    Label("pruning", "Pruning", "Removes a code path, phase or feature; the rest of the program stays intact.",
          ("a whole phase, option or helper is deleted", "a branch that never helps is dropped"),
          ("deleted code is replaced by a new approach (architectural_change)",
           "code is moved, not removed (refactor)"),
          "     best = anneal(x0)\n-    best = shake(best)\n     return best\n", "small; may free time for the rest"),
    Label("refactor", "Refactor",
          "Restructures code without changing behaviour: renaming, reordering, extracting helpers, "
          "moving declarations.",
          ("a block becomes a function with the same effect", "names change consistently", "a definition is moved"),
          ("anything that changes the output (use the label that describes that change)",),
          "-    d = ((x1 - x2) ** 2 + (y1 - y2) ** 2) ** 0.5\n+    d = distance((x1, y1), (x2, y2))\n",
          "none expected"),
    Label("efficiency", "Efficiency",
          "The same input-output behaviour at a lower asymptotic or constant cost (batching, vectorization, "
          "partial sorts, caching).",
          ("a loop becomes a vectorized call", "results are cached or work that cannot matter is skipped"),
          ("the program's output changes (label that change instead)",),
          "-    d = [dist(p, q) for p in pts for q in pts]\n+    d = cdist(pts, pts)\n",
          "gains when the evaluation has a time or call budget"),
    Label("hyperparameter_tuning", "Hyperparameter tuning",
          "Changes one or more numeric literals or configuration values; control flow and algorithm are unchanged.",
          ("only numbers change: thresholds, iteration counts, step sizes, weights, rates",),
          ("a new loop, branch or call appears (composition or local_refinement)",),
          "-    cooling_rate = 0.995\n+    cooling_rate = 0.9995\n", "small, frequent gains or losses"),
)
KEYS = tuple(label.key for label in TAXONOMY)


@dataclass(frozen=True)
class EditPair:
    """One parent→child edit to judge.

    Attributes:
        child_id: the child's row id.
        parent_id: the parent's row id.
        iteration: the child's iteration_found.
        parent_iteration: the parent's iteration_found.
        language: the source language shown to the judge.
        diff: the unified diff (3 lines of context, no file headers), cut to MAX_DIFF characters.
        score: the child's primary score (None when invalid).
        parent_score: the parent's primary score (None when invalid).
        score_change: oriented child − parent score (positive = better), None when either is unknown.
    """

    child_id: str
    parent_id: str
    iteration: int
    parent_iteration: int
    language: str
    diff: str
    score: float | None
    parent_score: float | None
    score_change: float | None


@dataclass(frozen=True)
class Verdict:
    """A valid judge reply.

    Attributes:
        labels: taxonomy keys, deduplicated, in reply order (may be empty).
        rationale: the one-sentence reason, cut to MAX_RATIONALE characters.
    """

    labels: tuple[str, ...]
    rationale: str


@dataclass(frozen=True)
class Judgement:
    """The outcome of judging one edit.

    Attributes:
        edit: the edit judged.
        labels: the verdict's labels (empty when it failed).
        rationale: the verdict's rationale ('' when it failed).
        cache_hit: the verdict came from the cache.
        error: why no valid verdict was obtained after every attempt, else None.
        attempts: model calls made (0 on a cache hit).
    """

    edit: EditPair
    labels: tuple[str, ...] = ()
    rationale: str = ""
    cache_hit: bool = False
    error: str | None = None
    attempts: int = 0


@dataclass(frozen=True)
class JudgeSettings:
    """How the judge is run.

    Attributes:
        model: the litellm model that judges.
        retries: extra attempts after a failed call or an invalid reply.
        backoff: seconds before the first retry of a failed call; doubled for each further retry.
        concurrency: how many edits are judged at once.
        show_scores: whether the prompt tells the judge the score change (EvoReplay's judge never sees it).
    """

    model: str
    retries: int = 3
    backoff: float = 1.0
    concurrency: int = 4
    show_scores: bool = False


class InvalidVerdict(ValueError):
    """A judge reply that is not a valid verdict; the message says what is wrong."""


def unified_diff(parent: str, child: str) -> str:
    """Returns the diff from parent to child with 3 lines of context, without file headers, cut when long."""
    lines = list(difflib.unified_diff(parent.splitlines(), child.splitlines(), n=3, lineterm=""))[2:]
    text = "".join(line + "\n" for line in lines)
    if len(text) <= MAX_DIFF:
        return text
    omitted = len(text) - 2 * DIFF_HALF
    return f"{text[:DIFF_HALF]}\n[... {omitted} characters of the diff omitted ...]\n{text[-DIFF_HALF:]}"


def language_of(source: str, declared: str) -> str:
    """Returns the declared language, or C++ when an undeclared (python) source looks like C++."""
    if declared and declared != "python":
        return declared
    return "cpp" if any(hint in source[:2000] for hint in CPP_HINTS) else "python"


def edits_of(trace: Trace) -> list[EditPair]:
    """Returns the trace's parent→child edits whose two sources are saved and whose lines differ, in trace order."""
    by_id = {row.id: row for row in trace.rows}
    pairs: list[EditPair] = []
    for row in trace.rows:
        parent = by_id.get(row.parent_id or "")
        child_source = trace.source(row)
        parent_source = trace.source(parent) if parent is not None else None
        if parent is None or child_source is None or parent_source is None:
            continue
        diff = unified_diff(parent_source, child_source)
        if not diff:
            continue
        score, parent_score = trace.score(row), trace.score(parent)
        change = None if score is None or parent_score is None else (
            oriented(score, trace.direction) - oriented(parent_score, trace.direction))
        pairs.append(EditPair(row.id, parent.id, row.iteration_found, parent.iteration_found,
                              language_of(child_source, row.language), diff,
                              score, parent_score, change))
    return pairs


def render_prompt(edit: EditPair, show_scores: bool = False) -> str:
    """Returns the judge's prompt for one edit."""
    texts = [edit.diff, *(label.example for label in TAXONOMY)]
    longest = max((len(run) for text in texts for run in re.findall(r"`+", text)), default=0)
    return render(TEMPLATE, labels=TAXONOMY, keys=KEYS, language=edit.language, diff=edit.diff,
                  fence="`" * max(3, longest + 1), score_change=edit.score_change if show_scores else None)


def parse_verdict(text: str) -> Verdict:
    """Returns the verdict in a reply's first JSON object; raises InvalidVerdict naming the problem."""
    found = _first_object(text)
    if found is None:
        raise InvalidVerdict("the reply holds no JSON object")
    labels, rationale = found.get("labels"), found.get("rationale")
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise InvalidVerdict('"labels" must be a list of label keys')
    unknown = [label for label in labels if label not in KEYS]
    if unknown:
        raise InvalidVerdict(f"unknown label {unknown[0]!r}; use only {', '.join(KEYS)}")
    if not isinstance(rationale, str):
        raise InvalidVerdict('"rationale" must be a string')
    return Verdict(tuple(dict.fromkeys(labels)), rationale.strip()[:MAX_RATIONALE])


def _first_object(text: str) -> dict[str, Any] | None:
    """Returns the first JSON object in text, else None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            found, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    return None


def cache_key(model: str, prompt: str) -> str:
    """Returns the cache key of a judgement: sha256 of model, NUL, prompt."""
    return hashlib.sha256(f"{model}\0{prompt}".encode("utf-8")).hexdigest()


class VerdictCache:
    """Valid verdicts on disk, one JSON file per key at `<dir>/<key[:2]>/<key>.json`."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def get(self, key: str) -> Verdict | None:
        """Returns the cached verdict, None when absent or unreadable."""
        path = self._path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return Verdict(tuple(str(label) for label in data["labels"]), str(data["rationale"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as err:
            logger.warning("ignoring unreadable judge cache entry %s: %s", path, err)
            return None

    def put(self, key: str, model: str, verdict: Verdict) -> None:
        """Stores a verdict; written to a temporary file and renamed, so readers never see half a file."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"model": model, "labels": list(verdict.labels), "rationale": verdict.rationale}
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, ensure_ascii=False)
        os.replace(temporary, path)

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"


def judge_edit(
    edit: EditPair, settings: JudgeSettings, complete: Complete, cache: VerdictCache | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Judgement:
    """Returns the judgement of one edit: cached, or asked with retries (backoff after a failed call)."""
    prompt = render_prompt(edit, settings.show_scores)
    key = cache_key(settings.model, prompt)
    cached = cache.get(key) if cache is not None else None
    if cached is not None:
        return Judgement(edit, cached.labels, cached.rationale, cache_hit=True)
    problem = ""
    for attempt in range(settings.retries + 1):
        try:
            text = complete(settings.model, prompt)
        except Exception as err:  # litellm raises provider-specific types; all of them are retried
            problem = f"the model call failed: {error_line(err)}"
            if attempt < settings.retries:
                sleep(settings.backoff * 2**attempt)
            continue
        try:
            verdict = parse_verdict(text)
        except InvalidVerdict as err:
            problem = f"invalid reply: {err}"
            continue
        if cache is not None:
            cache.put(key, settings.model, verdict)
        return Judgement(edit, verdict.labels, verdict.rationale, attempts=attempt + 1)
    logger.warning("no verdict for %s after %d attempts: %s", edit.child_id, settings.retries + 1, problem)
    return Judgement(edit, error=problem, attempts=settings.retries + 1)


def judge_all(
    edits: Sequence[EditPair], settings: JudgeSettings, complete: Complete, cache: VerdictCache | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Judgement]:
    """Returns the judgements of every edit, in order, judging at most `settings.concurrency` at once."""
    with ThreadPoolExecutor(max_workers=max(1, settings.concurrency)) as pool:
        return list(pool.map(lambda edit: judge_edit(edit, settings, complete, cache, sleep), edits))


def summarize(judgements: Sequence[Judgement]) -> dict[str, Any]:
    """Returns per-label prevalence, mean/median score change and odds ratio of improving, plus counts."""
    judged = [j for j in judgements if j.error is None]
    return {
        "n_edits": len(judgements),
        "n_judged": len(judged),
        "n_failed": len(judgements) - len(judged),
        "n_cache_hits": sum(j.cache_hit for j in judgements),
        "mean_labels": statistics.fmean(len(j.labels) for j in judged) if judged else None,
        "multi_label_share": sum(len(j.labels) > 1 for j in judged) / len(judged) if judged else None,
        "labels": {key: _label_summary(key, judged) for key in KEYS},
        "co_occurrence": _pairs(judged),
    }


def _label_summary(key: str, judged: Sequence[Judgement]) -> dict[str, Any]:
    """Returns one label's count, prevalence, score change statistics and odds ratio of a positive change."""
    carrying = [j for j in judged if key in j.labels]
    changes = [j.edit.score_change for j in carrying if j.edit.score_change is not None]
    return {
        "count": len(carrying),
        "prevalence": len(carrying) / len(judged) if judged else None,
        "mean_change": statistics.fmean(changes) if changes else None,
        "median_change": statistics.median(changes) if changes else None,
        "odds_ratio_positive": _odds_ratio(key, judged),
    }


def _odds_ratio(key: str, judged: Sequence[Judgement]) -> float | None:
    """Returns ((a+.5)(d+.5)) / ((b+.5)(c+.5)) of label presence against a positive change (None without changes)."""
    known = [j for j in judged if j.edit.score_change is not None]
    if not known:
        return None
    a = sum(key in j.labels and (j.edit.score_change or 0) > 0 for j in known)
    b = sum(key in j.labels and (j.edit.score_change or 0) <= 0 for j in known)
    c = sum(key not in j.labels and (j.edit.score_change or 0) > 0 for j in known)
    d = len(known) - a - b - c
    return ((a + 0.5) * (d + 0.5)) / ((b + 0.5) * (c + 0.5))


def _pairs(judged: Sequence[Judgement], limit: int = 5) -> list[dict[str, Any]]:
    """Returns the most frequent label pairs, most frequent first."""
    counts = Counter(pair for j in judged for pair in combinations(sorted(j.labels, key=KEYS.index), 2))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [{"labels": list(pair), "count": count} for pair, count in ranked]


def judgement_dict(judgement: Judgement) -> dict[str, Any]:
    """Returns one judgement as plain data (EvoReplay's per-edit fields)."""
    edit = judgement.edit
    return {"program_id": edit.child_id, "parent_id": edit.parent_id, "iteration": edit.iteration,
            "parent_iteration": edit.parent_iteration, "score": edit.score, "parent_score": edit.parent_score,
            "score_change": edit.score_change, "labels": list(judgement.labels), "rationale": judgement.rationale,
            "diff_sha": hashlib.sha256(edit.diff.encode("utf-8")).hexdigest(), "cache_hit": judgement.cache_hit,
            "error": judgement.error}
