"""`autoloop replay`: re-send the prompt that produced a candidate and measure how reproducible it is."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any, Iterator

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autoloop_py.analysis.replay import BEST, ReplayEvent, Trial, choose_event, classify, measure
from autoloop_py.commands.common import format_metric, repo_root, subparser
from autoloop_py.commands.trace import export_program
from autoloop_py.errors import AutoloopError
from autoloop_py.program import Program, check_all, find_program
from autoloop_py.replaying import Bench, check_credentials, replay_event
from autoloop_py.trace import Trace, load_trace

_SUMMARY = "Re-send the saved prompt that produced a candidate and measure how reproducible it is."
NO_MODEL = ("candidate '{id}' records no model; pass --model with a litellm model name "
            "(for example --model openai/gpt-4o-mini)")


@dataclasses.dataclass(frozen=True)
class Target:
    """A run to work on: its trace and, when the repository defines it, its program.

    Attributes:
        trace: the run's trace (its directory lives while the `opened` block runs).
        program: the program that made the run, None for a trace directory whose program is not in the repository.
        root: the repository root, None outside a repository.
        label: how the run is named in reports (`memory/autoloop:traces/<name>` or the directory).
    """

    trace: Trace
    program: Program | None
    root: Path | None
    label: str


def add_parser(commands: Any) -> None:
    """Registers `autoloop replay`."""
    parser = subparser(commands, "replay", _SUMMARY, "autoloop replay function_minimization --event best --repeats 3")
    parser.add_argument("target", help="a program's name (its trace on memory/autoloop) or an EvoTrace run directory")
    parser.add_argument("--event", default=BEST, metavar="best|ID",
                        help="the candidate to replay: `best` (the run's final best, default) or a row id such as it7")
    parser.add_argument("--repeats", type=int, default=3, metavar="N", help="how many times to re-send the prompt (default 3)")
    parser.add_argument("--model", help="litellm model to re-send with (default: the model recorded for the candidate)")
    parser.add_argument("--json", action="store_true", help="print the measures and every trial as JSON")
    parser.epilog = ("Each reply is applied to the parent's source as the llm proposer applies it and, for a program "
                     "of this repository, evaluated in a private worktree of autoloop/<program>. A trace directory "
                     "whose program is not in the repository is replayed without evaluation.")
    parser.set_defaults(handler=cmd_replay)


def cmd_replay(args: argparse.Namespace, console: Console) -> int:
    """Replays the event and prints the measures (tables or JSON)."""
    if args.repeats < 1:
        raise AutoloopError("--repeats must be at least 1")
    with opened(args.target, args.repo) as target:
        event = choose_event(target.trace, args.event)
        model = args.model or event.model
        if not model:
            raise AutoloopError(NO_MODEL.format(id=event.id))
        check_credentials(model)
        trials = _replay(target, event, model, args.repeats)
        report = replay_report(target, event, model, trials)
    if args.json:
        console.out(json.dumps(report, indent=2, ensure_ascii=False), highlight=False)
    else:
        print_report(report, console)
    return 0


def _replay(target: Target, event: ReplayEvent, model: str, repeats: int) -> list[Trial]:
    """Returns the trials, evaluated on a bench when the program is known."""
    if target.program is None or target.root is None:
        return replay_event(event, model, repeats)
    with Bench(target.root, target.program) as bench:
        return replay_event(event, model, repeats, bench)


@contextlib.contextmanager
def opened(name: str, repo: Path | None) -> Iterator[Target]:
    """Yields the run a command names: a trace directory, or a program's trace exported from the memory branch."""
    directory = Path(name)
    if directory.is_dir():
        trace = load_trace(directory)
        root = _root(repo)
        program_name = trace.meta.get("program")
        program = _program(root, program_name) if root is not None and isinstance(program_name, str) else None
        yield Target(trace, program, root, str(directory))
        return
    if "/" in name or name.startswith("."):
        raise AutoloopError("is not a directory; pass an EvoTrace run directory or a program's name", path=name)
    root = repo_root(repo)
    programs, _ = check_all(root)
    with tempfile.TemporaryDirectory(prefix="autoloop-trace-") as tmp:
        trace = load_trace(export_program(root, name, Path(tmp) / name))
        yield Target(trace, find_program(programs, name), root, f"memory/autoloop:traces/{name}")


def _root(repo: Path | None) -> Path | None:
    try:
        return repo_root(repo)
    except AutoloopError:
        return None


def _program(root: Path, name: str) -> Program | None:
    programs, _ = check_all(root)
    return next((program for program in programs if program.name == name), None)


def replay_report(target: Target, event: ReplayEvent, model: str, trials: list[Trial]) -> dict[str, Any]:
    """Returns the replay as plain data: the event, the measures and each trial."""
    direction = target.trace.direction
    measures = measure(trials, event, direction)
    return {
        "run": target.label,
        "event": {"id": event.id, "iteration": event.iteration, "parent_id": event.parent_id, "score": event.score,
                  "parent_score": event.parent_score, "recorded_model": event.model, "prompt_key": event.prompt_key},
        "model": model,
        "evaluated_with": target.program.name if target.program is not None else None,
        "direction": direction,
        "measures": dataclasses.asdict(measures),
        "trials": [_trial_dict(trial, event, direction) for trial in trials],
    }


def _trial_dict(trial: Trial, event: ReplayEvent, direction: str) -> dict[str, Any]:
    return {"parsed": trial.parsed, "parse_error": trial.parse_error, "eval_ok": trial.eval_ok,
            "eval_error": trial.eval_error, "score": trial.score, "exact_match": trial.source == event.source,
            "class": classify(trial, event, direction)}


def print_report(report: dict[str, Any], console: Console) -> None:
    """Prints the trials as a table and the measures as lines."""
    event = report["event"]
    console.print(f"[bold]Replayed[/] {escape(event['id'])} of {escape(report['run'])} (iteration {event['iteration']}, "
                  f"parent {escape(event['parent_id'])}, score {format_metric(event['score'])}) "
                  f"{len(report['trials'])}× with {escape(report['model'])}")
    if report["evaluated_with"] is None:
        console.print("[yellow]not evaluated:[/] the run's program is not in this repository")
    table = Table()
    for column in ("#", "parsed", "evaluated", "score", "exact match", "class", "why not"):
        table.add_column(column)
    for number, trial in enumerate(report["trials"], start=1):
        table.add_row(str(number), _yes(trial["parsed"]), _yes(trial["eval_ok"]), format_metric(trial["score"]),
                      _yes(trial["exact_match"]), trial["class"], escape(trial["parse_error"] or trial["eval_error"] or ""))
    console.print(table)
    _print_measures(report["measures"], console)


def _print_measures(m: dict[str, Any], console: Console) -> None:
    console.print(f"parse success {_percent(m['parse_success_rate'])}, "
                  f"evaluation success {_percent(m['evaluation_success_rate'])}, "
                  f"exact match {_percent(m['exact_solution_match_rate'])} "
                  f"(reply {_percent(m['exact_response_match_rate'])})")
    ratio = "—" if m["score_ratio"] is None else f"{m['score_ratio']:.3f}"
    console.print(f"score mean {format_metric(m['score_mean'])}, median {format_metric(m['score_median'])}, "
                  f"std {format_metric(m['score_std'])}; replay/original {ratio}")


def _yes(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


__all__ = ["Target", "add_parser", "cmd_replay", "opened", "print_report", "replay_report"]
