"""Evaluation: a program's command (and its stages) run in the sandbox, its report read, the checks of what a
candidate may not do, and acceptance (acceptance.py: whether a candidate is kept, one metric or objectives).

May import loop.checkout.
"""
