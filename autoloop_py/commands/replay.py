"""`autoloop replay`: re-send the prompt that produced a candidate and measure how reproducible it is."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import textwrap
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autoloop_py.analysis.replay import (
    BEST,
    CLASSES,
    ReplayEvent,
    choose_events,
    classify,
    context_pool,
    measure,
)
from autoloop_py.analysis.replay_prompts import EXACT, VARIANTS, vary
from autoloop_py.commands.common import format_metric, show_report, subparser
from autoloop_py.commands.trace import Target, opened
from autoloop_py.errors import AutoloopError
from autoloop_py.loop.iteration.model_use import check_budget, record_spend
from autoloop_py.proposers.base import Usage
from autoloop_py.proposers.setup import check_model
from autoloop_py.studies.replaying import Ask, Bench, Replay, replay_event, send

_EXAMPLE = ("autoloop replay function_minimization --event best --repeats 3\n"
            "  autoloop replay function_minimization --event all --variant exact --variant strict_diff --attempts 2\n"
            "  autoloop replay traces/run42 --model openai/gpt-4o-mini --variant no_history --json")
_VARIANTS = ("`exact` re-sends the prompt unchanged; `strict_diff` appends an instruction to answer with "
             "SEARCH/REPLACE blocks only; `no_other_context` cuts the sections showing other programs (AdaEvolve's "
             "'Other programs for inspiration', EvoX's 'Context programs'); `no_history` cuts the sections of earlier "
             "attempts ('Recent history', 'Previous attempts', 'Earlier children of this parent'); `alternate_context` "
             "shows, in place of each context program, an earlier program of the run closest in score to the parent. A "
             "variant whose section the prompt lacks is reported as skipped")
_EPILOG = textwrap.fill(
    "Each reply is applied to the parent's source as the llm proposer applies it and, for a program of this "
    "repository, evaluated in a standalone copy of autoloop/<program>. A trace directory whose program is not "
    "in the repository is replayed without evaluation. Per event and variant the report gives the parse and "
    "evaluation success rates, exact solution and reply matches, score mean/median/std, replay/original, and "
    "each trial's class against the original score (tolerance 0.001): better, similar, still_improves_parent "
    "(worse than the original, better than its parent), worse, parse_failed, eval_failed, or not_evaluated.", width=90
)
NO_MODEL = ("candidate '{id}' records no model; pass --model with a litellm model name "
            "(for example --model openai/gpt-4o-mini)")


def add_parser(commands: Any) -> None:
    """Registers `autoloop replay`."""
    parser = subparser(commands, "replay", _EXAMPLE)
    parser.add_argument("target", help="a program's name (its trace on memory/autoloop) or an EvoTrace run directory")
    parser.add_argument("--event", default=BEST, metavar="best|all|ID",
                        help="the candidate to replay: `best` (the run's final best, default), `all` (every "
                             "best-so-far candidate with a parent and a saved prompt, at most max(1, ceil(15%% of the "
                             "iterations)), always with the final best) or a row id such as it7")
    parser.add_argument("--variant", action="append", choices=VARIANTS, metavar="NAME",
                        help="how to change the saved prompt; repeat to compare several (default exact): " + _VARIANTS)
    parser.add_argument("--repeats", type=int, default=3, metavar="N",
                        help="how many times to re-send each prompt (default 3)")
    parser.add_argument("--attempts", type=int, default=1, metavar="N",
                        help="replies one replay may ask for: a reply that does not apply or whose child fails its "
                             "evaluation is shown to the model, with why, in the next attempt's prompt (default 1)")
    parser.add_argument("--model", help="litellm model to re-send with (default: the model recorded for the candidate)")
    parser.add_argument("--json", action="store_true", help="print the measures and every trial as JSON")
    parser.epilog = _EPILOG
    parser.set_defaults(handler=cmd_replay)


def cmd_replay(args: argparse.Namespace, console: Console) -> int:
    """Replays the events in each variant and prints the measures (tables or JSON)."""
    if args.repeats < 1 or args.attempts < 1:
        raise AutoloopError("--repeats and --attempts must be at least 1")
    variants = list(dict.fromkeys(args.variant or [EXACT]))
    with opened(args.target, args.repo) as target:
        events = choose_events(target.trace, args.event)
        models = {event.id: _model(args.model, event) for event in events}
        for model in dict.fromkeys(models.values()):
            check_model(model)
        if events and target.program is not None and target.root is not None:
            check_budget(target.root, target.program, "replay")
        spent: list[Usage] = []
        ask = functools.partial(send, spent=spent)
        try:
            with _bench(target) as bench:
                replays = [_replay(target, event, variant, Replay(models[event.id], args.repeats, args.attempts),
                                   bench, ask) for event in events for variant in variants]
        finally:
            if target.program is not None and target.root is not None:
                record_spend(target.root, target.program, spent, "replay")
        report = replay_report(target, replays, args.repeats, args.attempts)
    show_report(report, args.json, print_report, console)
    return 0


def _model(option: str | None, event: ReplayEvent) -> str:
    """Returns the model to re-send an event's prompt with, or raises when neither --model nor the trace names one."""
    model = option or event.model
    if not model:
        raise AutoloopError(NO_MODEL.format(id=event.id))
    return model


@contextlib.contextmanager
def _bench(target: Target) -> Iterator[Bench | None]:
    """Yields the evaluation bench of the run's program, None when the program is not in this repository."""
    if target.program is None or target.root is None:
        yield None
        return
    with Bench(target.root, target.program) as bench:
        yield bench


def _replay(
    target: Target, event: ReplayEvent, variant: str, how: Replay, bench: Bench | None, ask: Ask = send
) -> dict[str, Any]:
    """Returns one event replayed in one variant, as plain data (no trials when the variant does not apply)."""
    pool = context_pool(target.trace, event) if variant == "alternate_context" else ()
    prompt = vary(variant, event.system, event.user, event.parent_score, pool)
    trials = [] if prompt.skipped else replay_event(event, dataclasses.replace(how, prompt=prompt), bench, ask)
    direction = target.trace.direction
    return {
        "event": {"id": event.id, "iteration": event.iteration, "parent_id": event.parent_id, "score": event.score,
                  "parent_score": event.parent_score, "recorded_model": event.model, "prompt_key": event.prompt_key},
        "variant": variant, "model": how.model,
        "prompt_change": prompt.change, "skipped": prompt.skipped,
        "measures": None if prompt.skipped else dataclasses.asdict(measure(trials, event, direction)),
        "trials": [{"parsed": trial.parsed, "parse_error": trial.parse_error, "eval_ok": trial.eval_ok,
                    "eval_error": trial.eval_error, "score": trial.score, "exact_match": trial.source == event.source,
                    "class": classify(trial, event, direction), "attempts": trial.attempts,
                    "earlier_errors": list(trial.earlier_errors)} for trial in trials],
    }


def replay_report(target: Target, replays: list[dict[str, Any]], repeats: int, attempts: int) -> dict[str, Any]:
    """Returns the run's replays as plain data: per event and variant, the measures and each trial."""
    return {
        "run": target.label,
        "evaluated_with": target.program.name if target.program is not None else None,
        "direction": target.trace.direction,
        "repeats": repeats,
        "attempts": attempts,
        "replays": replays,
    }


def print_report(report: dict[str, Any], console: Console) -> None:
    """Prints, per event, a table of the measures of each variant; the trials when one replay was made."""
    if report["evaluated_with"] is None:
        console.print("[yellow]not evaluated:[/] the run's program is not in this repository")
    by_event: dict[str, list[dict[str, Any]]] = {}
    for replay in report["replays"]:
        by_event.setdefault(replay["event"]["id"], []).append(replay)
    for replays in by_event.values():
        _print_event(report, replays, console)
    made = [replay for replay in report["replays"] if not replay["skipped"]]
    if len(made) == 1:
        _print_trials(made[0]["trials"], console)


def _print_event(report: dict[str, Any], replays: list[dict[str, Any]], console: Console) -> None:
    event, model = replays[0]["event"], replays[0]["model"]
    tries = f", up to {report['attempts']} attempts each" if report["attempts"] > 1 else ""
    console.print(f"[bold]Replayed[/] {escape(event['id'])} of {escape(report['run'])} "
                  f"(iteration {event['iteration']}, "
                  f"parent {escape(event['parent_id'])}, score {format_metric(event['score'])}) "
                  f"{report['repeats']}× with {escape(model)}{tries}")
    table = Table("measure", *(replay["variant"] for replay in replays))
    table.add_row("prompt", *("skipped (below)" if replay["skipped"] else escape(replay["prompt_change"] or "unchanged")
                              for replay in replays))
    for label, cell in _ROWS:
        table.add_row(label, *(_cell(replay, cell) for replay in replays))
    console.print(table)
    for replay in replays:
        if replay["skipped"]:
            console.print(f"[yellow]{replay['variant']} skipped:[/] {escape(replay['skipped'])}")


def _cell(replay: dict[str, Any], cell: Callable[[dict[str, Any]], str]) -> str:
    """Returns one measure of a replay as text ('—' for a skipped variant)."""
    return "—" if replay["skipped"] else cell(replay["measures"])


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


# (row label, measure -> text) of the per-event table; each class gets a row of its own.
_ROWS: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
    ("parse success", lambda m: _percent(m["parse_success_rate"])),
    ("evaluation success", lambda m: _percent(m["evaluation_success_rate"])),
    ("exact solution", lambda m: _percent(m["exact_solution_match_rate"])),
    ("exact reply", lambda m: _percent(m["exact_response_match_rate"])),
    ("score mean", lambda m: format_metric(m["score_mean"])),
    ("score median", lambda m: format_metric(m["score_median"])),
    ("score std", lambda m: format_metric(m["score_std"])),
    ("replay/original", lambda m: _ratio(m["score_ratio"])),
    ("mean attempts", lambda m: f"{m['attempts_mean']:.2f}"),
    *((name, lambda m, name=name: str(m["classes"][name])) for name in CLASSES),  # type: ignore[misc]
)


def _print_trials(trials: list[dict[str, Any]], console: Console) -> None:
    table = Table("#", "parsed", "evaluated", "score", "exact match", "class", "attempts", "why not")
    for number, trial in enumerate(trials, start=1):
        table.add_row(str(number), _yes(trial["parsed"]), _yes(trial["eval_ok"]), format_metric(trial["score"]),
                      _yes(trial["exact_match"]), trial["class"], str(trial["attempts"]),
                      escape(trial["parse_error"] or trial["eval_error"] or ""))
    console.print(table)


def _yes(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"
