"""act's `--json` log of one workflow run, as job and step results with their wall times (a `Tick`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class Step:
    """One top-level step of one job run (a matrix job is one run per matrix entry).

    Attributes:
      job: the job's id (plan, propose, publish).
      matrix: the run's matrix values.
      name: the step's name as act logs it (`uses` for an unnamed action step).
      stage: Pre, Main or Post.
      result: success, failure or skipped.
      seconds: its wall time.
    """

    job: str
    matrix: dict[str, Any]
    name: str
    stage: str
    result: str
    seconds: float


@dataclass(frozen=True)
class Job:
    """One job run: its id, matrix values, result (success or failure) and wall time."""

    job: str
    matrix: dict[str, Any]
    result: str
    seconds: float


@dataclass(frozen=True)
class Tick:
    """What one `act` run of the workflow did.

    Attributes:
      returncode: act's exit code (0 when every job that ran succeeded).
      jobs: the job runs that started, in the order they finished.
      steps: their top-level steps.
      log: act's log as text (one line per message), for failure messages.
      not_run: the workflow steps the harness could not run here, each with the reason.
      seconds: the whole run's wall time.
    """

    returncode: int
    jobs: tuple[Job, ...]
    steps: tuple[Step, ...]
    log: str
    not_run: tuple[str, ...] = ()
    seconds: float = 0.0

    def runs(self, job: str) -> list[Job]:
        """Returns the runs of a job id (one per matrix entry)."""
        return [run for run in self.jobs if run.job == job]

    def results(self, job: str) -> list[str]:
        """Returns the results of a job id's runs, sorted."""
        return sorted(run.result for run in self.runs(job))

    def step(self, job: str, name: str, stage: str = "Main", **matrix: Any) -> list[Step]:
        """Returns the runs of a step of a job (those whose matrix has the given values)."""
        return [
            s for s in self.steps
            if s.job == job and s.name == name and s.stage == stage
            and all(s.matrix.get(k) == v for k, v in matrix.items())
        ]

    def failed_steps(self) -> list[Step]:
        """Returns the steps that failed."""
        return [s for s in self.steps if s.result == "failure"]

    def explain(self) -> str:
        """Returns the failed steps and the log's tail: what an assertion message should show."""
        failed = "".join(f"\n  {s.job} {s.matrix}: {s.stage} {s.name}" for s in self.failed_steps())
        errors = "".join(f"\n  {line.strip()}" for line in self.log.splitlines() if "::error::" in line)
        tail = "\n".join(self.log.splitlines()[-40:])
        return (f"act exited {self.returncode}; failed steps:{failed or ' none'}\nerrors:{errors or ' none'}"
                f"\n--- act log (tail) ---\n{tail}")

    def expect(self, **jobs: list[str]) -> Tick:
        """Asserts the results of each named job (e.g. plan=["success"], propose=[]); returns self."""
        for job, want in jobs.items():
            assert self.results(job) == sorted(want), f"{job}: {self.results(job)} != {sorted(want)}\n{self.explain()}"
        return self


def parse_log(text: str) -> tuple[tuple[Job, ...], tuple[Step, ...], str]:
    """Returns the job runs, top-level steps and text of act's `--json` log."""
    jobs: list[Job] = []
    steps: list[Step] = []
    lines: list[str] = []
    started: dict[tuple[str, str], str] = {}
    for raw in text.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            lines.append(raw)
            continue
        if not isinstance(entry, dict):
            continue
        job_id, matrix = str(entry.get("jobID", "")), entry.get("matrix") or {}
        lines.append(f"[{entry.get('job', '')}] {_ANSI.sub('', str(entry.get('msg', '')))}")
        key = (job_id, json.dumps(matrix, sort_keys=True))
        started.setdefault(key, str(entry.get("time", "")))
        if "jobResult" in entry:
            jobs.append(Job(job_id, matrix, str(entry["jobResult"]), _seconds(started[key], str(entry["time"]))))
        elif "stepResult" in entry and len(entry.get("stepID") or []) == 1:
            seconds = int(entry.get("executionTime", 0)) / 1e9
            steps.append(Step(job_id, matrix, str(entry["step"]), str(entry.get("stage", "")),
                              str(entry["stepResult"]), seconds))
    return tuple(jobs), tuple(steps), "\n".join(lines)


def _seconds(start: str, end: str) -> float:
    """Returns the seconds between two of act's log times (whole seconds)."""
    try:
        return (datetime.fromisoformat(end.replace("Z", "+00:00"))
                - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
    except ValueError:
        return 0.0
