"""The record: the state file and trace rows an iteration writes, the outcome a proposing job hands over and
what publish refuses of it (publish_guard.py), publishing a decided iteration, the CI gate of a kept
candidate, the island a slot claims beside its outcome, the record's integrity, and recovery after a kill.

May import loop.checkout and loop.evaluation.
"""
