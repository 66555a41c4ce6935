"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import pytest

from autoloop_py.proposers.model_calls import import_litellm


@pytest.fixture(scope="session", autouse=True)
def _models_called_in_this_process() -> None:
    """Imports litellm once per test process, so the runs these tests start in it make their model calls here, as
    `run` does where litellm is already imported, instead of each starting a model worker that imports it again
    (seconds of CPU a run). The worker is tested on its own: test_model_worker_run.py runs the CLI in processes of
    its own, and tests/proposers/test_model_worker.py."""
    import_litellm()
