#!/usr/bin/env python3
"""Upstream's path for the Agentic Workflows scheduler; the code is autoloop_py/github/agentic_scheduler.py.

Kept so that a workflow (or a test) written for upstream's `scripts/autoloop_scheduler.py` finds the same
helpers and the same command line here.
"""

from __future__ import annotations

import sys

from autoloop_py.github import agentic_scheduler

globals().update({name: value for name, value in vars(agentic_scheduler).items() if not name.startswith("__")})

if __name__ == "__main__":
    agentic_scheduler.main(sys.argv[1:])
