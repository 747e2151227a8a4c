"""Fluid model of the 5G-CLARITY weighted round-robin MPTCP scheduler.

With ``cwnd_limited=N`` the scheduler queues exactly ``w_i`` segments per round on subflow i and
waits for each path in turn, so the round rate is set by the slowest path per unit of weight:
aggregate = (Σ w_i) · min over w_i > 0 of (c_i / w_i). A weighted path with no capacity stalls
the whole connection.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def aggregate_mbps(weights: Sequence[float], capacities_mbps: Sequence[float]) -> float:
    """Aggregate throughput of one connection with these weights on paths of these capacities."""
    if len(weights) != len(capacities_mbps):
        raise ValueError(
            f"{len(weights)} weights for {len(capacities_mbps)} paths: lengths must match"
        )
    round_rate = min(
        (c / w for w, c in zip(weights, capacities_mbps, strict=True) if w > 0),
        default=0.0,
    )
    return float(sum(w for w in weights if w > 0) * round_rate)


def per_path_mbps(weights: Sequence[float], capacities_mbps: Sequence[float]) -> list[float]:
    """What each path carries: its weight times the round rate set by the bottleneck path."""
    total = aggregate_mbps(weights, capacities_mbps)
    weight_sum = sum(w for w in weights if w > 0)
    if weight_sum == 0:
        return [0.0] * len(weights)
    return [total * max(w, 0) / weight_sum for w in weights]


def aggregate_mbps_batch(weights: FloatArray, capacities_mbps: FloatArray) -> FloatArray:
    """``aggregate_mbps`` over the last axis of equally shaped arrays (e.g. CPEs × accesses)."""
    weighted = weights > 0
    ratios = np.where(weighted, capacities_mbps / np.where(weighted, weights, 1.0), np.inf)
    round_rate = ratios.min(axis=-1)
    round_rate = np.where(np.isfinite(round_rate), round_rate, 0.0)
    return np.asarray(np.where(weighted, weights, 0.0).sum(axis=-1) * round_rate)
