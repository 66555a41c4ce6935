"""Under act: this repository's own `.github/workflows/tests.yml` (both Python versions of its matrix).

The whole suite inside the suite would take its full time twice, so the job's `bash .ci/run` runs with
PYTEST_ADDOPTS naming one small test file, and `-n auto` starts one worker (PYTEST_XDIST_AUTO_NUM_WORKERS: four
workers, each importing the test fixtures, cost more than the file's tests); everything else of .ci/run runs as
written (its apt-get and npm steps find no network and say so, as they do on a machine without it).
"""

from __future__ import annotations

import re

import pytest

from tests.workflows.harness import Site

pytestmark = pytest.mark.xdist_group("act")
TINY = "tests/test_redact.py"


def test_the_tests_workflow_runs_a_tiny_selection(site: Site) -> None:
    site.copy_checkout()
    site.env["PYTEST_ADDOPTS"] = f"-p no:cacheprovider {TINY}"
    site.env["PYTEST_XDIST_AUTO_NUM_WORKERS"] = "1"
    # `pip install -e .` builds in the machine's Python (setuptools is installed): no index to fetch it from.
    site.env["PIP_NO_BUILD_ISOLATION"] = "false"
    tick = site.tick("push", {"ref": "refs/heads/main"}, workflow=".github/workflows/tests.yml")
    tick.expect(test=["success", "success"])
    assert sorted(run.matrix.get("python-version") for run in tick.runs("test")) == ["3.10", "3.12"]
    assert [s.result for s in tick.step("test", "bash .ci/run")] == ["success", "success"], tick.explain()
    passed = re.findall(r"\] (\d+) passed in ", tick.log)
    assert len(passed) == 2 and all(int(n) > 0 for n in passed), tick.explain()
    assert "failed" not in " ".join(re.findall(r"\] \d+ \w+.* in [\d.]+s", tick.log)), tick.explain()
