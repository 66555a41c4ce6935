"""The loop: one iteration of a program and everything that runs around it, by concept.

- `checkout/`: the runner's private worktree of `autoloop/<name>`, restoring it, the program lock, and
  Population code brought up to date with the default branch (stale parents).
- `evaluation/`: a program's evaluation (and its stages) run in the sandbox, its report read, the checks of
  what a candidate may not do, and acceptance: whether a candidate is kept.
- `record/`: what an iteration leaves: the state file and trace rows, the outcome a proposing job hands over
  and what publish refuses of it, publishing a decided iteration, the CI gate, the record's integrity, and
  recovery after a kill.
- `iteration/`: one iteration top to bottom: options, baseline, decide, propose, novelty, evaluate, ratchet.
- `tick/`: a scheduled tick: the plan (which programs are due) and the hand-off to an outside agent.
- `slots/`: k iterations of a program in flight: lanes, slots without a barrier, and the barrier tick.

Each subpackage imports only those listed before it (scripts/import_layers.py enforces it).
"""
