"""The rules GitHub Agentic Workflows applies when it saves a repo-memory folder, as autoloop keeps to them.

Read from gh-aw's push job (`actions/setup/js/push_repo_memory.cjs`) and its frontmatter schema
(`pkg/parser/schemas/main_workflow_schema.json`, `tools.repo-memory`): every file in the folder must have
an allowed extension, each file the globs select must be at most `max-file-size` bytes, at most
`max-file-count` files are saved, and the bytes of the added lines of the branch's diff (`git diff
--cached`, each line with its `+`, headers not counted) must stay under `max-patch-size` with gh-aw's
20 % tolerance. One refusal loses the whole save. autoloop.md sets the values below, and the memory folder
(memory_folder.py) writes within them.
"""

from __future__ import annotations

import difflib
from pathlib import PurePosixPath

# autoloop.md's repo-memory entry; the schema allows max-patch-size up to 1 MiB and max-file-count up to 1000.
MAX_PATCH_SIZE = 102400
MAX_FILE_SIZE = 102400
MAX_FILE_COUNT = 1000
# What the memory folder prunes down to: the slack is for files a person or another tool adds.
FILE_LIMIT = 900
# The state files (.md), traces (.json, .txt) and candidate sources (their language's extension, else .txt).
ALLOWED_EXTENSIONS = (".md", ".json", ".txt", ".py", ".js", ".ts", ".rs")


def allowed(path: str) -> bool:
    """Returns whether gh-aw accepts a file at path in the memory folder (its extension, case-insensitive)."""
    return PurePosixPath(path).suffix.lower() in ALLOWED_EXTENSIONS


def added_bytes(old: str | None, new: str) -> int:
    """Returns the bytes gh-aw counts for a file going from old to new: each added line with its `+`.

    A line diff of the two texts (difflib's, which may count a few more lines than git's) stands in for git's.
    """
    before = (old or "").splitlines()
    after = new.splitlines()
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return sum(len(line.encode("utf-8")) + 1 for tag, _, _, j1, j2 in matcher.get_opcodes()
               if tag in ("replace", "insert") for line in after[j1:j2])
