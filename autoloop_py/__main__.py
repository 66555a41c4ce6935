"""Entry point for `python -m autoloop_py`."""

from autoloop_py.cli import main

raise SystemExit(main())
