"""A scripted agent for the act scenarios (`autoloop run --proposer agent`): edits the program's solution.

Usage: python agent.py MODE, MODE one of
  improve  raises WIDTH by 0.5 (the sample's score is -abs(WIDTH - 3.0), so it scores higher);
  crash    makes solve() exit the evaluation with status 7 and no output.
The program is the one whose folder the prompt ($AUTOLOOP_PROMPT_FILE) names most often.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path


def main() -> int:
    mode = sys.argv[1]
    prompt = Path(os.environ["AUTOLOOP_PROMPT_FILE"]).read_text()
    names = [p.name for p in Path(".autoloop/programs").iterdir() if p.is_dir()]
    program = max(names, key=lambda name: (prompt.count(f"programs/{name}/"), prompt.count(f"# {name}\n")))
    path = Path(".autoloop/programs") / program / "code" / "solution.py"
    text = path.read_text()
    if mode == "improve":
        width = float(re.search(r"^WIDTH = (\S+)$", text, re.M).group(1))
        text = re.sub(r"^WIDTH = \S+$", f"WIDTH = {width + 0.5}", text, count=1, flags=re.M)
        summary = f"raise WIDTH to {width + 0.5}"
    elif mode == "crash":
        text = text.replace('    """Returns the candidate', '    raise SystemExit(7)\n    """Returns the candidate', 1)
        summary = "exit the evaluation"
    else:
        raise SystemExit(f"unknown mode {mode}")
    path.write_text(text)
    Path(os.environ["AUTOLOOP_REPLY_FILE"]).write_text(f"SUMMARY: {summary}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
