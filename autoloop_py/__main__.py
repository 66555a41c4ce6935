"""Entry point for `python -m autoloop_py`."""

from autoloop_py.cli import main

# Guarded: a tick's slots started with `spawn` import this module again, and must not run the command twice.
if __name__ == "__main__":
    raise SystemExit(main())
