"""The fast optimiser and robust policy decide exactly as the straightforward formulations do.

The references below are the implementations the fast ones replaced, kept verbatim apart from
names: every candidate evaluated in full with (rows × candidates × paths) temporaries, rows
deduplicated with np.unique(axis=0), draws laid out (draws × paths). The fast code must give the
same integer weights bit for bit and the same scores to within 1e-9.
"""

import itertools
import math
from collections.abc import Mapping
from functools import cache
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.domain import CapacityEstimate
from core.fluid import aggregate_mbps
from xapp.policy import robust
from xapp.policy.optimal import optimal_weights, optimal_weights_batch
from xapp.policy.weight_policy import (
    PathView,
    PolicyConfig,
    PolicyInput,
    WeightPolicy,
    balancing_rows,
    make_policy,
)

from .helpers import DL, estimate

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def reference_optimal_weights_batch(capacities: FloatArray, max_weight: int) -> IntArray:
    rows = len(capacities)
    divisors = np.arange(1, max_weight + 1, dtype=np.float64)
    rates = (capacities[:, :, None] / divisors[None, None, :]).reshape(rows, -1)
    valid = rates > 0
    safe_rates = np.where(valid, rates, 1.0)
    with np.errstate(over="ignore"):
        weights = np.minimum(
            np.floor(capacities[:, None, :] / safe_rates[:, :, None] * (1 + 1e-12)), max_weight
        )
    weights = np.where(valid[:, :, None], weights, 0.0)
    weighted = weights > 0
    ratios = np.where(
        weighted, capacities[:, None, :] / np.where(weighted, weights, 1.0), np.inf
    ).min(axis=2)
    totals = weights.sum(axis=2)
    aggregates = totals * np.where(np.isfinite(ratios), ratios, 0.0)
    best = aggregates.max(axis=1, keepdims=True)
    ties = aggregates >= best * (1 - 1e-9)
    chosen = np.argmin(np.where(ties, totals, np.inf), axis=1)
    result: IntArray = weights[np.arange(rows), chosen].astype(np.int64)
    result[best[:, 0] <= 0] = 0
    return result


def reference_aggregate_mbps_batch(weights: FloatArray, capacities: FloatArray) -> FloatArray:
    weighted = weights > 0
    ratios = np.where(weighted, capacities / np.where(weighted, weights, 1.0), np.inf)
    round_rate = ratios.min(axis=-1)
    round_rate = np.where(np.isfinite(round_rate), round_rate, 0.0)
    return np.asarray(np.where(weighted, weights, 0.0).sum(axis=-1) * round_rate)


@cache
def reference_standard_normal_draws(paths: int) -> FloatArray:
    return np.random.default_rng(robust._SEED).standard_normal((robust.DRAWS, paths))


def reference_belief_draws(means: FloatArray, stddevs: FloatArray) -> FloatArray:
    return np.maximum(0.0, means + stddevs * reference_standard_normal_draws(len(means)))


def reference_order_statistic(values: FloatArray, quantile: float) -> FloatArray:
    rank = min(values.shape[-1] - 1, max(0, round(quantile * (values.shape[-1] - 1))))
    return np.asarray(np.partition(values, rank, axis=-1)[..., rank], dtype=np.float64)


def reference_aggregates_at_risk(
    candidates: FloatArray,
    draws: FloatArray,
    outage_probability: FloatArray | None,
    stall_fraction: float,
) -> FloatArray:
    shape = (len(candidates), *draws.shape)
    full = reference_aggregate_mbps_batch(
        np.broadcast_to(candidates[:, None, :], shape), np.broadcast_to(draws, shape)
    )
    if outage_probability is None:
        return full
    after_stall = max(0.0, 0.5 - stall_fraction)
    expected = full.copy()
    for path, probability in enumerate(outage_probability):
        weighted = candidates[:, path] > 0
        if probability <= 0 or not weighted.any():
            continue
        without = candidates[weighted].copy()
        without[:, path] = 0.0
        inner = (int(weighted.sum()), *draws.shape)
        rest = reference_aggregate_mbps_batch(
            np.broadcast_to(without[:, None, :], inner), np.broadcast_to(draws, inner)
        )
        dark = 0.5 * full[weighted] + after_stall * rest
        expected[weighted] -= probability * (full[weighted] - dark)
    return expected


def reference_score_mbps(
    weights: FloatArray,
    means: FloatArray,
    stddevs: FloatArray,
    quantile: float,
    outage_probability: FloatArray | None,
    stall_fraction: float,
) -> float:
    draws = reference_belief_draws(means, stddevs)
    w = np.asarray(weights, dtype=np.float64)[None, :]
    aggregates = reference_aggregates_at_risk(w, draws, outage_probability, stall_fraction)
    return float(reference_order_statistic(aggregates[0], quantile))


def reference_robust_weights(
    means: FloatArray,
    stddevs: FloatArray,
    max_weight: int,
    quantile: float,
    outage_probability: FloatArray | None,
    stall_fraction: float,
) -> IntArray:
    at_risk = outage_probability is not None and bool(np.any(outage_probability > 0))
    if not np.any(stddevs > 0) and not at_risk:
        exact: IntArray = reference_optimal_weights_batch(means[None, :], max_weight)[0]
        return exact
    z = NormalDist().inv_cdf(quantile)
    lowered = np.maximum(0.0, means + z * stddevs)
    one_lowered = np.where(np.eye(len(means), dtype=bool), lowered[None, :], means[None, :])
    one_dropped = np.where(np.eye(len(means), dtype=bool), 0.0, means[None, :])
    draws = reference_belief_draws(means, stddevs)
    starts = np.vstack([means, lowered, one_lowered, one_dropped, draws[: robust.CANDIDATE_DRAWS]])
    candidates = np.unique(reference_optimal_weights_batch(starts, max_weight), axis=0)
    candidates = candidates[candidates.sum(axis=1) > 0]
    if len(candidates) == 0:
        return np.zeros(len(means), dtype=np.int64)
    aggregates = reference_aggregates_at_risk(
        candidates.astype(np.float64),
        draws,
        outage_probability if at_risk else None,
        stall_fraction,
    )
    scores = reference_order_statistic(aggregates, quantile)
    ties = scores >= scores.max() * (1 - 1e-9)
    chosen = np.argmin(np.where(ties, candidates.sum(axis=1), np.iinfo(np.int64).max))
    return np.asarray(candidates[chosen], dtype=np.int64)


def reference_predict(
    weights: Mapping[str, int],
    usable: Mapping[str, CapacityEstimate],
    request: PolicyInput,
    config: PolicyConfig,
) -> float:
    """WeightPolicy's prediction, one weight set at a time."""
    accesses = sorted(set(weights) | set(usable))
    w = np.array([weights.get(a, 0) for a in accesses], dtype=np.float64)
    means = np.array([usable[a].capacity_mbps if a in usable else 0.0 for a in accesses])
    stddevs = np.array([usable[a].stddev_mbps if a in usable else 0.0 for a in accesses])
    risk = {p.access: p.outage_probability for p in request.paths}
    stall = min(1.0, config.outage_stall_s / max(request.decision_interval_s, 1e-3))
    return reference_score_mbps(
        w,
        means,
        stddevs,
        config.quantile,
        np.array([risk.get(a, 0.0) for a in accesses]),
        stall,
    )


# Exact zeros, subnormals, tiny paths beside large ones, and a few round values drawn often so
# that equal capacities (ties) are common.
capacity = st.one_of(
    st.just(0.0),
    st.sampled_from([1e-3, 0.5, 12.1, 50.0, 100.0, 342.0, 1190.0]),
    st.floats(min_value=0.0, max_value=2000.0),
    st.floats(min_value=0.0, max_value=1e-300),
    st.floats(min_value=1e-6, max_value=1e-2),
)
max_weights = st.sampled_from([1, 2, 3, 7, 100, 255])


@st.composite
def capacity_rows(
    draw: st.DrawFn, paths: int | None = None, values: st.SearchStrategy[float] = capacity
) -> list[float]:
    size = paths if paths is not None else draw(st.integers(1, 4))
    row = draw(st.lists(values, min_size=size, max_size=size))
    if draw(st.booleans()):
        # Some paths copied from others: exact ties between paths.
        row = [row[draw(st.integers(0, size - 1))] if draw(st.booleans()) else c for c in row]
    return row


@st.composite
def capacity_matrices(draw: st.DrawFn) -> list[list[float]]:
    paths = draw(st.integers(1, 4))
    return draw(st.lists(capacity_rows(paths), min_size=1, max_size=6))


@st.composite
def beliefs(draw: st.DrawFn) -> tuple[FloatArray, FloatArray, FloatArray, float, float]:
    """(means, stddevs, outage probabilities, quantile, stall fraction) for 1-4 paths."""
    means = draw(capacity_rows())
    spread = st.one_of(st.just(0.0), st.sampled_from([0.01, 0.05, 0.35, 1.0]), st.floats(0, 2))
    stddevs = [m * draw(spread) for m in means]
    outage = st.one_of(st.just(0.0), st.sampled_from([0.05, 0.1, 1.0]), st.floats(0, 1))
    risks = draw(
        st.one_of(
            st.just([0.0] * len(means)), st.lists(outage, min_size=len(means), max_size=len(means))
        )
    )
    quantile = draw(st.sampled_from([0.05, 0.3, 0.5, 0.9]) | st.floats(0.01, 0.99))
    stall = draw(st.sampled_from([0.0, 0.45, 0.6, 1.0]) | st.floats(0, 1))
    return np.array(means), np.array(stddevs), np.array(risks), quantile, stall


@settings(max_examples=400, deadline=None)
@given(capacity_matrices(), max_weights)
@example([[0.0, 0.0]], 100)
@example([[100.0, 100.0], [50.0, 100.0]], 100)
@example([[1000.0, 1000.0, 0.5]], 100)
@example([[5e-324, 1e-323, 3e-323]], 7)
@example([[1000.0, 999.0]], 100)
# Near ties (within 1e-9 of the best, not within 1e-13) with fewer segments per round.
@example([[36.300000000847184, 60.5]], 3)
@example([[6.999999995753822, 4.000000000412851, 3.0], [500.0, 300.0000000619018, 0.0]], 3)
def test_optimal_weights_batch_equals_the_reference(
    rows: list[list[float]], max_weight: int
) -> None:
    capacities = np.array(rows)
    expected = reference_optimal_weights_batch(capacities, max_weight)
    np.testing.assert_array_equal(optimal_weights_batch(capacities, max_weight), expected)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda paths: capacity_rows(paths, st.just(0.0) | st.floats(min_value=1e-3, max_value=2000))
    ),
    st.integers(1, 6),
)
def test_optimal_weights_are_the_smallest_exhaustive_best(
    caps: list[float], max_weight: int
) -> None:
    """Against every weight vector, not only those the optimiser considers: the best aggregate,
    and no vector with fewer segments per round within the tie band."""
    vectors = list(itertools.product(range(max_weight + 1), repeat=len(caps)))
    aggregates = [aggregate_mbps(list(w), caps) for w in vectors]
    best = max(aggregates)
    chosen = optimal_weights(caps, max_weight)
    assert aggregate_mbps(list(chosen), caps) == pytest.approx(best, rel=1e-9, abs=0)
    assert not [
        w
        for w, aggregate in zip(vectors, aggregates, strict=True)
        if sum(w) < sum(chosen) and aggregate >= best * (1 - 1e-9)
    ]


@settings(max_examples=300, deadline=None)
@given(beliefs(), max_weights)
@example((np.array([342.0, 1190.0, 12.1]), np.array([1.0, 3.0, 4.2]), np.zeros(3), 0.3, 0.45), 100)
@example(
    (np.array([342.0, 1190.0, 12.1]), np.array([3.4, 11.9, 0.1]), np.array([0, 0, 0.1]), 0.3, 0.45),
    100,
)
@example((np.array([100.0, 100.0]), np.array([5.0, 5.0]), np.zeros(2), 0.3, 0.0), 100)
# Near ties between the candidates' scores.
@example(
    (np.array([29.99999999563525, 49.99999994576933]), np.array([0, 5e-9]), np.zeros(2), 0.3, 0.45),
    3,
)
@example(
    (
        np.array([399.99999815697805, 200.0, 100.00000000391063]),
        np.array([3.999999981569781e-08, 0.2, 0.0]),
        np.array([0.0, 0.1, 0.0]),
        0.3,
        0.45,
    ),
    3,
)
@example((np.array([100.0, 0.0]), np.zeros(2), np.array([1.0, 0.0]), 0.5, 1.0), 100)
def test_robust_weights_and_scores_equal_the_reference(
    belief: tuple[FloatArray, FloatArray, FloatArray, float, float], max_weight: int
) -> None:
    means, stddevs, risks, quantile, stall = belief
    for outage in (risks, None):
        expected = reference_robust_weights(means, stddevs, max_weight, quantile, outage, stall)
        chosen = robust.robust_weights(means, stddevs, max_weight, quantile, outage, stall)
        np.testing.assert_array_equal(chosen, expected)
    others = [np.ones(len(means)), np.arange(len(means), dtype=np.float64) * 7]
    for weights in [expected.astype(np.float64), *others]:
        assert robust.score_mbps(weights, means, stddevs, quantile, risks, stall) == pytest.approx(
            reference_score_mbps(weights, means, stddevs, quantile, risks, stall), rel=1e-9, abs=0
        )


@st.composite
def fleets_of_beliefs(draw: st.DrawFn) -> tuple[list[tuple[Any, ...]], float, int]:
    """Several CPEs' beliefs over the same number of paths, with one quantile."""
    paths = draw(st.integers(1, 4))
    rows = draw(st.lists(beliefs().filter(lambda b: len(b[0]) == paths), min_size=1, max_size=5))
    return [(m, s, r, np.float64(stall)) for m, s, r, _, stall in rows], rows[0][3], paths


@settings(max_examples=300, deadline=None)
@given(fleets_of_beliefs(), max_weights)
def test_many_cpes_at_once_decide_and_score_as_one_by_one(
    fleet: tuple[list[tuple[Any, ...]], float, int], max_weight: int
) -> None:
    rows, quantile, _ = fleet
    means, stddevs, risks, stalls = (np.array([row[k] for row in rows]) for k in range(4))
    chosen = robust.robust_weights_many(means, stddevs, max_weight, quantile, risks, stalls)
    for n, (m, s, r, stall) in enumerate(rows):
        one = robust.robust_weights(m, s, max_weight, quantile, r, float(stall))
        np.testing.assert_array_equal(chosen[n], one, err_msg=f"CPE {n} of {len(rows)}")
    sets = np.stack([chosen, np.ones_like(chosen), np.zeros_like(chosen)], axis=1)
    scores = robust.scores_many(sets, means, stddevs, quantile, risks, stalls)
    for n, (m, s, r, stall) in enumerate(rows):
        alone = robust.scores_mbps(sets[n], m, s, quantile, r, float(stall))
        np.testing.assert_array_equal(scores[n], alone)


@settings(max_examples=200, deadline=None)
@given(beliefs(), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_aggregates_at_risk_equal_the_reference(
    belief: tuple[FloatArray, FloatArray, FloatArray, float, float], count: int, seed: int
) -> None:
    means, stddevs, risks, _, stall = belief
    rng = np.random.default_rng(seed)
    candidates = rng.integers(0, 4, size=(count, len(means))).astype(np.float64)
    for outage in (risks, None):
        np.testing.assert_allclose(
            robust._aggregates_at_risk(
                candidates, robust.belief_draws(means, stddevs), outage, stall
            ),
            reference_aggregates_at_risk(
                candidates, reference_belief_draws(means, stddevs), outage, stall
            ),
            rtol=1e-9,
            atol=0,
        )


@pytest.mark.parametrize(("paths", "max_weight"), [(1, 1), (2, 3), (3, 100), (4, 255)])
def test_distinct_weighted_rows_are_those_of_np_unique_in_its_order(
    paths: int, max_weight: int
) -> None:
    rng = np.random.default_rng(paths)
    weights = rng.integers(0, max_weight + 1, size=(40, paths))
    weights[20:] = weights[:20]
    weights[5, :] = max_weight
    weights[7, :] = 0
    distinct = np.unique(weights, axis=0)
    np.testing.assert_array_equal(
        robust._distinct_weighted_rows(weights), distinct[distinct.sum(axis=1) > 0]
    )
    assert robust._distinct_weighted_rows(np.zeros((3, paths), dtype=np.int64)).shape == (0, paths)


@st.composite
def policy_inputs(draw: st.DrawFn) -> PolicyInput:
    """A CPE's paths (some unusable, some at risk of going dark) and the weights in force, which
    may name paths the CPE no longer has or leave some out."""
    names = draw(st.lists(st.sampled_from(["nr", "wifi", "lifi"]), min_size=1, unique=True))
    means = draw(capacity_rows(len(names)))
    views = tuple(
        PathView(
            name,
            estimate(
                name,
                mean,
                stddev_mbps=mean * draw(st.sampled_from([0.0, 0.01, 0.05, 0.35])),
                available=draw(st.booleans() | st.just(True)),
            ),
            outage_probability=draw(st.sampled_from([0.0, 0.0, 0.05, 0.5])),
        )
        for name, mean in zip(names, means, strict=True)
    )
    current = draw(
        st.none()
        | st.dictionaries(
            st.sampled_from(["nr", "wifi", "lifi", "gone"]), st.integers(0, 100), min_size=1
        )
    )
    interval = draw(st.sampled_from([0.2, 1.0, 5.0]))
    return PolicyInput("cpe-1", DL, 0.0, views, current=current, decision_interval_s=interval)


@settings(max_examples=200, deadline=None)
@given(policy_inputs())
def test_proposals_equal_the_reference(request: PolicyInput) -> None:
    config = PolicyConfig()
    proposal = make_policy("optimal", config).propose(request)
    reference = WeightPolicy(
        "reference", reference_robust_weights, config, uncertainty_aware=True
    ).propose(request)
    if reference is None:
        assert proposal is None
        return
    assert proposal is not None
    assert dict(proposal.weights) == dict(reference.weights)
    usable = {
        p.access: p.estimate
        for p in request.paths
        if p.estimate is not None and p.estimate.available and p.estimate.capacity_mbps > 0
    }
    assert proposal.predicted_mbps == pytest.approx(
        reference_predict(proposal.weights, usable, request, config), rel=1e-9, abs=0
    )
    if request.current is None:
        assert proposal.current_predicted_mbps is None
    else:
        assert proposal.current_predicted_mbps == pytest.approx(
            reference_predict(request.current, usable, request, config), rel=1e-9, abs=0
        )


def test_a_fleet_larger_than_a_block_decides_as_one_by_one() -> None:
    """1,000 CPEs (blocks of robust.BLOCK), some certain, some at risk, as one call."""
    rng = np.random.default_rng(7)
    cpes = 1000
    means = rng.choice([0.0, 12.0, 340.0, 1190.0], size=(cpes, 3)) * rng.uniform(
        0.5, 1.5, (cpes, 3)
    )
    stddevs = means * rng.choice([0.0, 0.05, 0.35], size=(cpes, 3))
    risks = rng.choice([0.0, 0.0, 0.1], size=(cpes, 3))
    stalls = rng.choice([0.0, 0.45], size=cpes)
    chosen = robust.robust_weights_many(means, stddevs, 100, 0.3, risks, stalls)
    for n in range(cpes):
        one = robust.robust_weights(means[n], stddevs[n], 100, 0.3, risks[n], float(stalls[n]))
        np.testing.assert_array_equal(chosen[n], one, err_msg=f"CPE {n}")


@settings(max_examples=100, deadline=None)
@given(st.lists(policy_inputs(), min_size=1, max_size=8))
def test_proposals_for_many_equal_those_one_by_one(requests: list[PolicyInput]) -> None:
    """A step's requests (any mix of path counts, some without a usable path) proposed
    together give what each gets alone from the per-CPE reference weighing."""
    config = PolicyConfig()
    together = make_policy("optimal", config).propose_many(requests)
    reference = WeightPolicy("optimal", reference_robust_weights, config, uncertainty_aware=True)
    for request, proposal in zip(requests, together, strict=True):
        alone = reference.propose(request)
        assert (proposal is None) == (alone is None)
        if proposal is None or alone is None:
            continue
        assert dict(proposal.weights) == dict(alone.weights)
        assert proposal.predicted_mbps == pytest.approx(alone.predicted_mbps, rel=1e-9, abs=0)
        assert proposal.reason == alone.reason


@st.composite
def balancing_inputs(draw: st.DrawFn) -> PolicyInput:
    """A load-balancing question as a fleet's step puts it: the weights in force (if any) over
    exactly the CPE's paths; estimates missing, stale, down, zero, negligible or uncertain;
    accesses the operator took out."""
    names = draw(
        st.permutations(["nr", "wifi", "lifi"]).map(lambda p: p[: draw(st.integers(1, 3))])
    )
    now_s = 100.0
    views = []
    for name in names:
        kind = draw(
            st.sampled_from(["usable", "usable", "usable", "none", "stale", "down", "zero"])
        )
        mean = draw(st.sampled_from([0.4, 5.0, 12.1, 342.0, 1190.0])) * draw(st.floats(0.5, 1.5))
        view_estimate = (
            None
            if kind == "none"
            else estimate(
                name,
                0.0 if kind == "zero" else mean,
                stddev_mbps=mean * draw(st.sampled_from([0.0, 0.01, 0.05, 0.35, 2.0])),
                available=kind != "down",
                at_s=now_s - (20.0 if kind == "stale" else draw(st.sampled_from([0.0, 3.0]))),
            )
        )
        views.append(
            PathView(
                name, view_estimate, outage_probability=draw(st.sampled_from([0.0, 0.05, 0.5]))
            )
        )
    current = draw(st.none() | st.just({n: draw(st.integers(0, 100)) for n in names}))
    excluded = frozenset(draw(st.sets(st.sampled_from(names))))
    return PolicyInput(
        "cpe-1",
        DL,
        now_s,
        tuple(views),
        current=current,
        decision_interval_s=draw(st.sampled_from([0.1, 1.0, 5.0])),
        excluded=excluded,
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(balancing_inputs(), min_size=1, max_size=12))
@example(  # a path exactly at the negligible floor (1 % of the largest) is kept
    [
        PolicyInput(
            "cpe-1",
            DL,
            0.0,
            (PathView("wifi", estimate("wifi", 1000.0)), PathView("lifi", estimate("lifi", 10.0))),
            current={"wifi": 1, "lifi": 1},
        )
    ]
)
def test_the_balancing_lane_proposes_as_the_plans_do(requests: list[PolicyInput]) -> None:
    """The fleet's usual questions, worked out as arrays for all of them (the lane), give
    exactly the proposals of planning each (the path every other question takes)."""
    policy = make_policy("optimal")
    assert all(policy._in_balancing_lane(r) for r in requests)
    lane = policy.propose_many(requests)
    planned = policy._propose_planned(requests)
    assert lane == planned


def test_a_cpe_naming_an_access_twice_is_planned_not_laned() -> None:
    """The lane's arrays are one column per access: a question naming one twice takes the
    planned path, beside the lane's questions of the same step."""
    twice = PolicyInput(
        "cpe-2",
        DL,
        0.0,
        (PathView("nr", estimate("nr", 300.0)), PathView("nr", estimate("nr", 100.0))),
    )
    usual = PolicyInput(
        "cpe-1",
        DL,
        0.0,
        (PathView("nr", estimate("nr", 300.0)), PathView("wifi", estimate("wifi", 900.0))),
    )
    policy = make_policy("optimal")
    assert policy.propose_many([usual, twice]) == policy._propose_planned([usual, twice])


@settings(max_examples=150, deadline=None)
@given(st.lists(balancing_inputs(), min_size=1, max_size=12), st.data())
def test_rows_spared_keep_the_weights_in_force_unless_those_carry_nothing(
    requests: list[PolicyInput], data: st.DataObject
) -> None:
    """Rows the loop asks to spare keep the weights in force, predicted as they are, and are
    not weighed, unless those weights are predicted to carry nothing: every row whose budget
    is spent (needing an infinite gain), and every row no weights could gain what it needs
    over them (the bound, which never falls below the gain the proposal would have had, and
    is the number the loop's inputs get, ``within_reach``). Every other row is answered
    exactly as when nothing is spared."""
    policy = make_policy("optimal")
    by_accesses: dict[tuple[str, ...], list[PolicyInput]] = {}
    for request in requests:
        by_accesses.setdefault(tuple(p.access for p in request.paths), []).append(request)
    gains = st.sampled_from([math.nan, math.inf, 0.0, 0.005, 0.01, 0.05, 0.2, 1.0, 5.0])
    for accesses, group in by_accesses.items():
        questions = balancing_rows(accesses, group)
        needed = np.array(data.draw(st.lists(gains, min_size=len(group), max_size=len(group))))
        plain = policy.answer_rows(questions)
        answers = policy.answer_rows(questions, needed)
        assert answers.spared is not None
        assert answers.within is not None
        assert plain.spared is None
        spared, within = answers.spared, answers.within
        carrying = plain.predicted[:, 1] > 0
        asked = ~np.isnan(needed) & questions.has_current & plain.answered & carrying
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = plain.predicted[:, 0] / plain.predicted[:, 1] - 1
        for row, request in enumerate(group):
            at_most = policy.within_reach(request, float(plain.predicted[row, 1]))
            if asked[row] and np.isfinite(needed[row]):
                assert at_most is not None
                assert gain[row] <= at_most  # (the bound holds)
                # spared exactly when the bound is below what is needed, and says so
                assert bool(spared[row]) == (at_most < needed[row])
                if spared[row]:
                    assert within[row] == at_most
                    assert gain[row] < needed[row]
                else:
                    assert math.isnan(within[row])
            else:
                assert bool(spared[row]) == bool(asked[row])  # a budget spent, or none
                assert math.isnan(within[row])
        assert (answers.weights[spared] == questions.current[spared]).all()
        assert (answers.predicted[spared, 0] == plain.predicted[spared, 1]).all()
        assert (answers.predicted[spared, 1] == plain.predicted[spared, 1]).all()
        kept = ~spared
        assert (answers.weights[kept] == plain.weights[kept]).all()
        assert (answers.predicted[kept] == plain.predicted[kept]).all()
        assert (answers.usable == plain.usable).all()
