"""Tests for analysis/judge.py: edits, prompt, reply validation, cache, retries with backoff, concurrency, summaries."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import trace_samples as sample

from autoloop_py.analysis.judge import (
    KEYS,
    MAX_DIFF,
    EditPair,
    InvalidVerdict,
    Judgement,
    JudgeSettings,
    VerdictCache,
    cache_key,
    edits_of,
    judge_all,
    judge_edit,
    language_of,
    parse_verdict,
    render_prompt,
    summarize,
    unified_diff,
)
from autoloop_py.state.trace import load_trace

GOOD = '{"labels": ["hyperparameter_tuning"], "rationale": "Only the rate changes."}'


def _edit(child: str = "c", change: float | None = 1.0) -> EditPair:
    return EditPair(child, "p", 2, 1, "python", "@@ -1 +1 @@\n-rate = 0.1\n+rate = 0.2\n", 2.0, 1.0, change)


class Model:
    """A fake judge model: answers from a script (an Exception is raised), counting calls."""

    def __init__(self, *replies: str | Exception) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[str, str]] = []

    def __call__(self, model: str, prompt: str) -> str:
        self.calls.append((model, prompt))
        reply = self.replies[min(len(self.calls), len(self.replies)) - 1]
        if isinstance(reply, Exception):
            raise reply
        return reply


def test_nine_labels() -> None:
    assert KEYS == ("bug_fix", "external_dependency", "architectural_change", "composition", "local_refinement",
                    "pruning", "refactor", "efficiency", "hyperparameter_tuning")


def test_edits_of_the_sample_run(tmp_path: Path) -> None:
    edits = edits_of(load_trace(sample.write_run(tmp_path / "run")))
    assert [(e.child_id, e.parent_id) for e in edits] == [("B", "A"), ("E", "A"), ("C", "B"), ("F", "E"), ("D", "C")]
    by_child = {e.child_id: e for e in edits}
    assert by_child["B"].score_change == 1.0 and by_child["F"].score_change is None
    assert by_child["C"].diff == (
        "@@ -1,4 +1,4 @@\n import math\n-rate = 0.25\n+rate = 0.5\n value = fallback(x)\n result = value * rate\n"
    )
    assert {e.language for e in edits} == {"python"}


def test_unified_diff_keeps_the_ends_of_a_long_diff() -> None:
    parent = "".join(f"line {i}\n" for i in range(3000))
    diff = unified_diff(parent, parent.replace("line", "LINE"))
    assert len(diff) < MAX_DIFF + 100 and "characters of the diff omitted ...]" in diff
    assert diff.startswith("@@ ") and diff.endswith("+LINE 2999\n")


def test_language_of() -> None:
    assert language_of("#include <vector>\nint main() {}\n", "python") == "cpp"
    assert language_of("import os\n", "python") == "python"
    assert language_of("fn main() {}", "rust") == "rust"


def test_the_prompt_shows_the_taxonomy_and_the_diff_but_no_score_by_default() -> None:
    prompt = render_prompt(_edit(change=0.5))
    assert all(f"### `{key}`" in prompt for key in KEYS)
    assert "```diff\n@@ -1 +1 @@\n-rate = 0.1\n+rate = 0.2\n```" in prompt and "Language: python" in prompt
    assert "Score change" not in prompt
    assert "Score change (positive is better): +0.5\n" in render_prompt(_edit(change=0.5), show_scores=True)


def test_a_diff_holding_a_fence_gets_a_longer_one() -> None:
    edit = EditPair("c", "p", 1, 0, "python", '-x = """```"""\n+x = 1\n', None, None, None)
    assert "````diff\n-x = \"\"\"```" in render_prompt(edit)


def test_parse_verdict_reads_the_first_object_and_tidies_it() -> None:
    reply = ('Here you go:\n{"labels": ["bug_fix", "composition", "bug_fix"], "rationale": "' + "x" * 600 + '"}\n'
             '{"labels": ["refactor"], "rationale": "second"}')
    verdict = parse_verdict(reply)
    assert verdict.labels == ("bug_fix", "composition") and verdict.rationale == "x" * 500
    assert parse_verdict('{"labels": [], "rationale": "comments only"}').labels == ()


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("no json here", "the reply holds no JSON object"),
        ('["bug_fix"]', "the reply holds no JSON object"),
        ('{"labels": "bug_fix", "rationale": "r"}', '"labels" must be a list of label keys'),
        ('{"labels": [1], "rationale": "r"}', '"labels" must be a list of label keys'),
        ('{"rationale": "r"}', '"labels" must be a list of label keys'),
        ('{"labels": ["speedup"], "rationale": "r"}', "unknown label 'speedup'; use only bug_fix, "),
        ('{"labels": ["Bug_Fix"], "rationale": "r"}', "unknown label 'Bug_Fix'"),
        ('{"labels": ["bug_fix"]}', '"rationale" must be a string'),
        ('{"labels": ["bug_fix"], "rationale": null}', '"rationale" must be a string'),
    ],
    ids=["prose", "array", "labels-string", "labels-numbers", "no-labels", "unknown", "case", "no-rationale", "null"],
)
def test_parse_verdict_rejects_bad_replies(reply: str, message: str) -> None:
    with pytest.raises(InvalidVerdict) as caught:
        parse_verdict(reply)
    assert str(caught.value).startswith(message)


def test_a_cache_hit_avoids_a_second_call(tmp_path: Path) -> None:
    model, cache = Model(GOOD), VerdictCache(tmp_path / "cache")
    settings = JudgeSettings("judge/model")
    first = judge_edit(_edit(), settings, model, cache)
    second = judge_edit(_edit(), settings, model, cache)
    assert len(model.calls) == 1
    assert (first.labels, first.cache_hit, first.attempts) == (("hyperparameter_tuning",), False, 1)
    assert (second.labels, second.rationale, second.cache_hit) == (("hyperparameter_tuning",), "Only the rate changes.", True)
    key = cache_key("judge/model", render_prompt(_edit()))
    stored = json.loads((tmp_path / "cache" / key[:2] / f"{key}.json").read_text())
    assert stored == {"model": "judge/model", "labels": ["hyperparameter_tuning"], "rationale": "Only the rate changes."}
    judge_edit(_edit(), JudgeSettings("other/model"), model, cache)
    assert len(model.calls) == 2  # the key holds the model


def test_failed_calls_are_retried_with_exponential_backoff() -> None:
    slept: list[float] = []
    model = Model(RuntimeError("rate limit"), RuntimeError("rate limit"), GOOD)
    judgement = judge_edit(_edit(), JudgeSettings("m", backoff=0.5), model, sleep=slept.append)
    assert (judgement.labels, judgement.error, judgement.attempts) == (("hyperparameter_tuning",), None, 3)
    assert slept == [0.5, 1.0]


def test_an_invalid_reply_is_retried_and_a_lasting_failure_is_not_cached(tmp_path: Path) -> None:
    slept: list[float] = []
    retried = judge_edit(_edit(), JudgeSettings("m"), Model('{"labels": ["x"]}', GOOD), sleep=slept.append)
    assert (retried.labels, retried.attempts, slept) == (("hyperparameter_tuning",), 2, [])
    cache = VerdictCache(tmp_path / "cache")
    failed = judge_edit(_edit(), JudgeSettings("m", retries=2), Model(RuntimeError("down\nmore")), cache, slept.append)
    assert (failed.labels, failed.attempts, failed.error) == ((), 3, "the model call failed: down")
    assert slept == [1.0, 2.0] and not (tmp_path / "cache").exists()
    invalid = judge_edit(_edit(), JudgeSettings("m", retries=1), Model("nope"), cache, slept.append)
    assert invalid.error == "invalid reply: the reply holds no JSON object"


def test_judge_all_respects_the_concurrency_limit_and_keeps_order() -> None:
    lock = threading.Lock()
    active = [0, 0]  # now, most

    def model(name: str, prompt: str) -> str:
        with lock:
            active[0] += 1
            active[1] = max(active[1], active[0])
        time.sleep(0.03)
        with lock:
            active[0] -= 1
        label = "bug_fix" if "child-3" in prompt else "refactor"
        return json.dumps({"labels": [label], "rationale": "r"})

    edits = [EditPair(f"child-{i}", "p", i, 0, "python", f"+child-{i}\n", None, None, None) for i in range(8)]
    judgements = judge_all(edits, JudgeSettings("m", concurrency=3), model)
    assert [j.edit.child_id for j in judgements] == [e.child_id for e in edits]
    assert judgements[3].labels == ("bug_fix",) and judgements[0].labels == ("refactor",)
    assert 2 <= active[1] <= 3


def test_summarize_a_hand_built_set() -> None:
    judgements = [
        Judgement(_edit("a", 2.0), ("hyperparameter_tuning", "local_refinement")),
        Judgement(_edit("b", -1.0), ("hyperparameter_tuning",)),
        Judgement(_edit("c", 4.0), ("efficiency", "hyperparameter_tuning"), cache_hit=True),
        Judgement(_edit("d", None), ("refactor",)),
        Judgement(_edit("e", 1.0), error="invalid reply: the reply holds no JSON object", attempts=4),
    ]
    summary = summarize(judgements)
    assert (summary["n_edits"], summary["n_judged"], summary["n_failed"], summary["n_cache_hits"]) == (5, 4, 1, 1)
    assert summary["mean_labels"] == 1.5 and summary["multi_label_share"] == 0.5
    tuning = summary["labels"]["hyperparameter_tuning"]
    assert (tuning["count"], tuning["prevalence"], tuning["median_change"]) == (3, 0.75, 2.0)
    assert tuning["mean_change"] == pytest.approx(5 / 3)
    # a=2 (present, Δ>0), b=1 (present, Δ≤0), c=0, d=0 over the 3 edits with a known change
    assert tuning["odds_ratio_positive"] == pytest.approx((2.5 * 0.5) / (1.5 * 0.5))
    refactor = summary["labels"]["refactor"]
    assert (refactor["count"], refactor["prevalence"], refactor["mean_change"]) == (1, 0.25, None)
    assert summary["labels"]["bug_fix"]["count"] == 0
    assert summary["co_occurrence"] == [{"labels": ["efficiency", "hyperparameter_tuning"], "count": 1},
                                        {"labels": ["local_refinement", "hyperparameter_tuning"], "count": 1}]
    assert summarize([])["mean_labels"] is None
