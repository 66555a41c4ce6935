"""`autoloop analyze PROGRAM|DIR`: lineage, cycling and tuning diagnostics of a recorded run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autoloop_py.analysis.report import BUCKETS, build_report
from autoloop_py.commands.common import format_metric, format_percent, show_report, subparser
from autoloop_py.commands.trace import opened
from autoloop_py.errors import AutoloopError

PLOT_HINT = "--png needs matplotlib; install it with: pip install 'autoloop-py[plot]'"
_KINDS = ("literal", "tuning", "trivial", "any")


def add_parser(commands: Any) -> None:
    """Registers `autoloop analyze`."""
    parser = subparser(commands, "analyze", "autoloop analyze function_minimization --png run.png")
    parser.add_argument("target", help="a program's name (its trace on memory/autoloop) or an EvoTrace run directory")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of tables")
    parser.add_argument("--png", type=Path, metavar="FILE", help="also draw the best-so-far and cycling curves")
    parser.set_defaults(handler=cmd_analyze)


def cmd_analyze(args: argparse.Namespace, console: Console) -> int:
    """Prints the report (tables or JSON) and writes the figure when asked."""
    figure = figure_class() if args.png else None
    report = analyze_target(args.target, args.repo)
    show_report(report, args.json, print_report, console)
    if figure is not None:
        write_png(report, args.png, figure)
        if not args.json:
            console.print(f"figure written to {args.png}")
    return 0


def analyze_target(target: str, repo: Path | None) -> dict[str, Any]:
    """Returns the report of a trace directory, or of a program's trace exported from the memory branch."""
    with opened(target, repo, strict=False) as run:
        report = build_report(run.trace)
    if not Path(target).is_dir():  # the exported copy is gone: name the memory branch's folder
        report["run"]["directory"] = run.label
    return report


def print_report(report: dict[str, Any], console: Console) -> None:
    """Prints the report as rich tables."""
    run = report["run"]
    statuses = ", ".join(f"{count} {status}" for status, count in run["statuses"].items())
    name = escape(str(run["program"] or run["directory"]))
    console.print(f"[bold]Run[/] {name} ({escape(str(run['backend'] or 'unknown backend'))}): "
                  f"{run['n_programs']} programs ({escape(statuses)}), {run['n_valid']} valid; "
                  f"metric {escape(str(run['metric'] or 'primary score'))}, {run['direction']} is better")
    _print_lineage(report["lineage"], console)
    _print_cycling(report["cycling"], console)
    _print_tuning(report["tuning_share"], console)
    _print_models(report["models"], console)


def _print_models(models: list[dict[str, Any]], console: Console) -> None:
    """Prints per model: candidates, the share kept, the metric gained and the spend (nothing when none is named)."""
    if not models:
        return
    table = Table("model", "calls", "accepted", "improvement", "tokens", "spend", title="models")
    for row in models:
        table.add_row(escape(row["model"]), str(row["calls"]), f"{row['accepted']} ({row['accepted_share']:.0%})",
                      format_metric(row["improvement"]), str(row["tokens"]),
                      f"${row['cost']:.4f}" if row["cost"] else "—")
    console.print(table)


def _print_lineage(lineage: dict[str, Any] | None, console: Console) -> None:
    if lineage is None:
        console.print("\n[bold]Lineage[/]: no program has a valid score")
        return
    console.print(
        f"\n[bold]Final best[/] {escape(lineage['best_id'])} = {format_metric(lineage['best_score'])} at iteration "
        f"{lineage['best_iteration']} (normalized {lineage['normalized_best_iteration']:.2f}); lineage depth "
        f"{lineage['depth']} of {lineage['n_programs']} programs, dead-branch share {lineage['dead_share']:.0%}; "
        f"{lineage['n_events']} best-so-far events, {lineage['n_events_in_lineage']} on the lineage"
    )
    table = Table("iteration", "id", "score", "Δscore", "Δscore / total gain", "Δlines", "on lineage",
                  title="best-so-far events")
    for event in lineage["events"]:
        table.add_row(str(event["iteration"]), escape(event["id"]), format_metric(event["score"]),
                      format_metric(event["delta_score"]), format_percent(event["delta_score_norm"]),
                      "—" if event["delta_lines"] is None else str(event["delta_lines"]),
                      "yes" if event["in_lineage"] else "no")
    console.print(table)


def _print_cycling(cycling: dict[str, Any], console: Console) -> None:
    if not cycling["run_wide"]["n_edits"]:
        console.print("\n[bold]Cycling[/]: no parent→child edit has both sources in the trace")
        return
    table = Table("variant", "edits", "added", *_KINDS, "median/edit (any)", "slope (any)", "median span",
                  title="cycling: share of added lines re-introducing deleted ones")
    for name in ("run_wide", "lineage"):
        summary = cycling[name]
        shares = summary["share_of_added_lines"]
        slope = summary["slopes"]["any"]
        table.add_row(name.replace("_", "-"), str(summary["n_edits"]), str(summary["n_added_lines"]),
                      *(format_percent(shares[k]) for k in _KINDS),
                      format_percent(summary["median_per_edit_ratios"]["any"]),
                      "—" if slope is None else f"{slope:+.4f}", format_metric(summary["spans"]["median"]))
    console.print(table)
    raw = cycling["raw"]
    console.print(f"raw detector: {format_percent(raw['identical_share'])} byte-identical, "
                  f"{format_percent(raw['skeleton_share'])} with numbers collapsed")
    spans = cycling["run_wide"]["spans"]["bins"]
    console.print("run-wide spans: " + ", ".join(f"{label}: {count}" for label, count in spans.items()))
    for item in cycling["run_wide"]["top_lines"]:
        console.print(f"  {item['count']}× {item['kind']:<8} {item['line']}", markup=False)


def _print_tuning(tuning: dict[str, Any], console: Console) -> None:
    buckets = ", ".join(f"{bucket} {tuning['buckets'][bucket]}" for bucket in BUCKETS)
    share = format_percent(tuning["share_of_code_lines"])
    console.print(f"\n[bold]Tuning share[/] of changed code lines: {share} over "
                  f"{tuning['n_edits']} edits ({buckets})")


def figure_class() -> Any:
    """Returns matplotlib's Figure class, or raises the one-line install hint."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise AutoloopError(PLOT_HINT) from None
    return Figure


def write_png(report: dict[str, Any], path: Path, figure_class: Any) -> None:
    """Draws the best-so-far curve with every scored candidate, and the cycling rate per iteration."""
    figure = figure_class(figsize=(9, 7), layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True)
    _plot_scores(top, report)
    _plot_cycling(bottom, report["cycling"])
    figure.suptitle(f"autoloop analyze: {report['run']['program'] or report['run']['directory']}")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=110)


def _plot_scores(axes: Any, report: dict[str, Any]) -> None:
    points = [p for p in report["points"] if p["score"] is not None]
    for status, style in (("accepted", dict(color="tab:green", marker="o")),
                          ("rejected", dict(color="tab:red", marker="x"))):
        chosen = [p for p in points if p["status"] == status]
        if chosen:
            axes.scatter([p["iteration"] for p in chosen], [p["score"] for p in chosen], s=18, label=status, **style)
    events = (report["lineage"] or {}).get("events", [])
    if events:
        xs = [e["iteration"] for e in events] + [report["run"]["max_iteration"]]
        ys = [e["score"] for e in events] + [events[-1]["score"]]
        axes.step(xs, ys, where="post", color="black", label="best so far")
    axes.set_ylabel(report["run"]["metric"] or "score")
    axes.set_title(f"best so far ({report['run']['direction']} is better)")
    if axes.get_legend_handles_labels()[0]:
        axes.legend(loc="best", fontsize="small")


def _plot_cycling(axes: Any, cycling: dict[str, Any]) -> None:
    for name, color in (("run_wide", "tab:blue"), ("lineage", "tab:orange")):
        series = cycling[name]["per_iteration"]
        xs = [r["iteration"] for r in series]
        axes.plot(xs, [r["frac_any"] for r in series], color=color, alpha=0.35, marker=".", linewidth=0.8)
        axes.plot(xs, [r["rolling_any"] for r in series], color=color, label=f"{name.replace('_', '-')} (rolling 5)")
    axes.set_xlabel("iteration")
    axes.set_ylabel("recycled share of added lines")
    axes.set_ylim(bottom=0)
    axes.legend(loc="best", fontsize="small")
