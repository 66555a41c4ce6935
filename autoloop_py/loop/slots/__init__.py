"""Slots: k iterations of a program in flight, in lanes: without a barrier (async_slots.py), or as a barrier
tick whose outcomes one publish records together (barrier.py, barrier_publish.py).

May import every other part of loop/.
"""
