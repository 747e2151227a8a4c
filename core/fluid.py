"""Fluid model of the 5G-CLARITY weighted round-robin MPTCP scheduler.

With ``cwnd_limited=N`` the scheduler queues exactly ``w_i`` segments per round on subflow i and
waits for each path in turn, so the round rate is set by the slowest path per unit of weight:
aggregate = (Σ w_i) · min over w_i > 0 of (c_i / w_i). A weighted path with no capacity stalls
the whole connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


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


def carried_mbps(
    weights: npt.NDArray[Any], capacity_mbps: FloatArray, in_round: BoolArray
) -> FloatArray:
    """(C, A): what each path carries at one instant for the weights in force (C, A), on
    paths of these capacities; paths out of the scheduler's round (``in_round`` False) carry
    nothing, and a connection whose weighted paths are all out falls back to the rest, round
    robin, as MPTCP does."""
    effective = np.where(in_round, weights, 0).astype(np.float64)
    idle = effective.sum(axis=1) == 0
    effective[idle] = in_round[idle].astype(np.float64)
    aggregate = aggregate_mbps_batch(effective, capacity_mbps)
    totals = effective.sum(axis=1)
    share = np.divide(
        effective, totals[:, None], out=np.zeros_like(effective), where=totals[:, None] > 0
    )
    return np.asarray(aggregate[:, None] * share, dtype=np.float64)
