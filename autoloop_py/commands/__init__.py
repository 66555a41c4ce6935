"""One module per `autoloop` command; each exposes add_parser() and a cmd_<name>() function."""

from __future__ import annotations

# Every command: its module here and its one-line help (common.subparser gives it to the command's parser). The module
# (and what it imports) is loaded only for the command that runs, so `--version` and `--help` start fast;
# tests/test_cli_commands.py checks that every module registers its commands.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "Run iterations: propose a change, evaluate it, keep it only if the metric improved."),
    "publish": ("publish", "Publish an iteration that `autoloop run --outcome-dir` proposed: check it, commit and push "
                "its candidate, record it on the memory branch (and, with --ci, on the program issue). Runs no "
                "candidate code."),
    "check": ("check", "Validate every program under .autoloop/programs/."),
    "status": ("status", "Show what each program is doing."),
    "state": ("show", "Print a program's state file from branch memory/autoloop."),
    "edit": ("edit", "Edit a program's state file on memory/autoloop in $EDITOR (or take --file), validated before it "
             "is committed."),
    "schedule": ("schedule", "Show which programs are due now."),
    "pause": ("pause", "Pause a program until it is resumed."),
    "resume": ("pause", "Resume a paused program (also clears a plateau)."),
    "new": ("new", "Scaffold a program under .autoloop/programs/, optionally with a strategy playbook."),
    "strategy": ("strategy", "Add a strategy (AlphaEvolve, AdaEvolve, EvoX, FunSearch) to an existing program, list "
                 "or remove one."),
    "customize": ("customize", "Resolve a program's <CUSTOMIZE…> markers: from an --answers file, or a model drafts "
                  "them (shows the diff, writes with --write)."),
    "prompt": ("prompt", "Print the next iteration's prompt (the strategy's decision included) for an outside agent."),
    "record": ("record", "Record the outcome of an iteration whose change an outside agent made in the working tree."),
    "ci": ("ci_checks", "Settle the kept candidate waiting for CI, from the checks of its pull request (Agentic "
           "Workflows)."),
    "deps": ("deps", "Show (or install with pip) what a program's evaluation needs: `requirements:` or "
             "requirements.txt."),
    "init": ("init", "Install the autoloop workflows, the strategy templates and a sample program into this "
             "repository."),
    "analyze": ("analyze", "Diagnose a run: lineage of the best, best-so-far events, cycling, tuning share."),
    "report": ("report", "Write a static HTML report of a run: metric curve, evolution tree (click a node for its "
               "diff), Population."),
    "trace": ("trace", "Work with the run traces recorded on branch memory/autoloop."),
    "replay": ("replay", "Re-send the saved prompt that produced a candidate and measure how reproducible it is."),
    "judge": ("judge", "Label each parent→child edit of a run with the nine-label edit taxonomy, using an LLM as "
              "judge."),
    "tune": ("tune", "Tune one candidate's numeric constants with Bayesian optimisation: how much of the run's gain is "
             "just tuning?"),
}
