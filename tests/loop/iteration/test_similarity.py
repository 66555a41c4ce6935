"""Tests for similarity.py: a candidate too close to an evaluated one is not evaluated, with local vectors, an
embedding model or a judge (a ModelCalls fake stands in for litellm; the real path is in test_novelty_calls.py)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from autoloop_py.analysis import code_vector
from autoloop_py.errors import ConfigurationError
from autoloop_py.loop.iteration import novelty, similarity
from autoloop_py.loop.iteration.similarity import Embedder, population_neighbours, screen
from autoloop_py.program.models import ModelSpec
from autoloop_py.proposers.llm_call import CallLimits, ModelCallError
from autoloop_py.proposers.model_calls import ModelCheck, Reply, Vectors
from autoloop_py.state import trace
from autoloop_py.state.population import Candidate, Population

EVALUATED = "def f(x):\n    total = 0\n    for i in range(x):\n        total += i * i\n    return total\n"
RENAMED = "def f(n):\n    acc = 0\n    for k in range(n):  # same\n        acc += k * k\n    return acc\n"
OTHER = "def f(x):\n    return sum(i for i in range(x) if i % 3) - x\n"


class _Calls:
    """Answers embedding requests with the given vectors and completions with the given text."""

    def __init__(self, vectors: Callable[[str], list[float]] | Exception = lambda t: [1.0, 0.0], answer: str = "") -> None:
        self.vectors, self.answer = vectors, answer
        self.requests: list[dict[str, Any]] = []

    def embedding(self, kwargs: dict[str, Any], limits: CallLimits) -> Vectors:
        self.requests.append(kwargs)
        if isinstance(self.vectors, Exception):
            raise self.vectors
        maker = self.vectors
        return Vectors(tuple(tuple(maker(text)) for text in kwargs["input"]), 7, 0.001)

    def completion(self, kwargs: dict[str, Any], limits: CallLimits) -> Reply:
        self.requests.append(kwargs)
        return Reply(self.answer, prompt_tokens=30, completion_tokens=5, cost=0.01)

    def check(self, model: str) -> Callable[[], ModelCheck]:
        return ModelCheck


def test_a_renamed_copy_of_an_evaluated_candidate_is_similar_with_local_vectors() -> None:
    verdict, _ = screen(RENAMED, {"it3": OTHER, "it4": EVALUATED}, 0.999, Embedder())
    assert verdict is not None and verdict.skipped
    assert (verdict.kind, verdict.of, verdict.similarity, verdict.embedder) == (novelty.SIMILAR, "it4", 1.0, "local")
    assert verdict.note() == "not evaluated: similarity 1.0000 to candidate it4 is above novelty-threshold 0.999 (local vectors)"
    assert verdict.metadata() == {"verdict": "similar", "evaluated": False, "of": "it4", "similarity": 1.0,
                                  "threshold": 0.999, "embedder": "local"}


def test_a_different_candidate_or_no_neighbour_is_evaluated() -> None:
    assert screen(OTHER, {"it4": EVALUATED}, 0.9, Embedder())[0] is None
    assert screen(RENAMED, {}, 0.5, Embedder())[0] is None


def test_the_embedding_model_embeds_all_texts_in_one_request_and_its_spend_is_counted() -> None:
    calls = _Calls(lambda text: [1.0, 0.1] if "acc" in text or "total" in text else [0.0, 1.0])
    spec = ModelSpec("openai/embed", role="embedding", input_cost=0.5, temperature=0.3)
    embedder = Embedder(model=spec, calls=calls)
    verdict, _ = screen(RENAMED, {"a": OTHER, "b": EVALUATED}, 0.95, embedder)
    assert verdict is not None and (verdict.of, verdict.embedder) == ("b", "openai/embed")
    assert len(calls.requests) == 1 and calls.requests[0]["input"] == [RENAMED, OTHER, EVALUATED]
    assert "temperature" not in calls.requests[0] and "messages" not in calls.requests[0]
    assert [(u.model, u.prompt_tokens, u.cost) for u in embedder.spent] == [("openai/embed", 7, 3.5)]


def test_a_failing_embedding_model_falls_back_to_local_vectors_but_a_setting_stops_the_run() -> None:
    failing = Embedder(model=ModelSpec("openai/embed", role="embedding"), calls=_Calls(ModelCallError("down")))
    verdict, _ = screen(RENAMED, {"b": EVALUATED}, 0.999, failing)
    assert verdict is not None and verdict.embedder == "local"
    refused = Embedder(model=ModelSpec("openai/embed", role="embedding"), calls=_Calls(ConfigurationError("bad key")))
    with pytest.raises(ConfigurationError, match="bad key"):
        screen(RENAMED, {"b": EVALUATED}, 0.999, refused)


@pytest.mark.parametrize(("answer", "skipped"), [
    ("SAME: only the names differ.", True),
    ("Different - it uses another loop", False),
    ("I cannot tell.", False),
])
def test_a_judge_confirms_or_overrules_the_similarity(answer: str, skipped: bool) -> None:
    calls = _Calls(answer=answer)
    embedder = Embedder(judge=ModelSpec("openai/judge", role="judge"), calls=calls)
    verdict, _ = screen(RENAMED, {"b": EVALUATED}, 0.999, embedder)
    assert (verdict is not None) == skipped
    prompt = calls.requests[0]["messages"][-1]["content"]
    assert "acc += k * k" in prompt and "total += i * i" in prompt and "DIFFERENT or SAME" in prompt
    assert [(u.model, u.prompt_tokens, u.completion_tokens) for u in embedder.spent] == [("openai/judge", 30, 5)]
    if verdict is not None:
        assert verdict.judged == answer and verdict.note().endswith(f"(local vectors; the judge: {answer})")
        assert verdict.metadata()["judged"] == answer


def test_a_failing_judge_lets_the_candidate_be_evaluated() -> None:
    class _Down(_Calls):
        def completion(self, kwargs: dict[str, Any], limits: CallLimits) -> Reply:
            raise ModelCallError("the model did not answer in time")

    assert screen(RENAMED, {"b": EVALUATED}, 0.999, Embedder(judge=ModelSpec("openai/j", role="judge"), calls=_Down()))[0] is None


def test_population_neighbours_are_the_islands_scored_candidates() -> None:
    members = (Candidate(1, 0, 1.0, 1, "exploration", code="a\n"), Candidate(2, 1, 2.0, 2, "exploration", code="b\n"),
               Candidate(3, 0, None, 3, "exploration", status="error", code="c\n"),
               Candidate(4, 0, 4.0, 4, "exploration", code=None, code_ref="x"))
    population = Population(members, "")
    assert population_neighbours(population, 0) == {"1": "a\n"}
    assert population_neighbours(population, None) == {"1": "a\n", "2": "b\n"}


def test_only_the_evolved_region_is_compared() -> None:
    block = "# EVOLVE-BLOCK-START\n{}# EVOLVE-BLOCK-END\n"
    a = "import os\nprint(os.sep)\n" * 30 + block.format(EVALUATED)
    b = "import os\nprint(os.sep)\n" * 30 + block.format(OTHER)
    assert screen(b, {"a": a}, 0.9, Embedder())[0] is None


def test_each_candidates_vector_is_kept_in_its_row_and_read_back_instead_of_embedding_it_again() -> None:
    calls = _Calls(lambda text: [1.0, 0.1] if "acc" in text or "total" in text else [0.0, 1.0])
    embedder = Embedder(model=ModelSpec("openai/embed", role="embedding"), calls=calls)
    first, row = screen(EVALUATED, {}, 0.999, embedder)  # no neighbour yet: the candidate alone is embedded
    assert first is None and row["embedding"]["by"] == "openai/embed" and calls.requests[0]["input"] == [EVALUATED]
    kept = {"b": similarity.Kept(row["embedding"]["by"], row["embedding"]["of"],
                                 code_vector.unpack(row["embedding"]["vector"]))}
    verdict, _ = screen(RENAMED, {"a": OTHER, "b": EVALUATED}, 0.95, embedder, kept=kept)
    assert verdict is not None and verdict.of == "b" and calls.requests[1]["input"] == [RENAMED, OTHER]
    # Edited by hand (another code), or made by another embedder: embedded again.
    edited = {"b": similarity.Kept("openai/embed", "0" * 16, kept["b"].vector)}
    screen(RENAMED, {"b": EVALUATED}, 0.95, embedder, kept=edited)
    screen(RENAMED, {"b": EVALUATED}, 0.95, embedder, kept={"b": similarity.Kept("local", kept["b"].of, kept["b"].vector)})
    assert [r["input"] for r in calls.requests[2:]] == [[RENAMED, EVALUATED]] * 2
    # The model fails: every vector is a local one, the kept model vector is not compared with them.
    failing = Embedder(model=ModelSpec("openai/embed", role="embedding"), calls=_Calls(ModelCallError("down")))
    verdict, row = screen(RENAMED, {"b": EVALUATED}, 0.999, failing, kept=kept)
    assert verdict is not None and (verdict.embedder, verdict.similarity, row["embedding"]["by"]) == ("local", 1.0, "local")



def test_stored_vectors_are_read_from_the_rows_or_a_copys_origin_and_a_bad_one_is_left_out() -> None:
    _, row = screen(EVALUATED, {}, 0.999, Embedder())
    rows = {"1": row, "2": {"embedding": {**row["embedding"], "vector": "forged"}}, "3": {"embedding": 5}, "4": {}}

    class _Reader:
        def row(self, row_id: str) -> trace.TraceRow | None:
            found = rows.get(row_id)
            return None if found is None else trace.TraceRow(row_id, 1, None, {}, "accepted", extra={"metadata": found})

    kept = similarity.stored_vectors(_Reader(), ["1", "2", "3", "4", "5", "6"], {"6": "1"})  # type: ignore[arg-type]
    assert sorted(kept) == ["1", "6"] and kept["6"] == kept["1"] and kept["1"].by == "local"
    assert kept["1"].vector == code_vector.unpack(row["embedding"]["vector"])
