"""Schedule intervals as programs write them: `every 6h`, `30 minutes`, `daily`...

The grammar is the standalone scheduler's, which reads the same `schedule:` in gh-aw workflows.
"""

from autoloop_py.github.agentic_scheduler import parse_interval as parse_schedule

__all__ = ["parse_schedule"]
