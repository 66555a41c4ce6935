"""Under act: plan installs the wheel `autoloop init` wrote and caches it for the other jobs; a broken workflow fails.

The broken workflows are the generated file with one edit, each what a careless template change would do; the
harness must report the failure (a job that did not run, a step that failed), never pass.
"""

from __future__ import annotations

import json
import shlex
import shutil
import tarfile
from pathlib import Path
from typing import Callable

import pytest

from autoloop_py.state.file import parse_state
from tests.workflows.harness import Site, Tick, agent_command, program_files, state_file

pytestmark = pytest.mark.xdist_group("act")
SCHEDULE = {"schedule": "17 */6 * * *"}


def _due_tick(site: Site, edit: Callable[[str], str] | None = None) -> Tick:
    """Runs a scheduled tick of the due sample program and asserts what a working workflow does."""
    tick = site.tick("schedule", SCHEDULE, edit=edit)
    tick.expect(plan=["success"], propose=["success"], publish=["success"])
    state = parse_state(state_file(site, "example"), "example.md")
    assert state.machine.recent_statuses == ("accepted",), tick.explain()
    return tick


def _sample(site: Site, *, own_wheel: bool = False) -> Site:
    out = site.init("--proposer", "agent", own_wheel=own_wheel)
    site.variables["AUTOLOOP_AGENT_COMMAND"] = agent_command("improve")
    site.commit("autoloop init", program_files(site, "example", "ci-gate: false\n"))
    assert "wrote .github/workflows/autoloop.yml" in out
    return site


def test_plan_installs_the_wheel_init_wrote_and_every_later_job_restores_it(site: Site) -> None:
    _sample(site, own_wheel=True)
    [wheel] = (site.work / ".autoloop/wheels").glob("autoloop_py-*-py3-none-any.whl")
    spec = f".autoloop/wheels/{wheel.name}"
    assert f"AUTOLOOP_PIP_SPEC: \"{spec}\"" in (site.work / ".github/workflows/autoloop.yml").read_text()
    assert spec in site.files("main")
    tick = _due_tick(site)
    # The cache is empty: plan installs with pip and saves; propose restores what plan saved; publish (the write
    # token's job) restores no cache and installs with pip.
    assert [s.result for s in tick.step("plan", "Install autoloop")] == ["success"]
    assert [s.result for s in tick.step("propose", "Install autoloop")] in ([], ["skipped"]), tick.explain()
    assert [s.result for s in tick.step("publish", "Install autoloop")] == ["success"], tick.explain()
    assert tick.log.count(f"Processing ./{spec}") == 2, tick.explain()
    assert tick.log.count("Cache restored from key: autoloop-base-") == 1, tick.explain()
    # The cache holds plan's install: autoloop from that wheel (not the test's own, which the jobs' Python lacks:
    # propose ran `autoloop` from what it restored).
    [(key, tar)] = site.caches().items()
    files = tarfile.open(tar)
    assert key.startswith("autoloop-base-") and "," not in key
    names = files.getnames()
    [record] = [n for n in names if n.endswith(".dist-info/direct_url.json") and "/autoloop_py-" in n]
    assert json.loads(files.extractfile(record).read())["url"].endswith(f"/{spec}")  # type: ignore[union-attr]
    assert any(n.endswith("site-packages/autoloop_py/__init__.py") for n in names)
    script = files.extractfile(next(n for n in names if n.endswith("/bin/autoloop")))
    assert script is not None
    # `#!<python>`, or for a long path `#!/bin/sh` and an `exec` line naming it: the saving job's Python either way.
    head = b"".join(script.readline() for _ in range(3))
    assert f"{site.root}/tick1/toolcache/setup-python-plan-".encode() in head, head

    # The Python that installed it is gone (each runner has its own): the restored script runs this job's.
    shutil.rmtree(site.root / "tick1/toolcache")
    # Nothing is due on the next tick: plan alone runs, restores the install and calls pip for nothing.
    idle = site.tick("schedule", SCHEDULE)
    idle.expect(plan=["success"], propose=[], publish=[])
    assert "Processing ./" not in idle.log and idle.log.count("Cache restored from key: autoloop-base-") == 1
    assert [s.result for s in idle.step("plan", "Install autoloop")] in ([], ["skipped"]), idle.explain()

    # A new wheel (init --upgrade writes a new spec into the workflow): a new key, one install again.
    text = (site.work / ".github/workflows/autoloop.yml").read_text()
    site.commit("a later autoloop", {".github/workflows/autoloop.yml": text + "# upgraded\n"})
    after = site.tick("workflow_dispatch", {"inputs": {"program": "example"}})
    after.expect(plan=["success"], propose=["success"], publish=["success"])
    assert after.log.count(f"Processing ./{spec}") == 2, after.explain()  # plan (then saved) and publish


def _escaped_candidate(marker: Path) -> Callable[[str], str]:
    """Returns an edit adding a step after propose's proposal: code that escaped the sandbox rewrites the job's
    autoloop install so that autoloop's publish appends to marker (a file of the test's own folder)."""
    def edit(text: str) -> str:
        anchor = "      - uses: actions/upload-artifact@v4\n"
        assert text.count(anchor) == 1
        line = f"open({str(marker)!r}, 'a').write('publish ran code a propose job wrote\\n')"
        step = ("      - name: Escaped candidate\n        run: |\n"
                '          for module in "$PYTHONUSERBASE"/lib/python*/site-packages/autoloop_py/commands/publish.py; do\n'
                f'            printf "%s\\n" {shlex.quote(line)} >> "$module"\n'
                '            echo "rewrote $module"\n'
                "          done\n")
        return text.replace(anchor, step + anchor)
    return edit


def test_an_install_a_propose_job_rewrote_never_reaches_publish(site: Site, tmp_path: Path) -> None:
    _sample(site)
    marker = tmp_path / "tampered"
    tick = _due_tick(site, _escaped_candidate(marker))
    assert [s.result for s in tick.step("propose", "Escaped candidate")] == ["success"]
    assert tick.log.count("rewrote ") == 1, tick.explain()
    # Publish installed its own copy, not propose's: the rewritten module never ran, and no cache holds it.
    assert not marker.exists()
    [(key, tar)] = site.caches().items()
    with tarfile.open(tar) as files:
        [module] = [n for n in files.getnames() if n.endswith("site-packages/autoloop_py/commands/publish.py")]
        assert b"tampered" not in files.extractfile(module).read()  # type: ignore[union-attr]
    # The next tick restores the same clean install everywhere.
    after = site.tick("workflow_dispatch", {"inputs": {"program": "example"}})
    after.expect(plan=["success"], propose=["success"], publish=["success"])
    assert not marker.exists() and list(site.caches()) == [key]


def _renamed_plan_step(text: str) -> str:
    assert text.count("        id: plan\n") == 1
    return text.replace("        id: plan\n", "        id: planned\n")


def _outcome_path_typo(text: str) -> str:
    upload = "          path: ${{ runner.temp }}/autoloop-outcome\n          if-no-files-found: error\n"
    assert text.count(upload) == 1
    return text.replace(upload, upload.replace("autoloop-outcome\n", "autoloop-outcomes\n"))


@pytest.mark.parametrize("edit, failure", [
    (_renamed_plan_step, r"propose: \[\] != \['success'\]"),
    (_outcome_path_typo, r"propose: \['failure'\] != \['success'\][\s\S]*No files were found with the provided path"),
], ids=["plan step renamed: its matrix is lost", "upload path typo: if-no-files-found error"])
def test_a_broken_workflow_fails_the_scenario(site: Site, edit: Callable[[str], str], failure: str) -> None:
    _sample(site)
    with pytest.raises(AssertionError, match=failure):
        _due_tick(site, edit)
    assert set(site.refs()) == {"refs/heads/main"}
