"""Studies: runs of an analysis over a program's record (same-prompt replay, the tuning gap) in a private worktree.

They use the loop's evaluation, so they stand above loop/; the pure analysis they feed is in analysis/.
"""
