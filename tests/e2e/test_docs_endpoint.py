"""End to end: docs/models.md's recipe for your own OpenAI-compatible server, run as written against a loopback one,
and its `models:` example read as a program's frontmatter reads it.

The page's bash block sets OPENAI_API_BASE, a dummy OPENAI_API_KEY and AUTOLOOP_MODEL=openai/<name>;
here the base URL points at tests/fake_openai.py's server, the other two stay as the page writes them.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from autoloop_py.cli import main
from autoloop_py.program.models import GUIDE, SELECTIONS, parse_models, proposers, with_role
from tests.e2e.test_run import PROG, VALUE, _state, counter_repo  # noqa: F401 - the counter program fixture
from tests.fake_openai import fake_openai
from tests.programs import REPO

REPLY = (f"SUMMARY: raise x to three\n\n{PROG}/code/value.py\n<<<<<<< SEARCH\nx = 1.0\n=======\nx = 3.0\n"
         ">>>>>>> REPLACE\n")


def recipe() -> tuple[dict[str, str], list[str]]:
    """Returns the variables docs/models.md exports for its own-server recipe and the autoloop command it runs."""
    text = (REPO / "docs/models.md").read_text(encoding="utf-8")
    section = text[text.index("## Your own OpenAI-compatible server"):]
    block = section[section.index("```bash\n") + 8: section.index("\n```", section.index("```bash\n"))]
    exports: dict[str, str] = {}
    command: list[str] = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"]:
            name, _, value = words[1].partition("=")
            exports[name] = value
        elif words[:1] == ["autoloop"]:
            command = words[1:]
    return exports, command


def test_the_recipe_names_what_litellm_needs() -> None:
    exports, command = recipe()
    assert set(exports) == {"OPENAI_API_BASE", "OPENAI_API_KEY", "AUTOLOOP_MODEL"}
    assert exports["AUTOLOOP_MODEL"].startswith("openai/") and exports["OPENAI_API_BASE"].endswith("/v1")
    assert command[:1] == ["run"] and "--proposer" in command and "llm" in command


def test_your_own_server_as_the_page_writes_it(counter_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exports, command = recipe()
    command = [word if word != "speedup" else "counter" for word in command]  # the page's program is speedup
    with fake_openai("reply", monkeypatch, reply=REPLY) as server:
        # The page's values, but the base URL of the loopback server and the page's dummy key, not the fixture's.
        monkeypatch.setenv("OPENAI_API_KEY", exports["OPENAI_API_KEY"])
        monkeypatch.setenv("AUTOLOOP_MODEL", exports["AUTOLOOP_MODEL"])
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # litellm would prefer it over OPENAI_API_BASE
        assert main([*command, "--repo", str(counter_repo)]) == 0
    assert server.requests == 1
    entry = _state(counter_repo).history[0]
    assert entry.status == "accepted", entry.text
    kept = subprocess.run(["git", "show", f"autoloop/counter:{PROG}/code/value.py"], cwd=counter_repo,
                          capture_output=True, text=True, check=True).stdout
    assert kept == VALUE.format(x=3.0)


def test_without_the_dummy_key_nothing_reaches_the_server(counter_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exports, command = recipe()
    command = [word if word != "speedup" else "counter" for word in command]
    with fake_openai("reply", monkeypatch, reply=REPLY) as server:
        monkeypatch.delenv("OPENAI_API_KEY")
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        monkeypatch.setenv("AUTOLOOP_MODEL", exports["AUTOLOOP_MODEL"])
        main([*command, "--repo", str(counter_repo)])
    assert server.requests == 0


def test_the_pages_models_example_is_a_valid_frontmatter() -> None:
    text = (REPO / "docs/models.md").read_text(encoding="utf-8")
    section = text[text.index("## Several models"):]
    block = section[section.index("```yaml\n") + 8: section.index("\n```", section.index("```yaml\n"))]
    data = yaml.safe_load(block)
    specs = parse_models(data["models"])
    assert data["model-selection"] == "ucb" and "ucb" in SELECTIONS
    local = next(spec for spec in specs if spec.api_base)
    assert local.name.startswith("openai/") and local.api_key_env == "LOCAL_LLM_KEY"
    assert with_role(specs, GUIDE) is not None and len(proposers(specs)) == 3
