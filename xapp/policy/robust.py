"""Weights for uncertain capacities: maximise a conservative quantile of the aggregate.

The exact optimiser makes every path carry precisely its share, so an estimate that is a little
high turns that path into the whole connection's bottleneck, while one that is a little low only
costs that path's surplus. Here each candidate weight set is scored over draws from the
estimates' normal beliefs, and the one whose ``quantile`` of predicted aggregate is highest wins.
Candidates are the exact optima for the point estimates, for the lower quantiles (all paths at
once and one at a time), without each path in turn (a small, volatile path can cost more as the
round's bottleneck than it adds) and for some of the draws. The draws are fixed (common random
numbers), so the result is a pure function of its inputs.

A path may also go dark during the period (a LiFi beam blocked, an access lost), which no
capacity σ describes: a weighted path that goes dark stalls the whole round until MPTCP (or the
agent) takes it out, ``stall_fraction`` of the period, and then the others carry on without it.
With ``outage_probability`` per path (of going dark within the period), each weighted path's
risk is charged: going dark at mid-period on average, the period carries half at the full
aggregate, then nothing for the stall, then the rest without that path. A small path that goes
dark often (on a 1 s period, a beam blocked every 10 s with a 0.45 s stall costs about 4 % of
the aggregate) is then left out rather than kept for its 1-2 %.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import numpy as np
import numpy.typing as npt

from core.domain import normal_quantile
from xapp.policy.compiled import core, use_core
from xapp.policy.optimal import MAX_CORE_WEIGHT, optimal_weights_batch

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DRAWS = 128
CANDIDATE_DRAWS = 8
_SEED = 20240601
_NOT_TIED = np.iinfo(np.int64).max


@cache
def _standard_normal_draws(paths: int) -> FloatArray:
    """(paths, DRAWS): path-major, so that every per-path operation reads contiguous draws."""
    draws = np.ascontiguousarray(np.random.default_rng(_SEED).standard_normal((DRAWS, paths)).T)
    draws.setflags(write=False)
    return draws


def _order_statistic(values: FloatArray, quantile: float) -> FloatArray:
    """The ``quantile`` of ``values`` along the last axis, as the nearest-rank order statistic
    (np.quantile interpolates, at several times the cost, for no better decision)."""
    rank = _rank(values.shape[-1], quantile)
    return np.asarray(np.partition(values, rank, axis=-1)[..., rank], dtype=np.float64)


def _rank(count: int, quantile: float) -> int:
    return min(count - 1, max(0, round(quantile * (count - 1))))


def belief_draws(means_mbps: FloatArray, stddevs_mbps: FloatArray) -> FloatArray:
    """(paths, DRAWS) capacities drawn from the estimates' beliefs, never below 0."""
    means = np.asarray(means_mbps, dtype=np.float64)[:, None]
    stddevs = np.asarray(stddevs_mbps, dtype=np.float64)[:, None]
    return np.maximum(0.0, means + stddevs * _standard_normal_draws(len(means)))


def score_mbps(
    weights: npt.ArrayLike,
    means_mbps: FloatArray,
    stddevs_mbps: FloatArray,
    quantile: float,
    outage_probability: FloatArray | None = None,
    stall_fraction: float = 0.0,
) -> float:
    """The ``quantile`` of the aggregate these weights would give, over the beliefs, with each
    weighted path's risk of going dark charged."""
    w = np.asarray(weights, dtype=np.float64)[None, :]
    return float(
        scores_mbps(w, means_mbps, stddevs_mbps, quantile, outage_probability, stall_fraction)[0]
    )


def scores_mbps(
    weights: npt.ArrayLike,
    means_mbps: FloatArray,
    stddevs_mbps: FloatArray,
    quantile: float,
    outage_probability: FloatArray | None = None,
    stall_fraction: float = 0.0,
) -> FloatArray:
    """``score_mbps`` of each row of (rows, paths) weights, the beliefs drawn once for all."""
    draws = belief_draws(means_mbps, stddevs_mbps)
    w = np.asarray(weights, dtype=np.float64)
    aggregates = _aggregates_at_risk(w, draws, outage_probability, stall_fraction)
    return _order_statistic(aggregates, quantile)


def _aggregates_at_risk(
    candidates: FloatArray,
    draws: FloatArray,
    outage_probability: FloatArray | None,
    stall_fraction: float,
) -> FloatArray:
    """(candidates, draws) aggregates of (candidates, paths) weights over (paths, draws)
    capacities, less each weighted path's expected outage cost."""
    # Paths × candidates × draws: the minimum over the paths is then elementwise over planes.
    weights = candidates.T
    weighted = weights > 0
    counted = np.where(weighted, weights, 0.0)
    ratios = draws[:, None, :] / np.where(weighted, weights, 1.0)[:, :, None]
    ratios[~weighted] = np.inf  # an unweighted path never sets the round rate
    full = _aggregates(counted.sum(axis=0), ratios.min(axis=0))
    if outage_probability is None:
        return full
    after_stall = max(0.0, 0.5 - stall_fraction)
    expected = full.copy()
    for path, probability in enumerate(outage_probability):
        dropping = weighted[path]
        if probability <= 0 or not dropping.any():
            continue
        # Without the path: the aggregate of the others alone, from the same ratios.
        others = [i for i in range(len(weights)) if i != path]
        rest = _aggregates(
            counted[others][:, dropping].sum(axis=0),
            ratios[others][:, dropping].min(axis=0, initial=np.inf),
        )
        dark = 0.5 * full[dropping] + after_stall * rest
        expected[dropping] -= probability * (full[dropping] - dark)
    return expected


def _aggregates(totals: FloatArray, round_rates: FloatArray) -> FloatArray:
    """(candidates, draws) aggregates from each candidate's weight sum and each round rate; a
    candidate without weights (an infinite rate) carries nothing."""
    return np.asarray(totals[:, None] * np.where(np.isfinite(round_rates), round_rates, 0.0))


def _distinct_weighted_rows(weights: IntArray) -> IntArray:
    """The distinct rows of (rows, paths) weights, but for all-zero ones, in lexicographic order
    as np.unique(axis=0) gives them; for a handful of rows, a set of tuples is far cheaper."""
    distinct = sorted(row for row in set(map(tuple, weights.tolist())) if any(row))
    return np.array(distinct, dtype=np.int64).reshape(len(distinct), weights.shape[1])


def robust_weights(
    means_mbps: FloatArray,
    stddevs_mbps: FloatArray,
    max_weight: int,
    quantile: float,
    outage_probability: FloatArray | None = None,
    stall_fraction: float = 0.0,
) -> IntArray:
    means = np.asarray(means_mbps, dtype=np.float64)
    stddevs = np.asarray(stddevs_mbps, dtype=np.float64)
    at_risk = outage_probability is not None and bool((outage_probability > 0).any())
    if not (stddevs > 0).any() and not at_risk:
        exact: IntArray = optimal_weights_batch(means[None, :], max_weight)[0]
        return exact
    z = normal_quantile(quantile)
    lowered = np.maximum(0.0, means + z * stddevs)
    draws = belief_draws(means, stddevs)
    paths = len(means)
    # The point estimates, all lowered, each one lowered, each one dropped, then some draws.
    starts = np.empty((2 + 2 * paths + CANDIDATE_DRAWS, paths))
    starts[0] = means
    starts[1] = lowered
    starts[2 : 2 + 2 * paths] = means
    np.fill_diagonal(starts[2 : 2 + paths], lowered)
    np.fill_diagonal(starts[2 + paths : 2 + 2 * paths], 0.0)
    starts[2 + 2 * paths :] = draws[:, :CANDIDATE_DRAWS].T
    candidates = _distinct_weighted_rows(optimal_weights_batch(starts, max_weight))
    if len(candidates) == 0:
        return np.zeros(len(means), dtype=np.int64)
    aggregates = _aggregates_at_risk(
        candidates.astype(np.float64),
        draws,
        outage_probability if at_risk else None,
        stall_fraction,
    )
    scores = _order_statistic(aggregates, quantile)
    ties = scores >= scores.max() * (1 - 1e-9)
    chosen = np.argmin(np.where(ties, candidates.sum(axis=1), _NOT_TIED))
    return np.asarray(candidates[chosen], dtype=np.int64)


# ------------------------------------------------------------------- many CPEs in one descent
#
# A fleet decides for thousands of CPEs a period. Deciding one at a time costs some forty
# small numpy calls each, and every one of them lets go of the GIL: with another Python thread
# busy (the E2 reader), each call then waits up to the interpreter's switch interval (5 ms) to
# get it back, and a 0.9 ms decision took 210 ms. The functions below decide for a block of
# CPEs with the same number of paths in the same few calls, and give exactly the weights and
# scores ``robust_weights`` and ``scores_mbps`` give one by one (tests/test_policy_equivalence.py).

BLOCK = 256  # CPEs per block: (BLOCK × candidates × paths × DRAWS) temporaries of ~12 MB


def robust_weights_many(
    means_mbps: FloatArray,
    stddevs_mbps: FloatArray,
    max_weight: int,
    quantile: float,
    outage_probability: FloatArray | None = None,
    stall_fraction: FloatArray | float = 0.0,
    *,
    compiled: bool | None = None,
) -> IntArray:
    """``robust_weights`` for every row of (CPEs × paths) beliefs; ``stall_fraction`` one per
    row or one for all. ``compiled``: with the C core (None: where it is built), else numpy."""
    means = np.asarray(means_mbps, dtype=np.float64)
    rows, paths = means.shape
    stddevs, risks, stalls = _rows(rows, paths, stddevs_mbps, outage_probability, stall_fraction)
    result = np.zeros((rows, paths), dtype=np.int64)
    if rows == 0 or paths == 0:
        return result
    exact = ~(stddevs > 0).any(axis=1) & ~(risks > 0).any(axis=1)
    # The core takes beliefs as the estimates give them (finite, not negative); anything else
    # goes to numpy, which says what is wrong.
    with_core = (
        use_core(compiled, paths) and max_weight <= MAX_CORE_WEIGHT and _sane(means, stddevs)
    )
    if exact.any():
        result[exact] = optimal_weights_batch(means[exact], max_weight, compiled=with_core)
    uncertain = np.flatnonzero(~exact)
    if with_core:
        if len(uncertain):
            out = np.empty((len(uncertain), paths), dtype=np.int64)
            core.robust(
                np.ascontiguousarray(means[uncertain]),
                np.ascontiguousarray(stddevs[uncertain]),
                np.ascontiguousarray(risks[uncertain]),
                np.ascontiguousarray(stalls[uncertain]),
                _standard_normal_draws(paths),
                out,
                len(uncertain),
                paths,
                DRAWS,
                max_weight,
                normal_quantile(quantile),
                _rank(DRAWS, quantile),
                CANDIDATE_DRAWS,
            )
            result[uncertain] = out
        return result
    for start in range(0, len(uncertain), BLOCK):
        block = uncertain[start : start + BLOCK]
        result[block] = _robust_block(
            means[block], stddevs[block], max_weight, quantile, risks[block], stalls[block]
        )
    return result


def scores_many(
    weights: npt.ArrayLike,
    means_mbps: FloatArray,
    stddevs_mbps: FloatArray,
    quantile: float,
    outage_probability: FloatArray | None = None,
    stall_fraction: FloatArray | float = 0.0,
    *,
    compiled: bool | None = None,
) -> FloatArray:
    """``scores_mbps`` for every CPE at once: (CPEs × sets × paths) weights over (CPEs × paths)
    beliefs give (CPEs × sets) scores. ``compiled``: as ``robust_weights_many``."""
    w = np.asarray(weights, dtype=np.float64)
    rows, sets, paths = w.shape
    means = np.asarray(means_mbps, dtype=np.float64).reshape(rows, paths)
    stddevs, risks, stalls = _rows(rows, paths, stddevs_mbps, outage_probability, stall_fraction)
    scores = np.empty(w.shape[:2])
    if rows and sets and use_core(compiled, paths) and _sane(means, stddevs, risks, stalls):
        core.scores(
            np.ascontiguousarray(w),
            np.ascontiguousarray(means),
            np.ascontiguousarray(stddevs),
            np.ascontiguousarray(risks),
            np.ascontiguousarray(stalls),
            _standard_normal_draws(paths),
            scores,
            rows,
            sets,
            paths,
            DRAWS,
            _rank(DRAWS, quantile),
        )
        return scores
    for block, draws in _draws_by_block(means, stddevs):
        aggregates = _aggregates_at_risk_many(w[block], draws, risks[block], stalls[block])
        scores[block] = _order_statistic(aggregates, quantile)
    return scores


def reach_many(
    means_mbps: FloatArray,
    stddevs_mbps: FloatArray,
    quantile: float,
    *,
    compiled: bool | None = None,
) -> FloatArray:
    """Per CPE (row of (CPEs × paths) beliefs), the ``quantile`` of its paths' capacities
    summed, over the draws ``scores_many`` makes (``reach_bound`` reads it). ``compiled``: as
    ``robust_weights_many``."""
    means = np.asarray(means_mbps, dtype=np.float64)
    rows, paths = means.shape
    stddevs = np.asarray(stddevs_mbps, dtype=np.float64).reshape(rows, paths)
    out = np.empty(rows)
    if rows and use_core(compiled, paths) and _sane(means, stddevs):
        core.reach(
            np.ascontiguousarray(means),
            np.ascontiguousarray(stddevs),
            _standard_normal_draws(paths),
            out,
            rows,
            paths,
            DRAWS,
            _rank(DRAWS, quantile),
        )
        return out
    for block, draws in _draws_by_block(means, stddevs):
        summed = draws[:, 0, :]
        for path in range(1, paths):  # (path by path, as the core sums)
            summed = summed + draws[:, path, :]
        out[block] = _order_statistic(summed, quantile)
    return out


def each_paths_quantile(
    means_mbps: FloatArray, stddevs_mbps: FloatArray, quantile: float
) -> FloatArray:
    """(CPEs × paths): each path's ``quantile`` over the draws ``scores_many`` makes. A draw is
    max(0, mean + σ · z), rounded step by step and never falling as z rises (σ ≥ 0), so the
    draws' value of each rank is that of the standard draw of the same rank: one draw worked
    out a path rather than its 128 sorted."""
    means = np.asarray(means_mbps, dtype=np.float64)
    stddevs = np.asarray(stddevs_mbps, dtype=np.float64).reshape(means.shape)
    at_rank = _order_statistic(_standard_normal_draws(means.shape[1]), quantile)
    drawn = means + stddevs * at_rank
    return np.asarray(np.where(drawn > 0.0, drawn, 0.0), dtype=np.float64)


# Slack on the bound for every rounding between it and a score: relative, a few ulps of sums,
# products and quotients (the floor guard's 1e-12 is not in a score); and absolute, a
# quotient's rounding among subnormal capacities (5e-324 Mbit/s and the like).
REACH_MARGIN = 1 + 1e-9
REACH_SLACK_MBPS = 1e-12
# The frontier bound's tuples number about rank^(paths - 1) / 2 (613 for three paths at the
# 0.3 quantile): worked out up to three paths, a fleet's CPEs (5G, Wi-Fi, LiFi); beyond, the
# sum of the paths' quantiles stands alone.
FRONTIER_PATHS = 3


def reach_bound(
    means_mbps: FloatArray,
    stddevs_mbps: FloatArray,
    quantile: float,
    outage_probability: FloatArray,
    stall_fraction: FloatArray | float = 0.0,
    *,
    compiled: bool | None = None,
) -> FloatArray:
    """What no weights over a CPE's paths can be scored above (``scores_many``), per row of
    (CPEs × paths) beliefs and outage probabilities, with ``stall_fraction`` per row or for all
    (0, the default, bounds any stall): the lesser of two bounds, each shown below.

    The sum of the paths' quantiles. A round with weights w carries T · min_i c_i/w_i (T the
    weights' sum, over the weighted paths i), at most Σ c_i, and at most T/w_j · c_j for each
    weighted j. With no outage to charge the score is the quantile of that, at most min_j
    T/w_j · q_j (q_j the path's own quantile: a quantile of values each at most another's is
    at most its quantile), which is at most Σ q_j (the shares w_j/T sum to 1, so some q_j is at
    least its share of the least ratio). Charging outages (``_aggregates_at_risk_many``) gives
    full · (1 - P) + Σ p_i · dark_i with P the weighted paths' probabilities summed and dark_i
    ≤ full/2 + rest_i/2: at most the sum when P ≤ 2, P/2 times it beyond, draw by draw, so
    there the quantile of the sum (``reach_many``) bounds it.

    The frontier (``frontier_bound_many``), for up to ``FRONTIER_PATHS`` paths: the most any
    shares of the round could score, the draws being the ones scored. Far tighter: the sum of
    quantiles supposes each path's low draws fall in the same draws, and they do not."""
    means = np.asarray(means_mbps, dtype=np.float64)
    risks = np.asarray(outage_probability, dtype=np.float64).reshape(means.shape)
    each = each_paths_quantile(means, stddevs_mbps, quantile)
    bound = each[:, 0]
    for path in range(1, each.shape[1]):  # (path by path: the inputs' one row sums alike)
        bound = bound + each[:, path]
    charged = np.flatnonzero((risks > 0).any(axis=1))
    stddevs = np.asarray(stddevs_mbps, dtype=np.float64).reshape(means.shape)
    if len(charged):
        of_sum = reach_many(means[charged], stddevs[charged], quantile, compiled=compiled)
        bound[charged] = of_sum * np.maximum(1.0, 0.5 * risks[charged].sum(axis=1))
    bound = bound * REACH_MARGIN + REACH_SLACK_MBPS
    if 1 <= means.shape[1] <= FRONTIER_PATHS and len(means):
        stalls = np.broadcast_to(np.asarray(stall_fraction, dtype=np.float64), (len(means),))
        frontier, scale = frontier_bound_many(
            means, stddevs, risks, stalls, quantile, compiled=compiled
        )
        # (the absolute slack: a charged score's roundings are of the aggregates it sums, up
        # to the draws' largest, where the bound itself may be near 0)
        tight = frontier * REACH_MARGIN + (REACH_MARGIN - 1) * scale + REACH_SLACK_MBPS
        bound = np.minimum(bound, tight)
    return np.asarray(bound, dtype=np.float64)


@cache
def _frontier(paths: int, rank: int) -> npt.NDArray[np.int32]:
    """(paths, tuples): how many of each path's lowest standard draws may be passed over
    together, at most ``rank`` draws in all, each tuple maximal (no path's count can grow
    without passing over more than ``rank``). Path p's t lowest draws are its lowest in any
    beliefs (a draw is max(0, mean + σ · z), never falling as z rises), so the tuples serve
    every CPE."""
    normal = _standard_normal_draws(paths)
    order = np.argsort(normal, axis=1, kind="stable")
    last = order[-1]
    # Per prefix of the other paths' counts, the most the last path's can be (-1: none).
    most = np.full((rank + 1,) * (paths - 1), -1, dtype=np.int64)
    for prefix in np.ndindex(*most.shape):
        passed = np.zeros(normal.shape[1], dtype=bool)
        for path, count in enumerate(prefix):
            passed[order[path, :count]] = True
        already = int(passed.sum())
        if already > rank:
            continue
        # the last path's t lowest draws pass over this many more: the largest t within rank
        more = np.concatenate(([0], np.cumsum(~passed[last[:rank]])))
        most[prefix] = int(np.flatnonzero(already + more <= rank)[-1])
    tuples = []
    for prefix in np.ndindex(*most.shape):
        t = int(most[prefix])
        if t < 0:
            continue
        # maximal: no neighbour one further on in any path keeps as many for the last
        if any(
            prefix[path] < rank
            and most[(*prefix[:path], prefix[path] + 1, *prefix[path + 1 :])] >= t
            for path in range(paths - 1)
        ):
            continue
        tuples.append((*prefix, t))
    frontier = np.ascontiguousarray(np.array(tuples, dtype=np.int32).reshape(-1, paths).T)
    frontier.setflags(write=False)
    return frontier


@cache
def _frontier_levels(paths: int, rank: int) -> tuple[FloatArray, FloatArray]:
    """Each path's standard draws of rank 0 to ``rank`` (paths, rank + 1), and its highest."""
    ordered = np.sort(_standard_normal_draws(paths), axis=1)
    levels = np.ascontiguousarray(ordered[:, : rank + 1])
    highest = np.ascontiguousarray(ordered[:, -1])
    levels.setflags(write=False)
    highest.setflags(write=False)
    return levels, highest


def frontier_bound_many(
    means_mbps: FloatArray,
    stddevs_mbps: FloatArray,
    outage_probability: FloatArray,
    stall_fraction: FloatArray,
    quantile: float,
    *,
    compiled: bool | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Per row of (CPEs × paths) beliefs (at most ``FRONTIER_PATHS`` paths): what no weights'
    score (``scores_many``) exceeds but for rounding, and the draws' scale (each path's
    highest draw, summed) that rounding is relative to.

    Why. Take shares s (the weights over their sum) and, first, no outage charged. A draw's
    aggregate is min_i c_i/s_i over the weighted paths, and the score x its value of rank r:
    at least D - r of the D draws have an aggregate of x or more, so each weighted path
    carries x · s_i ≤ c_i in every one of them, hence x ≤ Σ_i m_i with m_i the least draw of
    path i among them. Passing over r draws at most, m_i is path i's draw of the first rank
    t_i not passed over, and passing over its t_i lowest draws for every i takes no more
    than r draws: some tuple of ``_frontier`` is at least (t_i), and the draws rise with
    rank. So x ≤ max over the frontier of Σ_i draw_i(t_i), the shares' best.

    Outages charged: with W the weighted paths, P their probabilities summed and a = max(0,
    1/2 - stall), a draw's charged aggregate is full · (1 - P/2) + a · Σ_i p_i · rest_i, and
    rest_i (the others' round) is at most the others' draws summed. So the score is at most
    max(0, 1 - P/2) times the frontier over W plus a · Σ_k (P - p_k) · the highest draw of k.
    W's paths at risk are what P depends on: the bound is the largest over which of them are
    weighted (the others all: a path more only raises the rest)."""
    means = np.asarray(means_mbps, dtype=np.float64)
    rows, paths = means.shape
    stddevs = np.asarray(stddevs_mbps, dtype=np.float64).reshape(rows, paths)
    risks = np.asarray(outage_probability, dtype=np.float64).reshape(rows, paths)
    stalls = np.asarray(stall_fraction, dtype=np.float64).reshape(rows)
    if not 1 <= paths <= FRONTIER_PATHS:
        raise ValueError(f"the frontier bound takes 1 to {FRONTIER_PATHS} paths, not {paths}")
    rank = _rank(DRAWS, quantile)
    frontier = _frontier(paths, rank)
    levels, highest = _frontier_levels(paths, rank)
    bound, scale = np.empty(rows), np.empty(rows)
    if rows and use_core(compiled, paths) and _sane(means, stddevs, risks, stalls):
        core.frontier(
            np.ascontiguousarray(means),
            np.ascontiguousarray(stddevs),
            np.ascontiguousarray(risks),
            np.ascontiguousarray(stalls),
            levels,
            highest,
            frontier,
            bound,
            scale,
            rows,
            paths,
            rank + 1,
            frontier.shape[1],
        )
        return bound, scale
    for start in range(0, rows, BLOCK):
        block = slice(start, start + BLOCK)
        bound[block], scale[block] = _frontier_block(
            means[block], stddevs[block], risks[block], stalls[block], frontier, levels, highest
        )
    return bound, scale


def _frontier_block(
    means: FloatArray,
    stddevs: FloatArray,
    risks: FloatArray,
    stalls: FloatArray,
    frontier: npt.NDArray[np.int32],
    levels: FloatArray,
    highest: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """``frontier_bound_many`` of a block of rows, in numpy (the core's twin: the same
    operations in the same order)."""
    rows, paths = means.shape
    # Each path's draws at the frontier's ranks (rows, paths, rank + 1), as belief_draws.
    drawn = np.maximum(0.0, means[:, :, None] + stddevs[:, :, None] * levels[None, :, :])
    top = np.maximum(0.0, means + stddevs * highest[None, :])
    scale = top[:, 0]
    for path in range(1, paths):
        scale = scale + top[:, path]
    after_stall = np.maximum(0.0, 0.5 - stalls)
    at_risk = risks > 0
    bound = np.zeros(rows)
    # Which paths at risk are left out: every subset (a bit per path; a path not at risk is
    # never left out).
    for left_out in range(1 << paths):
        out = np.array([(left_out >> path) & 1 == 1 for path in range(paths)])
        valid = (at_risk | ~out[None, :]).all(axis=1) & ~out.all()
        if not valid.any():
            continue
        kept = ~out
        summed = np.where(kept[0], drawn[:, 0, frontier[0]], 0.0)
        for path in range(1, paths):
            summed = summed + np.where(kept[path], drawn[:, path, frontier[path]], 0.0)
        best = summed.max(axis=1)
        weighted_risk = np.zeros(rows)
        for path in range(paths):
            if kept[path]:
                weighted_risk = weighted_risk + risks[:, path]
        rest = np.zeros(rows)
        for path in range(paths):
            if kept[path]:
                rest = rest + (weighted_risk - risks[:, path]) * top[:, path]
        charged = np.maximum(0.0, 1.0 - 0.5 * weighted_risk) * best + after_stall * rest
        bound = np.where(valid, np.maximum(bound, charged), bound)
    return bound, scale


def _draws_by_block(means: FloatArray, stddevs: FloatArray) -> Iterator[tuple[slice, FloatArray]]:
    """The rows' belief draws (``_belief_draws_many``), BLOCK rows at a time (the numpy twins'
    temporaries stay small)."""
    for start in range(0, len(means), BLOCK):
        block = slice(start, start + BLOCK)
        yield block, _belief_draws_many(means[block], stddevs[block])


def _sane(*arrays: FloatArray) -> bool:
    """Every value finite and not negative: what the C core is written for."""
    return all(bool(np.isfinite(a).all() and (a >= 0).all()) for a in arrays)


def _rows(
    rows: int,
    paths: int,
    stddevs_mbps: FloatArray,
    outage_probability: FloatArray | None,
    stall_fraction: FloatArray | float,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The many-CPE functions' arguments as (CPEs × paths) arrays and a stall per CPE."""
    stddevs = np.asarray(stddevs_mbps, dtype=np.float64).reshape(rows, paths)
    risks = (
        np.zeros((rows, paths))
        if outage_probability is None
        else np.asarray(outage_probability, dtype=np.float64).reshape(rows, paths)
    )
    stalls = np.broadcast_to(np.asarray(stall_fraction, dtype=np.float64), (rows,))
    return stddevs, risks, stalls


def _belief_draws_many(means: FloatArray, stddevs: FloatArray) -> FloatArray:
    """(CPEs, paths, DRAWS): ``belief_draws`` of each row."""
    normal = _standard_normal_draws(means.shape[1])[None, :, :]
    return np.maximum(0.0, means[:, :, None] + stddevs[:, :, None] * normal)


def _robust_block(
    means: FloatArray,
    stddevs: FloatArray,
    max_weight: int,
    quantile: float,
    risks: FloatArray,
    stalls: FloatArray,
) -> IntArray:
    rows, paths = means.shape
    z = normal_quantile(quantile)
    lowered = np.maximum(0.0, means + z * stddevs)
    draws = _belief_draws_many(means, stddevs)
    # The starts of robust_weights, for every row: the point estimates, all lowered, each one
    # lowered, each one dropped, then the first draws.
    starts = np.empty((rows, 2 + 2 * paths + CANDIDATE_DRAWS, paths))
    starts[:, 0] = means
    starts[:, 1] = lowered
    starts[:, 2 : 2 + 2 * paths] = means[:, None, :]
    each = np.arange(paths)
    starts[:, 2 + each, each] = lowered[:, each]
    starts[:, 2 + paths + each, each] = 0.0
    starts[:, 2 + 2 * paths :] = draws[:, :, :CANDIDATE_DRAWS].transpose(0, 2, 1)
    # The numpy twin throughout (the core does the whole block itself).
    candidates = optimal_weights_batch(
        starts.reshape(-1, paths), max_weight, compiled=False
    ).reshape(starts.shape)
    aggregates = _aggregates_at_risk_many(candidates.astype(np.float64), draws, risks, stalls)
    scores = _order_statistic(aggregates, quantile)
    # robust_weights scores the distinct candidates that weigh some path, and of those within
    # 1e-9 of the best takes the smallest weight sum, then the first in lexicographic order:
    # duplicates score alike, so the same choice is made over all of them.
    totals = candidates.sum(axis=2)
    weighing = totals > 0
    best = np.where(weighing, scores, -np.inf).max(axis=1, keepdims=True)
    ties = weighing & (scores >= best * (1 - 1e-9))
    least = np.where(ties, totals, _NOT_TIED).min(axis=1, keepdims=True)
    finalists = ties & (totals == least)
    order = _lexicographic_keys(candidates, max_weight)
    chosen = np.argmin(np.where(finalists, order, _NOT_TIED), axis=1)
    result = candidates[np.arange(rows), chosen]
    result[~weighing.any(axis=1)] = 0
    return np.asarray(result, dtype=np.int64)


def _lexicographic_keys(candidates: IntArray, max_weight: int) -> IntArray:
    """One integer per candidate that orders them as their rows compare lexicographically."""
    keys = np.zeros(candidates.shape[:2], dtype=np.int64)
    base = max_weight + 1
    if base ** candidates.shape[2] >= _NOT_TIED:
        # Too many paths for one integer: rank the rows instead (rare; slower).
        flat = candidates.reshape(-1, candidates.shape[2])
        _, ranks = np.unique(flat, axis=0, return_inverse=True)
        return np.asarray(ranks.reshape(candidates.shape[:2]), dtype=np.int64)
    for path in range(candidates.shape[2]):
        keys = keys * base + candidates[:, :, path]
    return keys


def _aggregates_at_risk_many(
    candidates: FloatArray, draws: FloatArray, risks: FloatArray, stalls: FloatArray
) -> FloatArray:
    """(CPEs, candidates, DRAWS): ``_aggregates_at_risk`` of each CPE's (candidates, paths)
    weights over its (paths, DRAWS) capacities, each path's outage charged as it does."""
    weighted = candidates > 0
    counted = np.where(weighted, candidates, 0.0)
    ratios = draws[:, None, :, :] / np.where(weighted, candidates, 1.0)[:, :, :, None]
    ratios[~weighted] = np.inf  # an unweighted path never sets the round rate
    full = _aggregates_many(counted.sum(axis=2), ratios.min(axis=2))
    expected = full.copy()
    after_stall = np.maximum(0.0, 0.5 - stalls)[:, None, None]
    paths = candidates.shape[2]
    for path in range(paths):
        probability = risks[:, path]
        dropping = weighted[:, :, path] & (probability > 0)[:, None]
        if not dropping.any():
            continue
        others = [i for i in range(paths) if i != path]
        rest = _aggregates_many(
            counted[:, :, others].sum(axis=2), ratios[:, :, others].min(axis=2, initial=np.inf)
        )
        dark = 0.5 * full + after_stall * rest
        charged = expected - probability[:, None, None] * (full - dark)
        expected = np.where(dropping[:, :, None], charged, expected)
    return expected


def _aggregates_many(totals: FloatArray, round_rates: FloatArray) -> FloatArray:
    return np.asarray(totals[..., None] * np.where(np.isfinite(round_rates), round_rates, 0.0))
