"""Circle packing: 26 circles in the unit square, maximising the sum of radii.

Only the EVOLVE-BLOCK may change. `construct_packing()` places the centres;
`compute_max_radii(centers)` gives each circle the largest radius that keeps the
packing valid (inside the square, no overlaps).
"""

from __future__ import annotations

import math

# EVOLVE-BLOCK-START
circles = 26
inner_count = 8
inner_radius = 0.3
outer_radius = 0.7
outer_phase = 0.0
margin = 0.1
grow_passes = 2


def construct_packing() -> list[tuple[float, float]]:
    """Returns the centres: one in the middle, an inner ring and an outer ring clipped to the square."""
    centers = [(0.5, 0.5)]
    outer_count = circles - inner_count - 1
    for k in range(inner_count):
        angle = 2 * math.pi * k / inner_count
        centers.append((0.5 + inner_radius * math.cos(angle), 0.5 + inner_radius * math.sin(angle)))
    for k in range(outer_count):
        angle = 2 * math.pi * k / outer_count + outer_phase
        centers.append((0.5 + outer_radius * math.cos(angle), 0.5 + outer_radius * math.sin(angle)))
    return [(min(max(x, margin), 1 - margin), min(max(y, margin), 1 - margin)) for x, y in centers]


def compute_max_radii(centers: list[tuple[float, float]]) -> list[float]:
    """Returns radii that keep every circle inside the square and apart from the others."""
    radii = [max(min(x, y, 1 - x, 1 - y), 0.0) for x, y in centers]
    for i in range(len(centers)):
        for j in range(i + 1, len(centers)):
            gap = math.dist(centers[i], centers[j])
            if radii[i] + radii[j] > gap:
                # Shrinking both in proportion keeps big circles big; shrinking never creates overlap.
                scale = gap / (radii[i] + radii[j])
                radii[i] *= scale
                radii[j] *= scale
    for _ in range(grow_passes):
        for i, (x, y) in enumerate(centers):
            room = [math.dist(centers[i], c) - radii[j] for j, c in enumerate(centers) if j != i]
            radii[i] = max(min([x, y, 1 - x, 1 - y, *room]), 0.0)
    return radii


# EVOLVE-BLOCK-END
