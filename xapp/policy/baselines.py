"""Baseline weight rules the optimiser is measured against.

``proportional_weights`` is the rule of Navarro-Ortiz et al. (Sensors 2024): weights proportional
to the probed capacities, the largest path at the maximum weight and every path at least 1.
``round_robin_weights`` is plain round robin, 1 segment per path per round.
"""

from __future__ import annotations

from collections.abc import Sequence


def proportional_weights(
    capacities_mbps: Sequence[float], max_weight: int = 100
) -> tuple[int, ...]:
    largest = max(capacities_mbps, default=0.0)
    if largest <= 0:
        return tuple(0 for _ in capacities_mbps)
    return tuple(max(1, round(max_weight * c / largest)) if c > 0 else 0 for c in capacities_mbps)


def round_robin_weights(capacities_mbps: Sequence[float]) -> tuple[int, ...]:
    return tuple(1 for _ in capacities_mbps)
