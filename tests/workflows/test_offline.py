"""The act harness's offline guard: a job that reaches for the network is caught at the recording proxy.

Every scenario's site asserts at teardown that its proxy saw nothing; these tests show that the proxy does see a
job's request and act's own notices check (so that silence means something), and that act, started as the
harness starts it (ACT_DISABLE_VERSION_CHECK), sends nothing.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.workflows.harness import Site, act_binary
from tests.workflows.offline import RecordingProxy

pytestmark = pytest.mark.xdist_group("act")
PROBE = """\
name: probe
on: workflow_dispatch
jobs:
  probe:
    runs-on: ubuntu-latest
    steps:
      - name: Reach for the network
        run: python3 -c "import urllib.request; urllib.request.urlopen('https://example.invalid/x', timeout=10)"
"""


def test_a_job_that_reaches_for_the_network_is_caught(tmp_path: Path) -> None:
    with RecordingProxy() as proxy:
        site = Site(tmp_path / "site", "http://127.0.0.1:9", tmp_path / "no.whl", proxy=proxy.url)
        site.commit("probe", {".github/workflows/probe.yml": PROBE})
        tick = site.tick("workflow_dispatch", workflow=".github/workflows/probe.yml")
    tick.expect(probe=["failure"])
    assert "403" in tick.log, tick.explain()
    assert [line.rsplit(" ", 1)[0] for line in proxy.requests] == ["CONNECT example.invalid:443"]


def test_act_asks_for_its_notices_unless_the_harness_turns_that_off(tmp_path: Path) -> None:
    with RecordingProxy() as proxy:
        site = Site(tmp_path / "site", "http://127.0.0.1:9", tmp_path / "no.whl", proxy=proxy.url)
        site.commit("probe", {".github/workflows/probe.yml": PROBE})
        act = act_binary()
        assert act is not None
        listing = [act, "--list", "-W", ".github/workflows/probe.yml"]
        env = site.base_env()
        assert subprocess.run(listing, cwd=site.work, env=env, capture_output=True).returncode == 0
        assert proxy.requests == []
        del env["ACT_DISABLE_VERSION_CHECK"]
        assert subprocess.run(listing, cwd=site.work, env=env, capture_output=True).returncode == 0
    assert [line.rsplit(" ", 1)[0] for line in proxy.requests] == ["CONNECT api.nektosact.com:443"]
