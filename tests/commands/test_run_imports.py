"""Tests for commands/run.py's imports: what `autoloop run` loads before its first model request."""

from __future__ import annotations

import subprocess
import sys


def test_the_run_command_imports_no_github_slots_or_http_client_before_its_first_request() -> None:
    # The modules __main__.py imports for `autoloop run --proposer llm`, in a fresh interpreter.
    script = (
        "import sys\nimport autoloop_py.__main__, autoloop_py.proposers.model_worker, autoloop_py.cli\n"
        "import autoloop_py.commands.run\n"
        "print(sorted(m for m in sys.modules if m.startswith(('autoloop_py.github', 'autoloop_py.loop.slots',\n"
        "                                                    'urllib.request', 'http.client', 'multiprocessing'))\n"
        "             and m not in STANDALONE))"
    )
    # The scheduler's standard-library rules (its package has only a docstring) are shared with the package.
    script = "STANDALONE = {'autoloop_py.github', 'autoloop_py.github.agentic_scheduler'}\n" + script
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
