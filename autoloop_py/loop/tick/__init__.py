"""A scheduled tick: the plan (schedule.py: which programs are due and which runs next) and the hand-off of an
iteration to an outside agent (`autoloop prompt` / `autoloop record`).

May import loop.checkout, loop.evaluation, loop.record and loop.iteration.
"""
