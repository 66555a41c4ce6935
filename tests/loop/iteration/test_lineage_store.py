"""Tests for lineage_store.py: ancestors and earlier results read from a trace (a dict stands in for the memory branch)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest

from autoloop_py.errors import ProgramError
from autoloop_py.loop.iteration import lineage_store, novelty
from autoloop_py.loop.iteration.lineage_store import BranchFiles, TraceReader
from autoloop_py.program.model import Program, load_program
from autoloop_py.state import trace
from autoloop_py.state.memory import MEMORY_BRANCH, MemoryStore
from autoloop_py.state.trace import TraceRow
from tests import trace_samples as s


class _Files:
    """Memory-branch files in a dict, counting reads."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.reads: list[list[str]] = []

    def read_many(self, paths: Sequence[str]) -> dict[str, str | None]:
        self.reads.append(list(paths))
        return {path: self.files.get(path) for path in paths}

    def names(self, folder: str) -> list[str]:
        inside = (p[len(folder) + 1:] for p in self.files if p.startswith(folder + "/"))
        return sorted({name.split("/", 1)[0] for name in inside})


def _reader(files: dict[str, str] | None = None) -> TraceReader:
    return TraceReader(_Files(files if files is not None else s.memory_files()), s.PROGRAM, "value")


def _with_row(files: dict[str, str], row: TraceRow, source: str) -> dict[str, str]:
    return {**files, **trace.row_files(s.PROGRAM, row, source, {})}


def test_the_lineage_walks_parents_nearest_first() -> None:
    lineage = _reader().lineage("D")
    assert [(a.id, a.iteration, a.status, a.metric, a.change) for a in lineage] == [
        ("D", 3, "accepted", 4.0, "candidate D"), ("C", 2, "accepted", 3.0, "candidate C"),
        ("B", 1, "accepted", 2.0, "candidate B"), ("A", 0, "accepted", 1.0, "candidate A"),
    ]
    assert lineage[1].source == s.C


def test_the_lineage_is_bounded_and_stops_at_a_missing_program() -> None:
    assert [a.id for a in _reader().lineage("D", depth=2)] == ["D", "C"]
    assert [a.id for a in _reader().lineage("F")] == ["F", "E", "A"]
    assert _reader().lineage("nobody") == ()
    assert _reader().lineage(None) == ()
    files = {p: t for p, t in s.memory_files().items() if not p.endswith(trace.sha256_text(s.B) + ".txt")}
    assert [a.id for a in _reader(files).lineage("D")] == ["D", "C"]


def test_reads_are_batched_and_cached() -> None:
    files = _Files(s.memory_files())
    reader = TraceReader(files, s.PROGRAM, "value")
    reader.lineage("D")
    reader.lineage("D")
    reader.evaluated(s.D, reader.lineage("D"), recent=4)  # adds E and F: one more source (F's is A's)
    # One row per ancestor (each names the next), their sources in one batch, then the newest rows not read yet.
    assert [len(paths) for paths in files.reads] == [1, 1, 1, 1, 4, 2, 1]
    read = [path for paths in files.reads for path in paths]
    assert len(read) == len(set(read))


def _long_trace(size: int) -> dict[str, str]:
    files: dict[str, str] = {}
    for number in range(size):
        row = TraceRow(f"it{number}", number, f"it{number - 1}" if number else None, {"value": float(number)}, "rejected")
        files.update(trace.row_files(s.PROGRAM, row, f"x = {number}\n", {}))
    return files


@pytest.mark.parametrize("size", [20, 400])
def test_an_iteration_reads_the_same_files_whatever_the_trace_length(size: int) -> None:
    files = _Files(_long_trace(size))
    reader = TraceReader(files, s.PROGRAM, "value")
    old = "x = 3\n"  # an exact repeat of an early row, found through the source index
    results = reader.evaluated(old, reader.lineage(f"it{size - 1}"))
    assert results[trace.sha256_text(old)].id == "it3"
    read = [path for paths in files.reads for path in paths]
    # 12 lineage rows and their sources, the newest rows (the lineage's), the exact match's row and source.
    assert len(read) == 2 * lineage_store.LINEAGE_DEPTH + 2


def test_a_trace_without_the_source_index_is_scanned_newest_first() -> None:
    unindexed = {p: t for p, t in _long_trace(200).items() if "/sources/" not in p}
    files = _Files(unindexed)
    reader = TraceReader(files, s.PROGRAM, "value")
    assert reader.evaluated("x = 150\n", (), recent=0)[trace.sha256_text("x = 150\n")].id == "it150"
    rows_read = [path for paths in files.reads for path in paths if "/rows/" in path]
    assert len(rows_read) == lineage_store.SCAN_CHUNK  # rows 136-199: the first chunk held it


def test_unsafe_ids_are_found_by_their_file_name() -> None:
    files = _with_row(s.memory_files(), TraceRow("run/7 x", 4, "D", {"value": 5.0}, "rejected"), s.D + "x = 1\n")
    assert [a.id for a in _reader(files).lineage("run/7 x")][:2] == ["run/7 x", "D"]


def test_evaluated_holds_the_lineage_the_newest_rows_and_an_exact_match() -> None:
    reader = _reader()
    lineage = reader.lineage("C")
    results = reader.evaluated("print('new')\n", lineage, recent=1)
    assert {r.id for r in results.values()} == {"C", "B", "A", "D"}
    assert results[trace.sha256_text(s.C)].fingerprint == novelty.fingerprint(s.C)
    old = reader.evaluated(s.E, lineage, recent=0)
    assert old[trace.sha256_text(s.E)].id == "E"


def test_failed_and_reused_results_are_not_offered() -> None:
    reused = TraceRow("it9", 9, "D", {"value": 4.0}, "rejected",
                      extra={"metadata": {"novelty": {"verdict": "duplicate", "evaluated": False, "of": "D"}}})
    files = _with_row(s.memory_files(), reused, s.D + "# again\n")
    reader = _reader(files)
    results = reader.evaluated(s.F, (), recent=10)
    assert "it9" not in {r.id for r in results.values()}
    # F failed: its source (A's) is offered as A's, the scored program.
    assert results[trace.sha256_text(s.F)].id == "A"


def test_an_unreadable_row_is_ignored() -> None:
    files = {**s.memory_files(), f"traces/{s.PROGRAM}/rows/000009-bad.json": "{not json"}
    assert _reader(files).row("bad") is None


def _program(tmp_path: Path, frontmatter: str, targets: tuple[str, ...] = ("a.py",)) -> Program:
    folder = tmp_path / ".autoloop/programs/demo"
    folder.mkdir(parents=True)
    for target in targets:
        (folder / target).write_text("x = 1\n")
    listed = "\n".join(f"- `{t}`" for t in targets)
    (folder / "program.md").write_text(
        f"---\n{frontmatter}---\n\n# Demo\n\n## Goal\n\nGo.\n\n## Target\n\n{listed}\n\n## Evaluation\n\n"
        "```bash\npython3 score.py\n```\n\nThe metric is `value`. Higher is better.\n"
    )
    return load_program(tmp_path, Path(".autoloop/programs/demo/program.md"))


def test_the_filter_is_on_by_default_and_switchable(git_repo: Path) -> None:
    program = _program(git_repo, "seed: 1\n")
    config = program.config
    assert (config.novelty_filter, config.novelty, config.novelty_threshold) == (True, "exact", None)
    off = _program(git_repo / "off", "novelty_filter: false\nnovelty-threshold: 0.5\n")
    assert (off.config.novelty_filter, off.config.novelty_threshold) == (False, 0.5)
    embedding = _program(git_repo / "embedding", "novelty: embedding\nnovelty-threshold: 0.97\n")
    assert (embedding.config.novelty, embedding.config.novelty_threshold) == ("embedding", 0.97)


def test_branch_files_read_many_files_at_once(git_repo: Path) -> None:
    memory = MemoryStore(git_repo)
    memory.commit({**s.memory_files(), "odd name.txt": "a b\n", "latin1.txt": "é".encode("latin-1")}, "trace")
    files = BranchFiles(git_repo, MEMORY_BRANCH)
    memory.commit({"later.txt": "after\n"}, "later")
    rows = [f"traces/{s.PROGRAM}/rows/{name}" for name in files.names(f"traces/{s.PROGRAM}/rows")]
    assert len(rows) == len(s.PROGRAMS)
    texts = files.read_many([*rows, "odd name.txt", "absent.txt", "latin1.txt", "traces", "later.txt"])
    assert [texts[p] for p in rows] == [s.memory_files()[p] for p in rows]
    assert (texts["odd name.txt"], texts["absent.txt"], texts["latin1.txt"], texts["traces"]) == ("a b\n", None, None, None)
    assert texts["later.txt"] is None  # the tip is the one the reader started from
    assert BranchFiles(git_repo, "no-such-branch").read_many(["x"]) == {"x": None}
    assert TraceReader(files, s.PROGRAM).lineage("D")[0].source == s.D


@pytest.mark.parametrize(
    ("line", "message"),
    [("novelty_filter: maybe\n", "must be true or false, got 'maybe'"),
     ("novelty_threshold: 1.5\n", "must be a share above 0 and at most 1 (e.g. 0.8), got 1.5"),
     ("novelty_threshold: 0\n", "must be a share above 0 and at most 1 (e.g. 0.8), got 0"),
     ("novelty: semantic\n", "must be one of exact, embedding, got 'semantic'")],
)
def test_bad_novelty_settings_name_the_key(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(ProgramError, match=r"frontmatter `novelty(_\w+)?`: " + message.replace("(", r"\(").replace(")", r"\)")):
        _program(tmp_path, line)


def test_novelty_models_without_novelty_embedding_are_named_unused(tmp_path: Path) -> None:
    models = "models:\n  - openai/a\n  - model: openai/e\n    role: embedding\n  - model: openai/j\n    role: judge\n"
    unused = _program(tmp_path, models)
    assert list(unused.warnings) == [".autoloop/programs/demo/program.md:2: frontmatter `models`: the `role: embedding` "
                               "entry (openai/e) is not used without `novelty: embedding`"]
    used = _program(tmp_path / "used", models + "novelty: embedding\n")
    assert not used.warnings and [s.role for s in used.config.models] == ["propose", "embedding", "judge"]
    off = _program(tmp_path / "off", "novelty: embedding\nnovelty-filter: false\n")
    assert list(off.warnings) == [".autoloop/programs/demo/program.md:2: frontmatter `novelty: embedding` does "
                                  "nothing with `novelty-filter: false`"]


def test_screen_judges_single_file_candidates_only(tmp_path: Path) -> None:
    program = _program(tmp_path, "seed: 1\n")
    reader = _reader()
    verdict = lineage_store.screen(reader, program, "a.py", {"a.py": s.C}, {"a.py": s.A}, "C", 4.0)
    assert verdict is not None and (verdict.kind, verdict.of) == (novelty.DUPLICATE, "A")
    assert lineage_store.screen(reader, program, "a.py", {"a.py": s.C, "b.py": ""}, {"a.py": s.A}, "C", 4.0) is None
    assert lineage_store.screen(reader, program, "a.py", {"a.py": s.C}, {"a.py": s.C + "y = 2\n"}, "C", 4.0) is None


def test_screen_evaluates_a_duplicate_whose_result_would_now_be_accepted(tmp_path: Path) -> None:
    program = _program(tmp_path, "seed: 1\n")
    assert lineage_store.screen(_reader(), program, "a.py", {"a.py": s.C}, {"a.py": s.A}, "C", 0.5) is None


def test_evaluated_sources_are_the_lineage_and_newest_scored_rows() -> None:
    reader = _reader()
    found = reader.evaluated_sources(reader.lineage("C"))
    assert found["C"] == s.C and found["A"] == s.A and set(found) >= {"A", "B", "C"}
    assert all(reader.row(name) is not None for name in found)


def test_screen_reports_a_recycled_candidate(tmp_path: Path) -> None:
    program = _program(tmp_path, "novelty_threshold: 0.7\n")
    candidate = s.A.replace("import math", "import cmath")
    verdict = lineage_store.screen(_reader(), program, "a.py", {"a.py": s.C}, {"a.py": candidate}, "C", 4.0)
    assert verdict is not None and (verdict.kind, verdict.added, verdict.recycled) == (novelty.RECYCLED, 4, 3)
    assert verdict.note() == "not evaluated: 75% of its added lines (3 of 4) re-add lines deleted in iteration 1"


def test_feedback_items_show_the_parent_and_its_latest_attempts_not_kept(tmp_path: Path) -> None:
    program = _program(tmp_path, "feedback-bytes: 400\n")
    files = s.memory_files()
    told = {"feedback": "parent B: 2 of 3 tests pass", "stdout_tail": "ok\n"}
    files = _with_row(files, TraceRow("B", 1, "A", {"value": 2.0, "worst_case": 7}, "accepted",
                                      extra={"artifacts": told}), s.B)
    files = _with_row(files, TraceRow("G", 4, "B", {"value": 0.0, "error": "negative radii"}, "rejected",
                                      extra={"artifacts": {"error": "negative radii", "feedback": "circle 3 < 0; " * 40,
                                                           "stderr_tail": "warn\n" * 50}}), "g = 1\n")
    files = _with_row(files, TraceRow("H", 5, "B", {"error": "boom"}, "failed",
                                      extra={"artifacts": {"error": "exited with status 1: boom"}}), "h = 1\n")
    items = lineage_store.feedback_items(_reader(files), "B", program)
    assert [item.splitlines()[0] for item in items] == [
        "The parent (B): accepted (value 2.0)",
        "An earlier attempt on this parent (H): failed",
        "An earlier attempt on this parent (G): rejected (value 0.0)",
    ]
    assert "parent B: 2 of 3 tests pass" in items[0] and "Other values: worst_case=7\n" in items[0]
    assert "stdout" not in items[0]  # an accepted candidate's output is kept in the trace, not shown
    assert "Error: negative radii" in items[2] and "circle 3 < 0" in items[2]
    assert all(len(item.encode()) <= 400 for item in items) and items[2].endswith("[… cut at feedback-bytes]\n")
    assert lineage_store.feedback_items(_reader(files), "nobody", program) == ()
    assert lineage_store.feedback_items(None, "B", program) == ()
    assert lineage_store.feedback_items(_reader(files), "B", _program(tmp_path / "off", "feedback-bytes: 0\n")) == ()


@pytest.mark.parametrize("size", [20, 400])
def test_an_old_attempt_on_the_parent_is_found_through_the_children_index_in_bounded_reads(
    tmp_path: Path, size: int
) -> None:
    program = _program(tmp_path, "")
    files = _with_row(s.memory_files(), TraceRow("B", 1, "A", {"value": 2.0}, "accepted"), s.B)
    told = {"error": "x < 0", "feedback": "OLD-ATTEMPT-MARK"}
    files = _with_row(files, TraceRow("old", 2, "B", {"value": -1.0}, "rejected", extra={"artifacts": told}), "o = 1\n")
    for number in range(size):  # newer rows on other parents bury it far below the RECENT_ROWS newest
        newer = TraceRow(f"n{number:04d}", 10 + number, "A", {"value": 0.0}, "rejected")
        files = _with_row(files, newer, f"n = {number}\n")
    counted = _Files(files)
    items = lineage_store.feedback_items(TraceReader(counted, s.PROGRAM, "value"), "B", program)
    assert [item.splitlines()[0] for item in items] == [
        "An earlier attempt on this parent (old): rejected (value -1.0)"]
    assert "OLD-ATTEMPT-MARK" in items[0]
    read = [path for paths in counted.reads for path in paths]
    # B's row, then its indexed children (C of the sample, old) and the newest rows in one batch, whatever the length.
    assert len(read) == 1 + 2 + lineage_store.RECENT_ROWS


def test_a_copied_parent_without_a_row_shows_the_feedback_of_the_row_it_was_copied_from(tmp_path: Path) -> None:
    program = _program(tmp_path, "")
    told = {"feedback": "SOURCE-MARK: 2 of 3 tests pass"}
    source = TraceRow("3", 1, "A", {"value": 2.0}, "accepted", extra={"artifacts": told})
    files = _with_row(s.memory_files(), source, s.B)
    files = _with_row(files, TraceRow("9", 5, "8", {"value": 1.0}, "rejected",
                                      extra={"artifacts": {"error": "COPY-CHILD-MARK"}}), "c = 1\n")
    # 8 is a copy (AdaEvolve's migrant) of 7, itself a copy of 3; neither copy has a row of its own.
    items = lineage_store.feedback_items(_reader(files), "8", program, origins={"8": "7", "7": "3"})
    assert [item.splitlines()[0] for item in items] == [
        "The parent (8, a copy of 3): accepted (value 2.0)",
        "An earlier attempt on this parent (9): rejected (value 1.0)",
    ]
    assert "SOURCE-MARK" in items[0] and "COPY-CHILD-MARK" in items[1]
    assert lineage_store.feedback_items(_reader(files), "8", program, origins={"8": "7", "7": "8"})[0].startswith(
        "An earlier attempt"
    )  # a cycle of copies ends the walk


def test_copy_origins_map_each_one_parent_candidate_to_its_source() -> None:
    from dataclasses import replace

    from autoloop_py.state.population import Candidate, empty_population

    population = replace(empty_population(), candidates=(
        Candidate(1, 0, 1.0, 0, "seed"), Candidate(2, 1, 1.0, 0, "seed", parents=(1,)),
        Candidate(3, 0, 2.0, 1, "crossover", parents=(1, 2)),
    ))
    assert lineage_store.copy_origins(population) == {"2": "1"}


def test_prompt_feedback_follows_a_copy_in_the_state_files_population_and_masks_secrets(tmp_path: Path) -> None:
    from autoloop_py.redact import Redactor
    from autoloop_py.state import file as statefile
    from autoloop_py.state.population import Candidate, add_candidate, empty_population
    from autoloop_py.state.population_markdown import render_population

    population = empty_population("AdaEvolve")
    population = add_candidate(population, Candidate(3, 0, 2.0, 1, "seed", status="accepted", code="x = 3\n"))
    population = add_candidate(population, Candidate(8, 1, 2.0, 1, "seed", parents=(3,), status="accepted",
                                                     code="x = 3\n"))  # a migrant: no row of its own
    state = statefile.new_state(s.PROGRAM, "Grow.", "value", "higher", None)
    state = statefile.with_section(state, statefile.POPULATION, render_population(population))
    told = {"feedback": "SOURCE-MARK with token sk-live-123456"}
    source = TraceRow("3", 1, "A", {"value": 2.0}, "accepted", extra={"artifacts": told})
    files = _with_row(s.memory_files(), source, s.B)
    program = _program(tmp_path, "")
    items = lineage_store.prompt_feedback(_reader(files), "8", program, Redactor(("sk-live-123456",)), state)
    assert items[0].startswith("The parent (8, a copy of 3): accepted") and "SOURCE-MARK with token ***" in items[0]
    assert lineage_store.prompt_feedback(_reader(files), "8", program, Redactor(), None) == ()  # no state: no copies
