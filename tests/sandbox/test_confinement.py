"""Tests for autoloop_py.sandbox.confinement: one line, one truth about where and as whom evaluations run."""

from __future__ import annotations

import pytest

from autoloop_py.sandbox import confinement, run, slot_user


def test_bubblewrap_says_sandboxed_and_nothing_about_uids() -> None:
    line = confinement.describe(sandboxed=True, whose=" of a, b")
    assert line == "sandbox: evaluations of a, b and agents run in bubblewrap (only the candidate's copy is writable)"


def test_a_non_root_runner_without_bubblewrap_runs_them_as_itself() -> None:
    line = confinement.describe(sandboxed=False, reason="isolation: none was requested")
    assert line == ("NOT SANDBOXED (isolation: none was requested): evaluations and agents run as you, "
                    "with your files and network")
    assert "uid of their own" not in line


def test_a_root_runner_without_bubblewrap_gives_them_a_uid_of_their_own() -> None:
    line = confinement.describe(sandboxed=False, reason="bubblewrap (`bwrap`) is not installed", root=True)
    assert line.startswith("NOT SANDBOXED (bubblewrap (`bwrap`) is not installed): evaluations and agents run as a "
                           f"uid of their own (from {slot_user.FIRST_UID})")
    assert "as you" not in line and "as root" not in line


def test_a_root_runner_that_cannot_give_a_uid_says_they_run_as_root() -> None:
    line = confinement.describe(sandboxed=False, reason="isolation: none", root=True, why_no_uid="AUTOLOOP_SLOT_USER=off")
    assert "run as root (AUTOLOOP_SLOT_USER=off), with your files and network" in line
    assert "uid of their own" not in line and "as you" not in line


@pytest.mark.parametrize("slot_env", ["", "off"])
def test_the_run_warns_the_same_line_status_and_check_print(
    slot_env: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`run` (isolation_for) and `status`/`check` (isolation_report) both print unsandboxed_line: one message."""
    environ = {slot_user.ENV_VAR: slot_env} if slot_env else {}
    expected = run.unsandboxed_line("isolation: none was requested", environ)
    with caplog.at_level("WARNING", logger="autoloop_py.sandbox.run"):
        run.isolation_for("none", network=False, environ=environ)
    assert expected in [record.getMessage() for record in caplog.records]
    assert sum("SANDBOXED" in record.getMessage() for record in caplog.records) == 1
