"""`autoloop judge`: label every parent→child edit of a run with the nine-label edit taxonomy, an LLM as judge."""

from __future__ import annotations

import argparse
import functools
import os
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autoloop_py.analysis.judge import (
    KEYS,
    JudgeSettings,
    VerdictCache,
    edits_of,
    judge_all,
    judgement_dict,
    summarize,
)
from autoloop_py.commands.common import format_metric, format_percent, show_report, subparser
from autoloop_py.commands.trace import opened
from autoloop_py.errors import AutoloopError
from autoloop_py.loop.iteration.model_use import check_budget, record_spend
from autoloop_py.proposers import llm
from autoloop_py.proposers.base import Usage
from autoloop_py.proposers.setup import check_model
from autoloop_py.state.trace import Trace

NO_MODEL = ("no judge model: pass --model with a litellm model name (for example --model deepseek/deepseek-chat), "
            "or set AUTOLOOP_MODEL")
MAX_TOKENS = 800


def add_parser(commands: Any) -> None:
    """Registers `autoloop judge`."""
    parser = subparser(commands, "judge", "autoloop judge function_minimization --model deepseek/deepseek-chat")
    parser.add_argument("target", help="a program's name (its trace on memory/autoloop) or an EvoTrace run directory")
    parser.add_argument("--model", help="litellm model that judges (default: AUTOLOOP_MODEL, else the run's own model)")
    parser.add_argument("--concurrency", type=int, default=4, metavar="N", help="edits judged at once (default 4)")
    parser.add_argument("--limit", type=int, metavar="N", help="judge only the first N edits, in iteration order")
    parser.add_argument("--retries", type=int, default=3, metavar="N",
                        help="extra attempts after a failed call (with exponential backoff) or an invalid reply "
                        "(default 3)")
    parser.add_argument("--cache", type=Path, metavar="DIR",
                        help="where valid verdicts are kept, keyed by sha256(model, prompt) "
                        "(default ~/.cache/autoloop/judge)")
    parser.add_argument("--show-scores", action="store_true",
                        help="tell the judge each edit's score change "
                        "(off by default: EvoReplay's judge never sees scores)")
    parser.add_argument("--json", action="store_true", help="print the summary and every edit's labels as JSON")
    parser.epilog = "labels: " + ", ".join(KEYS)
    parser.set_defaults(handler=cmd_judge)


def cmd_judge(args: argparse.Namespace, console: Console) -> int:
    """Judges the run's edits and prints per-label prevalence and score changes (tables or JSON)."""
    _check_numbers(args)
    with opened(args.target, args.repo) as target:
        model = args.model or os.environ.get(llm.MODEL_ENV) or recorded_model(target.trace)
        if not model:
            raise AutoloopError(NO_MODEL)
        edits = edits_of(target.trace)[: args.limit]
        if edits:
            check_model(model)
        settings = JudgeSettings(
            model, retries=args.retries, concurrency=args.concurrency, show_scores=args.show_scores
        )
        if edits and target.program is not None and target.root is not None:
            check_budget(target.root, target.program, "judge")
        spent: list[Usage] = []
        try:
            judgements = judge_all(edits, settings, functools.partial(ask_judge, spent=spent),
                                   VerdictCache(args.cache or Path.home() / ".cache" / "autoloop" / "judge"))
        finally:
            if target.program is not None and target.root is not None:
                record_spend(target.root, target.program, spent, "judge")
        report = {"run": target.label, "model": model, "summary": summarize(judgements),
                  "edits": [judgement_dict(j) for j in judgements]}
    show_report(report, args.json, print_report, console)
    return 0


def _check_numbers(args: argparse.Namespace) -> None:
    if args.concurrency < 1:
        raise AutoloopError("--concurrency must be at least 1")
    if args.limit is not None and args.limit < 1:
        raise AutoloopError("--limit must be at least 1")
    if args.retries < 0:
        raise AutoloopError("--retries must be 0 or more")


def recorded_model(trace: Trace) -> str | None:
    """Returns the model that proposed most of the run's candidates, None when the trace names none."""
    models = Counter(row.model or row.model_name for row in trace.rows if row.model or row.model_name)
    return models.most_common(1)[0][0] if models else None


def ask_judge(model: str, prompt: str, spent: list[Usage] | None = None) -> str:
    """Returns the judge's reply at temperature 0 (AUTOLOOP_MOCK_RESPONSE, when set, answers instead).

    drop_params: models that refuse `temperature` (reasoning models) get the call without it; spent: gets
    the reply's usage appended (the judge's calls count in the program's spend).
    """
    return llm.complete(model, prompt, temperature=0, max_tokens=MAX_TOKENS, drop_params=True, spent=spent)


def print_report(report: dict[str, Any], console: Console) -> None:
    """Prints the label table, the common label pairs and the edits that got no verdict."""
    summary = report["summary"]
    console.print(f"[bold]Judged[/] {summary['n_judged']} of {summary['n_edits']} edits of {escape(report['run'])} "
                  f"with {escape(report['model'])} ({summary['n_cache_hits']} from the cache, "
                  f"{summary['n_failed']} without a verdict)")
    if not summary["n_edits"]:
        console.print("no parent→child edit has both sources in the trace; nothing to judge")
        return
    table = Table("label", "edits", "prevalence", "mean change", "median change", "odds ratio (improves)",
                  title="edit labels (score change: positive is better)")
    for key, row in sorted(summary["labels"].items(), key=lambda item: -item[1]["count"]):
        odds = row["odds_ratio_positive"]
        table.add_row(key, str(row["count"]), format_percent(row["prevalence"]), format_metric(row["mean_change"]),
                      format_metric(row["median_change"]), "—" if odds is None else f"{odds:.2f}")
    console.print(table)
    if summary["multi_label_share"] is not None:
        console.print(f"{format_percent(summary['multi_label_share'])} of edits carry more than one label; "
                      f"{summary['mean_labels']:.2f} labels per edit")
    for pair in summary["co_occurrence"]:
        console.print(f"  {pair['count']}× {' + '.join(pair['labels'])}")
    for edit in report["edits"]:
        if edit["error"]:
            console.print(f"[yellow]no verdict[/] for {escape(edit['program_id'])}: {escape(edit['error'])}")

