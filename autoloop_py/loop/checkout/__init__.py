"""The checkout: the runner's private worktree of `autoloop/<name>`, restoring it, the program lock, and
stale parents (Population code brought up to date with the default branch).

Imports nothing else of loop/.
"""
