"""The reach bound (``robust.reach_bound``): what no weights over a CPE's paths can be scored
above. The policy spares working out a CPE's weights when the bound says no weights could
gain what a push needs, so the bound must hold for every weights (else a push is lost) and be
tight (else nothing is spared, and a fleet at 100 ms reports pays for every decision).

Its tight part is the frontier (``frontier_bound_many``): the best any shares of the round
could score over the draws the scores are made of. Here: the frontier's tuples against every
way of passing over ``rank`` draws; the bound against weights found near the optimum (the
robust search, every small weight set, a fine grid of shares); its tightness; its C core
against the numpy twin (also in tests/test_policy_core_variants.py, every build); and a fleet
of 1,000 CPEs, where it spares most rows the sum of the paths' quantiles could not.
"""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from xapp.policy import compiled, robust
from xapp.policy.weight_policy import BalancingRows, make_policy

FloatArray = npt.NDArray[np.float64]


@pytest.mark.parametrize(
    ("paths", "quantile"), [(1, 0.3), (2, 0.05), (2, 0.3), (2, 0.8), (3, 0.05), (3, 0.2)]
)
def test_the_frontier_is_every_most_way_of_passing_over_rank_draws(
    paths: int, quantile: float
) -> None:
    """Every tuple (t_p: path p's t_p lowest draws passed over) whose draws number at most
    the rank, and of those the maximal ones, worked out by brute force with bit masks."""
    rank = robust._rank(robust.DRAWS, quantile)
    order = np.argsort(robust._standard_normal_draws(paths), axis=1, kind="stable")
    lowest = [[0] * (rank + 2) for _ in range(paths)]  # lowest[p][t]: mask of t draws
    for p in range(paths):
        for t in range(1, rank + 2):
            lowest[p][t] = lowest[p][t - 1] | (1 << int(order[p, t - 1]))

    def feasible(counts: tuple[int, ...]) -> bool:
        passed = 0
        for p, t in enumerate(counts):
            passed |= lowest[p][t]
        return passed.bit_count() <= rank

    maximal = set()
    for counts in itertools.product(range(rank + 1), repeat=paths):
        if not feasible(counts):
            continue
        further = ((*counts[:p], counts[p] + 1, *counts[p + 1 :]) for p in range(paths))
        if not any(feasible(more) for more in further):
            maximal.add(counts)
    frontier = robust._frontier(paths, rank)
    assert {tuple(int(t) for t in column) for column in frontier.T} == maximal
    assert frontier.shape[1] == len(maximal)  # (each once)


capacity = st.one_of(st.floats(0.0, 2000.0), st.sampled_from([0.0, 12.1, 342.0, 1190.0]))


@st.composite
def beliefs(draw: st.DrawFn) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    rows = draw(st.integers(1, 4))
    paths = draw(st.integers(1, robust.FRONTIER_PATHS))
    means = draw(hnp.arrays(np.float64, (rows, paths), elements=capacity))
    spread = draw(hnp.arrays(np.float64, (rows, paths), elements=st.floats(0.0, 0.5)))
    risks = draw(
        hnp.arrays(np.float64, (rows, paths), elements=st.sampled_from([0.0, 0.0, 0.02, 0.2, 1.0]))
    )
    stalls = draw(hnp.arrays(np.float64, (rows,), elements=st.sampled_from([0.0, 0.45, 1.0])))
    return means, means * spread, risks, stalls


def _every_small_weight_set(paths: int) -> FloatArray:
    largest = {1: 40, 2: 24, 3: 9}[paths]
    sets = list(itertools.product(range(largest + 1), repeat=paths))
    return np.array(sets, dtype=np.float64)


@pytest.mark.parametrize("with_core", [False, True])
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(belief=beliefs(), quantile=st.sampled_from([0.05, 0.3, 0.5]))
def test_weights_near_the_optimum_score_no_more_than_the_bound(
    with_core: bool, belief: tuple[FloatArray, FloatArray, FloatArray, FloatArray], quantile: float
) -> None:
    """The weights a bound is tested with must come close to it to catch one too low:
    the robust search's own (max weight 100 and 255), its starts' exact optima, and every
    weight set up to a small largest weight; outages charged with the rows' stalls."""
    if with_core and not compiled.COMPILED:
        pytest.skip("the core is not built (test_policy_core.py says why)")
    means, stddevs, risks, stalls = belief
    rows, paths = means.shape
    found = [
        robust.robust_weights_many(means, stddevs, largest, quantile, risks, stalls)
        for largest in (100, 255)
    ]
    small = _every_small_weight_set(paths)
    weights = np.concatenate(
        [np.stack(found, axis=1).astype(np.float64), np.broadcast_to(small, (rows, *small.shape))],
        axis=1,
    )
    scores = robust.scores_many(weights, means, stddevs, quantile, risks, stalls)
    bound = robust.reach_bound(means, stddevs, quantile, risks, stalls, compiled=with_core)
    assert (scores <= bound[:, None]).all(), (scores.max(axis=1), bound)
    # and with no stall given: a bound for any stall
    unstalled = robust.reach_bound(means, stddevs, quantile, risks, compiled=with_core)
    assert (bound <= unstalled).all()


def test_the_frontier_is_the_best_the_shares_of_two_paths_can_score() -> None:
    """Tight: over 4,001 shares of two paths (no outage), the best score comes within
    0.1 % of the frontier, where the sum of the paths' quantiles stands some 8 % above it."""
    rng = np.random.default_rng(3)
    rows = 200
    means = rng.uniform(10, 1000, (rows, 2))
    stddevs = means * rng.uniform(0.05, 0.3, (rows, 2))
    no_risk = np.zeros((rows, 2))
    bound, _ = robust.frontier_bound_many(means, stddevs, no_risk, np.zeros(rows), 0.3)
    shares = np.linspace(0.0, 1.0, 4001)
    weights = np.broadcast_to(np.stack([shares, 1 - shares], axis=1), (rows, len(shares), 2))
    best = robust.scores_many(weights, means, stddevs, 0.3, no_risk).max(axis=1)
    assert (best <= bound * robust.REACH_MARGIN).all()
    assert (bound <= best * 1.001).all(), (bound / best - 1).max()
    summed = robust.each_paths_quantile(means, stddevs, 0.3).sum(axis=1)
    assert np.median(summed / best - 1) > 0.04


@pytest.mark.skipif(not compiled.COMPILED, reason="the core is not built")
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(belief=beliefs(), quantile=st.sampled_from([0.05, 0.3, 0.5, 0.8]))
def test_the_twins_bound_alike(
    belief: tuple[FloatArray, FloatArray, FloatArray, FloatArray], quantile: float
) -> None:
    means, stddevs, risks, stalls = belief
    args = (means, stddevs, risks, stalls, quantile)
    numpy = robust.frontier_bound_many(*args, compiled=False)
    core = robust.frontier_bound_many(*args, compiled=True)
    np.testing.assert_array_equal(core[0], numpy[0])
    np.testing.assert_array_equal(core[1], numpy[1])


def _fleet(rng: np.random.Generator, rows: int, interval_s: float) -> BalancingRows:
    """A fleet of CPEs on 5G NR, LiFi and Wi-Fi (the paper's capacities, ±30 %), each with
    the weights in force the robust search gives for beliefs up to 3 % off: near their best,
    as a fleet's weights mostly are between pushes. LiFi's beam may go dark."""
    accesses = ("5g-nr", "lifi", "wifi")
    capacity = np.array([342.0, 12.1, 1190.0]) * rng.uniform(0.7, 1.3, (rows, 3))
    stddev = capacity * rng.uniform(0.03, 0.15, (rows, 3))
    risk = np.zeros((rows, 3))
    risk[:, 1] = rng.uniform(0.02, 0.2, rows)
    stall = min(1.0, 0.45 / interval_s)
    off = capacity * rng.uniform(0.97, 1.03, (rows, 3))
    current = robust.robust_weights_many(off, stddev, 100, 0.3, risk, stall)
    return BalancingRows(
        accesses,
        now_s=np.full(rows, 10.0),
        measured=np.ones((rows, 3), dtype=bool),
        capacity=capacity,
        stddev=stddev,
        measured_at_s=np.full((rows, 3), 10.0),
        risk=risk,
        decision_interval_s=np.full(rows, interval_s),
        current=current,
        has_current=np.ones(rows, dtype=bool),
        excluded=[frozenset()] * rows,
    )


@pytest.mark.parametrize("interval_s", [1.0, 0.1])
def test_a_fleet_near_its_best_is_mostly_spared_with_the_same_answers(interval_s: float) -> None:
    """1,000 CPEs whose weights in force are near their best, a push needing a 1 % gain:
    the frontier spares more than half the rows that cannot gain it (the sum of the paths'
    quantiles, alone, spares none of them), only such rows, and answers the others exactly
    as when nothing is spared."""
    questions = _fleet(np.random.default_rng(7), 1000, interval_s)
    policy = make_policy("optimal")
    needed = np.full(1000, 0.01)
    plain = policy.answer_rows(questions)
    answers = policy.answer_rows(questions, needed)
    with mock.patch.object(robust, "FRONTIER_PATHS", 0):
        summed_only = policy.answer_rows(questions, needed)
    assert answers.spared is not None
    assert summed_only.spared is not None
    gain = plain.predicted[:, 0] / plain.predicted[:, 1] - 1
    cannot = gain < 0.01
    assert cannot.sum() > 500  # (the fleet is as meant: near its best)
    assert not (answers.spared & ~cannot).any()
    assert answers.spared.sum() > cannot.sum() / 2
    assert summed_only.spared.sum() < answers.spared.sum() / 4
    kept = ~answers.spared
    np.testing.assert_array_equal(answers.weights[kept], plain.weights[kept])
    np.testing.assert_array_equal(answers.predicted[kept], plain.predicted[kept])
