"""`autoloop tune PROGRAM`: the tuning-gap baseline — BO over one candidate's numeric knobs."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autoloop_py import tempdirs
from autoloop_py.analysis.tuning import Knob, free_name, parametrize, with_values
from autoloop_py.analysis.tuning_report import (
    Trial,
    build_report,
    initial_points,
    trial_kind,
)
from autoloop_py.commands.analyze import figure_class
from autoloop_py.commands import COMMANDS
from autoloop_py.commands.common import format_metric, load_named, repo_root, show_report, subparser
from autoloop_py.commands.trace import export_program
from autoloop_py.errors import AutoloopError
from autoloop_py.program.model import Program
from autoloop_py.program.regions import primary_target
from autoloop_py.state.trace import load_trace
from autoloop_py.studies import tuning_run

EXIT_INTERRUPT = 130
_SUMMARY = COMMANDS["tune"][1]
_DETAILS = """\
Finds the tunable numeric literals (knobs) of a candidate recorded in the program's trace,
rewrites them into a PARAMS block, and runs scikit-optimize's gp_minimize over them with the
program's own evaluation (call 1 re-evaluates the original values, then random and GP-guided
points). Reports the knob table, the best-so-far curve, and the tuning ceiling next to the
candidate's own score and the run's best. Trials run in a standalone copy of the program
branch; nothing is committed. Needs: pip install 'autoloop-py[tune]'."""


def add_parser(commands: Any) -> None:
    """Registers `autoloop tune`."""
    parser = subparser(commands, "tune", "autoloop tune function_minimization --candidate it3 --calls 24")
    parser.description = f"{_SUMMARY}\n\n{_DETAILS}\n\nexample:\n  autoloop tune function_minimization --calls 24"
    parser.add_argument("program", help="the program's name (its trace on memory/autoloop holds the candidates)")
    parser.add_argument("--candidate", metavar="ID",
                        help="the trace row to tune (seed, it3, or a strategy's candidate id; a unique prefix works); "
                             "default: the run's best")
    parser.add_argument("--at-iteration", type=int, metavar="N",
                        help="tune the best valid program found at or before iteration N instead")
    parser.add_argument("--calls", type=int, default=24, metavar="N",
                        help="evaluations in the search, the original values included "
                        "(default 24: 1 + 8 random + 15 GP)")
    parser.add_argument("--seed", type=int, default=0, help="random_state of gp_minimize (default 0)")
    parser.add_argument("--llm", metavar="MODEL",
                        help="let this litellm model choose the knobs with the paper's rules (default: the "
                             "deterministic literal finder, which is also the fallback when the reply is unusable)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (no progress lines)")
    parser.add_argument("--png", type=Path, metavar="FILE",
                        help="also draw the scores and best-so-far curve (matplotlib)")
    parser.add_argument("--write", type=Path, metavar="FILE",
                        help="write the tuned source (PARAMS block set to the best values) to FILE")
    parser.set_defaults(handler=cmd_tune)


def cmd_tune(args: argparse.Namespace, console: Console) -> int:
    """Runs the search and prints the report; exit 130 after Ctrl-C (the report covers the trials so far)."""
    if args.calls < 2:
        raise AutoloopError("--calls must be at least 2 (the original values and one more point)")
    tuning_run.gp_minimize()
    figure = figure_class() if args.png else None
    root = repo_root(args.repo)
    program = load_named(root, args.program, with_issues=False)
    with tempdirs.temporary("autoloop-trace-") as tmp:
        trace = load_trace(export_program(root, program.name, Path(tmp) / program.name))
        target = tuning_run.load_target(trace, program.direction, args.candidate, args.at_iteration)
    knobs, knob_source, notes = tuning_run.select_knobs(target.source, args.llm)
    if not args.json:
        _print_header(console, program, target, knobs, knob_source, notes)
    block = free_name(target.source)
    source_for = partial(with_values, parametrize(target.source, knobs, block), name=block)
    path, baseline, trials, interrupted = _search(args, console, root, program, target, knobs, source_for)
    info = tuning_run.run_info(program, path, target, knob_source, notes, args.calls, args.seed, interrupted)
    report = build_report(run=info, candidate=target.choice, knobs=knobs, trials=trials, baseline=baseline,
                          n_initial=initial_points(args.calls))
    show_report(report, args.json, print_report, console)
    _write_outputs(args, report, source_for, figure, console)
    return EXIT_INTERRUPT if interrupted else 0


def _search(
    args: argparse.Namespace, console: Console, root: Path, program: Program, target: tuning_run.TuneTarget,
    knobs: list[Knob], source_for: Any,
) -> tuple[str, float, list[Trial], bool]:
    """Re-measures the candidate, runs the trials in its own worktree; returns (path, baseline, trials, interrupted)."""
    with tuning_run.trial_worktree(root, program.name) as workdir:
        path = primary_target(program, workdir)
        baseline = _baseline(program, workdir, path, target)
        if not knobs:
            return path, baseline, [], False
        shown = partial(_print_trial, console, args.calls, initial_points(args.calls))
        progress = (lambda _: None) if args.json else shown  # --json keeps stdout for the report
        trials, interrupted = tuning_run.run_search(program, workdir, path, source_for, knobs, calls=args.calls,
                                                    seed=args.seed, on_trial=progress)
    return path, baseline, trials, interrupted


def _baseline(program: Program, workdir: Path, path: str, target: tuning_run.TuneTarget) -> float:
    """Returns the candidate's score re-measured in the worktree, or raises when its evaluation fails."""
    result = tuning_run.measure(program, workdir, path, target.source)
    if not result.ok or result.metric is None:
        raise AutoloopError(
            f"candidate {target.choice.id!r} fails its evaluation on the program branch ({result.error}); "
            "pick another with --candidate"
        )
    return result.metric


def _print_header(console: Console, program: Program, target: tuning_run.TuneTarget, knobs: list[Knob],
                  knob_source: str, notes: list[str]) -> None:
    choice = target.choice
    console.print(f"[bold]Tuning[/] {escape(choice.id)} of {escape(program.name)} (iteration {choice.iteration}, "
                  f"recorded {format_metric(choice.score)}; run's best {format_metric(target.run_best)})")
    for note in notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    if not knobs:
        console.print("no tunable knobs found: every numeric literal is a problem constant, an index, a shape or "
                      "repeated; nothing to search")
    else:
        console.print(f"{len(knobs)} knobs chosen by the {escape(knob_source)}: " + ", ".join(k.name for k in knobs))


def _print_trial(console: Console, calls: int, n_initial: int, trial: Trial) -> None:
    kind = trial_kind(trial.call, n_initial)
    outcome = format_metric(trial.score) if trial.error is None else f"failed: {trial.error}"
    console.print(f"  call {trial.call}/{calls} ({kind}): {outcome}  [{trial.seconds:.1f} s]", markup=False)


def print_report(report: dict[str, Any], console: Console) -> None:
    """Prints the knob table, the best-so-far curve and the ceiling against the candidate and the run's best."""
    run = report["run"]
    if not report["knobs"]:
        console.print(f"candidate {escape(report['candidate']['id'])} re-measured: {format_metric(report['baseline'])}")
        return
    _print_knobs(report, console)
    _print_curve(report, console)
    _print_verdict(report, console)
    if run["interrupted"]:
        console.print(f"[yellow]interrupted[/] after {len(report['trials'])} of {run['calls']} calls; "
                      "the report covers the trials so far")


def _print_knobs(report: dict[str, Any], console: Console) -> None:
    table = Table("knob", "line", "original", "tuned", "bounds", "scale", "family",
                  title=escape(f"knobs of {report['run']['path']} ({report['run']['knob_source']})"))
    for knob in report["knobs"]:
        tuned = "—" if knob["tuned"] is None else _number(knob["tuned"])
        table.add_row(escape(knob["name"]), str(knob["line"]), escape(knob["text"]), tuned,
                      escape(f"[{_number(knob['low'])}, {_number(knob['high'])}]"), knob["scale"],
                      escape(knob["family"]))
    console.print(table)


def _print_curve(report: dict[str, Any], console: Console) -> None:
    metric = report["run"]["metric"] or "score"
    table = Table("call", "kind", metric, "best so far", "regret", "",
                  title=f"best so far per call ({metric}, {report['run']['direction']} is better)")
    rows = report["trials"]
    regrets = [r["regret"] for r in rows if r["regret"] is not None]
    worst = max(regrets, default=0.0) or 1.0
    for row in rows:
        score = format_metric(row["score"]) if row["error"] is None else "failed"
        bar = "" if row["regret"] is None else "█" * round(20 * (1 - row["regret"] / worst))
        table.add_row(str(row["call"]), row["kind"], score, format_metric(row["best_so_far"]),
                      format_metric(row["regret"]), bar)
    console.print(table)


def _print_verdict(report: dict[str, Any], console: Console) -> None:
    baseline, ceiling, run = report["baseline"], report["ceiling"], report["run"]
    recorded = format_metric(report["candidate"]["recorded_score"])
    if report["outcome"] == "improves":
        console.print(f"[bold]Tuning ceiling[/] {format_metric(ceiling)} (call {report['best_call']}) vs the "
                      f"candidate's {format_metric(baseline)} (recorded {recorded}): gain "
                      f"{report['gain']:+.6g} ({report['relative_gain']:+.1%})")
    else:
        console.print(f"[bold]no gain[/]: no trial beat the candidate's {format_metric(baseline)} "
                      f"(recorded {recorded}); "
                      f"tuning ceiling {format_metric(ceiling)} ({report['outcome']})")
    if report["versus_run_best"] is not None:
        verb = "matches or exceeds" if report["matches_run_best"] else "stays below"
        console.print(f"the ceiling {verb} the run's best {format_metric(run['run_best'])} "
                      f"(difference {report['versus_run_best']:+.6g})")
    if report["failed_trials"]:
        console.print(f"{report['failed_trials']} trial(s) failed their evaluation and counted as penalties")


def _write_outputs(args: argparse.Namespace, report: dict[str, Any], source_for: Any, figure: Any,
                   console: Console) -> None:
    """Writes the tuned source (--write) and the figure (--png) when asked."""
    if args.write and report["knobs"]:
        values = report["best_values"] or {k["name"]: k["original"] for k in report["knobs"]}
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_bytes(source_for(values).encode("utf-8"))
        if not args.json:
            console.print(f"tuned source written to {args.write}")
    if figure is not None and report["trials"]:
        write_png(report, args.png, figure)
        if not args.json:
            console.print(f"figure written to {args.png}")


def write_png(report: dict[str, Any], path: Path, figure_class: Any) -> None:
    """Draws every trial's score, the best-so-far curve, the candidate's score and the run's best."""
    figure = figure_class(figsize=(8, 4.5), layout="constrained")
    axes = figure.subplots()
    rows = report["trials"]
    scored = [r for r in rows if r["score"] is not None]
    axes.scatter([r["call"] for r in scored], [r["score"] for r in scored], s=18, color="tab:blue", label="trial")
    best = [r for r in rows if r["best_so_far"] is not None]
    axes.step([r["call"] for r in best], [r["best_so_far"] for r in best], where="post", color="black",
              label="best so far")
    axes.axhline(report["baseline"], color="tab:gray", linestyle="--", label="candidate")
    if report["run"]["run_best"] is not None:
        axes.axhline(report["run"]["run_best"], color="tab:green", linestyle=":", label="run's best")
    axes.set_xlabel("call")
    axes.set_ylabel(report["run"]["metric"] or "score")
    axes.set_title(f"autoloop tune: {report['run']['program']} {report['candidate']['id']}")
    axes.legend(loc="best", fontsize="small")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=110)


def _number(value: Any) -> str:
    return str(value) if isinstance(value, int) else f"{value:.6g}"
