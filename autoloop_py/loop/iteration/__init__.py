"""One iteration, top to bottom (iteration.py): options, baseline, decide, propose, novelty, evaluate, ratchet,
and re-judging a kept candidate when the best moved under concurrency (rejudge.py).

May import loop.checkout, loop.evaluation and loop.record.
"""
