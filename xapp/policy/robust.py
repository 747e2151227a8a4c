"""Weights for uncertain capacities: maximise a conservative quantile of the aggregate.

The exact optimiser makes every path carry precisely its share, so an estimate that is a little
high turns that path into the whole connection's bottleneck, while one that is a little low only
costs that path's surplus. Here each candidate weight set is scored over draws from the
estimates' normal beliefs, and the one whose ``quantile`` of predicted aggregate is highest wins.
Candidates are the exact optima for the point estimates, for the lower quantiles (all paths at
once and one at a time), without each path in turn (a small, volatile path can cost more as the
round's bottleneck than it adds) and for some of the draws. The draws are fixed (common random
numbers), so the result is a pure function of its inputs.
"""

from __future__ import annotations

from functools import cache
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from xapp.policy.fluid import aggregate_mbps_batch
from xapp.policy.optimal import optimal_weights_batch

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DRAWS = 128
CANDIDATE_DRAWS = 8
_SEED = 20240601


@cache
def _standard_normal_draws(paths: int) -> FloatArray:
    draws = np.random.default_rng(_SEED).standard_normal((DRAWS, paths))
    draws.setflags(write=False)
    return draws


def _order_statistic(values: FloatArray, quantile: float) -> FloatArray:
    """The ``quantile`` of ``values`` along the last axis, as the nearest-rank order statistic
    (np.quantile interpolates, at several times the cost, for no better decision)."""
    rank = min(values.shape[-1] - 1, max(0, round(quantile * (values.shape[-1] - 1))))
    return np.asarray(np.partition(values, rank, axis=-1)[..., rank], dtype=np.float64)


def belief_draws(means_mbps: FloatArray, stddevs_mbps: FloatArray) -> FloatArray:
    """(DRAWS, paths) capacities drawn from the estimates' beliefs, never below 0."""
    return np.maximum(0.0, means_mbps + stddevs_mbps * _standard_normal_draws(len(means_mbps)))


def score_mbps(
    weights: npt.ArrayLike, means_mbps: FloatArray, stddevs_mbps: FloatArray, quantile: float
) -> float:
    """The ``quantile`` of the aggregate these weights would give, over the beliefs."""
    draws = belief_draws(means_mbps, stddevs_mbps)
    w = np.broadcast_to(np.asarray(weights, dtype=np.float64), draws.shape)
    return float(_order_statistic(aggregate_mbps_batch(w, draws), quantile))


def robust_weights(
    means_mbps: FloatArray, stddevs_mbps: FloatArray, max_weight: int, quantile: float
) -> IntArray:
    means = np.asarray(means_mbps, dtype=np.float64)
    stddevs = np.asarray(stddevs_mbps, dtype=np.float64)
    if not np.any(stddevs > 0):
        exact: IntArray = optimal_weights_batch(means[None, :], max_weight)[0]
        return exact
    z = NormalDist().inv_cdf(quantile)
    lowered = np.maximum(0.0, means + z * stddevs)
    one_lowered = np.where(np.eye(len(means), dtype=bool), lowered[None, :], means[None, :])
    one_dropped = np.where(np.eye(len(means), dtype=bool), 0.0, means[None, :])
    draws = belief_draws(means, stddevs)
    starts = np.vstack([means, lowered, one_lowered, one_dropped, draws[:CANDIDATE_DRAWS]])
    candidates = np.unique(optimal_weights_batch(starts, max_weight), axis=0)
    candidates = candidates[candidates.sum(axis=1) > 0]
    if len(candidates) == 0:
        return np.zeros(len(means), dtype=np.int64)
    # (candidates, draws) predicted aggregates
    aggregates = aggregate_mbps_batch(
        candidates[:, None, :].astype(np.float64),
        np.broadcast_to(draws, (len(candidates), *draws.shape)),
    )
    scores = _order_statistic(aggregates, quantile)
    ties = scores >= scores.max() * (1 - 1e-9)
    chosen = np.argmin(np.where(ties, candidates.sum(axis=1), np.iinfo(np.int64).max))
    return np.asarray(candidates[chosen], dtype=np.int64)
