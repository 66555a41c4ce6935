"""Square root routine for the sqrt_tradeoff example; only the EVOLVE-BLOCK may change."""

import math

# EVOLVE-BLOCK-START
NEWTON_STEPS = 6


def approx_sqrt(x: float) -> tuple[float, int]:
    """Returns (an approximation of sqrt(x), the arithmetic steps it took) for x > 0."""
    guess = x
    steps = 0
    for _ in range(NEWTON_STEPS):
        guess = 0.5 * (guess + x / guess)
        steps += 3
    return guess, steps
# EVOLVE-BLOCK-END
