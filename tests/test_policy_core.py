"""The robust policy's C core (`xapp/policy/_robust_core.c`) against its numpy twin.

The twins must give the same integer weights bit for bit and the same scores exactly, for any
beliefs: generated ones of every number of paths the core takes, and the corners (capacities
of 0, of 1e-300 and 1e300, outages certain enough to make a score negative). The numpy twin is
itself checked against the straightforward formulations in tests/test_policy_equivalence.py.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from xapp.policy import compiled, robust
from xapp.policy.optimal import optimal_weights_batch

FloatArray = npt.NDArray[np.float64]


def test_the_core_was_built() -> None:
    """`pip install` builds it wherever a compiler is, and the setup script installs one."""
    if os.environ.get("ATSSS_PURE_PYTHON") == "1":
        pytest.skip("ATSSS_PURE_PYTHON=1 leaves the core out on purpose")
    assert compiled.COMPILED, "xapp.policy._robust_core was not built: is a C compiler there?"
    source = Path(compiled.__file__).with_name("_robust_core.c")
    wanted = hashlib.sha256(source.read_bytes()).hexdigest()
    assert wanted == compiled.core.SOURCE_SHA256, (
        "xapp.policy._robust_core was built from another source: it did not compile "
        "(pip install -v -e . says why)"
    )


needs_core = pytest.mark.skipif(
    not compiled.COMPILED, reason="the core is not built (test_the_core_was_built says why)"
)

capacity = st.one_of(
    st.floats(0.0, 2000.0),
    st.sampled_from([0.0, 1e-300, 5e-324, 1e300, 12.1, 342.0, 1190.0]),
)


@st.composite
def beliefs(draw: st.DrawFn) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    rows = draw(st.integers(1, 6))
    paths = draw(st.integers(1, 5))
    shape = (rows, paths)
    means = draw(hnp.arrays(np.float64, shape, elements=capacity))
    spread = draw(hnp.arrays(np.float64, shape, elements=st.floats(0.0, 1.0)))
    stddevs = means * spread * draw(st.sampled_from([0.0, 0.1, 1.0]))
    risks = draw(
        hnp.arrays(np.float64, shape, elements=st.sampled_from([0.0, 0.0, 0.01, 0.3, 1.0]))
    )
    stalls = draw(hnp.arrays(np.float64, (rows,), elements=st.floats(0.0, 1.0)))
    return means, stddevs, risks, stalls


@needs_core
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    belief=beliefs(),
    quantile=st.sampled_from([0.05, 0.2, 0.5, 0.8]),
    max_weight=st.sampled_from([1, 3, 100, 255]),
)
def test_the_twins_choose_the_same_weights(
    belief: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
    quantile: float,
    max_weight: int,
) -> None:
    means, stddevs, risks, stalls = belief
    args = (means, stddevs, max_weight, quantile, risks, stalls)
    numpy = robust.robust_weights_many(*args, compiled=False)
    core = robust.robust_weights_many(*args, compiled=True)
    np.testing.assert_array_equal(core, numpy)


@needs_core
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(belief=beliefs(), quantile=st.sampled_from([0.05, 0.2, 0.5]), data=st.data())
def test_the_twins_score_alike(
    belief: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
    quantile: float,
    data: st.DataObject,
) -> None:
    means, stddevs, risks, stalls = belief
    rows, paths = means.shape
    weights = data.draw(
        hnp.arrays(np.float64, (rows, 2, paths), elements=st.integers(0, 100).map(float))
    )
    args = (weights, means, stddevs, quantile, risks, stalls)
    numpy = robust.scores_many(*args, compiled=False)
    core = robust.scores_many(*args, compiled=True)
    np.testing.assert_array_equal(core, numpy)


@needs_core
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(belief=beliefs(), quantile=st.sampled_from([0.05, 0.2, 0.5, 0.8]))
def test_the_twins_reach_alike(
    belief: tuple[FloatArray, FloatArray, FloatArray, FloatArray], quantile: float
) -> None:
    means, stddevs, _, _ = belief
    numpy = robust.reach_many(means, stddevs, quantile, compiled=False)
    core = robust.reach_many(means, stddevs, quantile, compiled=True)
    np.testing.assert_array_equal(core, numpy)


@settings(max_examples=200, deadline=None)
@given(belief=beliefs(), quantile=st.sampled_from([0.05, 0.2, 0.5, 0.8]))
def test_each_paths_quantile_is_its_draws_value_of_that_rank(
    belief: tuple[FloatArray, FloatArray, FloatArray, FloatArray], quantile: float
) -> None:
    """Worked out from the one standard draw of the rank, as the draws sorted would give."""
    means, stddevs, _, _ = belief
    draws = robust._belief_draws_many(means, stddevs)  # (CPEs, paths, draws)
    expected = robust._order_statistic(draws, quantile)
    np.testing.assert_array_equal(robust.each_paths_quantile(means, stddevs, quantile), expected)


@pytest.mark.parametrize("with_core", [False, True])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(belief=beliefs(), quantile=st.sampled_from([0.05, 0.2, 0.5, 0.8]), data=st.data())
def test_no_weights_score_above_the_reach_bound(
    with_core: bool,
    belief: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
    quantile: float,
    data: st.DataObject,
) -> None:
    """Whatever the weights, their score over the beliefs (outages charged) stays at or under
    ``reach_bound``: the policy spares working out weights on that promise."""
    if with_core and not compiled.COMPILED:
        pytest.skip("the core is not built (test_the_core_was_built says why)")
    means, stddevs, risks, stalls = belief
    means = np.minimum(means, 1e12)  # (aggregates of 1e300 overflow to infinity: no bound)
    stddevs = np.minimum(stddevs, means)
    rows, paths = means.shape
    weights = data.draw(
        hnp.arrays(
            np.float64,
            (rows, 4, paths),
            elements=st.one_of(st.integers(0, 3), st.integers(0, 255)).map(float),
        )
    )
    scores = robust.scores_many(
        weights, means, stddevs, quantile, risks, stalls, compiled=with_core
    )
    bound = robust.reach_bound(means, stddevs, quantile, risks, compiled=with_core)
    assert (scores <= bound[:, None]).all(), (scores, bound)


@needs_core
@settings(max_examples=300, deadline=None)
@given(
    capacities=st.integers(1, 6).flatmap(
        lambda paths: hnp.arrays(np.float64, (4, paths), elements=capacity)
    ),
    max_weight=st.sampled_from([1, 2, 7, 100, 255]),
)
@example(capacities=np.array([[342.0, 1190.0, 12.1]]), max_weight=100)
@example(capacities=np.zeros((2, 3)), max_weight=100)
def test_the_twins_find_the_same_optimum(capacities: FloatArray, max_weight: int) -> None:
    numpy = optimal_weights_batch(capacities, max_weight, compiled=False)
    core = optimal_weights_batch(capacities, max_weight, compiled=True)
    np.testing.assert_array_equal(core, numpy)


@needs_core
@settings(max_examples=60, deadline=None)
@given(
    paths=st.integers(2, 6),
    base=st.sampled_from([1.0, 0.1, 12.1, 1e-3, 3e-200, 1e250]),
    max_weight=st.sampled_from([1, 3, 10, 100, 255]),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_fleet_of_tied_capacities_gets_the_same_optimum(
    paths: int, base: float, max_weight: int, seed: int
) -> None:
    """The core leaves out candidates whose bound falls below the best found so far; the
    weights must still be numpy's where ties are everywhere: 1,000 CPEs whose capacities are
    small multiples of one base (many candidates within 1e-9 of the best, the least weight
    sum then the first one winning), some equal, some zero, some tiny beside the rest."""
    rng = np.random.default_rng(seed)
    rows = 1000
    capacities = rng.integers(0, 40, (rows, paths)).astype(np.float64) * base
    equal = rng.random(rows) < 0.2
    capacities[equal, 1] = capacities[equal, 0]
    tiny = rng.random(rows) < 0.2
    capacities[tiny, -1] = base * rng.integers(1, 3, tiny.sum()) / 1000.0
    numpy = optimal_weights_batch(capacities, max_weight, compiled=False)
    core = optimal_weights_batch(capacities, max_weight, compiled=True)
    np.testing.assert_array_equal(core, numpy)


@needs_core
@settings(max_examples=100, deadline=None)
@given(
    paths=st.integers(1, 6),
    capacity=st.one_of(
        st.floats(5e-324, 1.7e308),
        st.sampled_from(
            [
                5e-324,
                1e-310,
                2.0**-1000,
                1e-300,
                12.1,
                2.0**1000,
                2.0**1001,
                1.7976931348623157e308,
            ],
        ),
    ),
    max_weight=st.sampled_from([1, 2, 3, 100, 255]),
    seed=st.integers(0, 2**32 - 1),
)
@example(paths=3, capacity=1.7976931348623157e308, max_weight=100, seed=0)  # (the scan: 3)
@example(paths=3, capacity=2.0**-1000, max_weight=255, seed=0)
def test_one_path_with_capacity_gets_the_full_scan_s_weights(
    paths: int, capacity: float, max_weight: int, seed: int
) -> None:
    """The core answers a row with one path of capacity and the rest without at once (weight 1
    there, 0 elsewhere: every candidate of that path is tied, the least weight sum wins),
    where the scan works out every candidate; kept to the capacities where the scan's
    arithmetic shows that, which must give numpy's weights on either side of the limits."""
    rng = np.random.default_rng(seed)
    capacities = np.zeros((50, paths))
    capacities[np.arange(50), rng.integers(0, paths, 50)] = capacity * rng.choice(
        [1.0, 0.5, 0.999, 1e-3], 50
    )
    with np.errstate(over="ignore"):  # (the scan's aggregates of 1.8e308 overflow)
        numpy = optimal_weights_batch(capacities, max_weight, compiled=False)
    core = optimal_weights_batch(capacities, max_weight, compiled=True)
    np.testing.assert_array_equal(core, numpy)
    usual = (capacities.max(axis=1) >= 2.0**-1000) & (capacities.max(axis=1) <= 2.0**1000)
    np.testing.assert_array_equal(core[usual], (capacities[usual] > 0).astype(np.int64))


@needs_core
def test_scores_whose_aggregates_overflow_are_numpy_s() -> None:
    """The core's order statistic counts instead of swapping, and looks for its pivot between
    bounds that exclude the infinities: beliefs near the largest double, whose aggregates
    overflow to inf on some draws, all draws or none, must still end, with numpy's scores."""
    rows = 300
    rng = np.random.default_rng(3)
    means = rng.choice([5e307, 1e308, 1.5e308, 1e300, 342.0], (rows, 3))
    stddevs = means * rng.choice([0.0, 0.5, 1.0], (rows, 1))
    weights = rng.integers(0, 101, (rows, 2, 3)).astype(np.float64)
    for quantile in (0.0, 0.05, 0.5, 0.95, 1.0):
        with np.errstate(over="ignore", invalid="ignore"):
            numpy = robust.scores_many(weights, means, stddevs, quantile, compiled=False)
        core = robust.scores_many(weights, means, stddevs, quantile, compiled=True)
        assert np.isinf(core).any()
        assert np.isfinite(core).any()
        np.testing.assert_array_equal(core, numpy)


@needs_core
def test_a_fleet_of_random_beliefs_is_decided_alike() -> None:
    """2,000 CPEs of three paths, as a step decides them: one block, not a handful of rows."""
    rng = np.random.default_rng(7)
    rows = 2000
    means = rng.uniform(0, 1500, (rows, 3))
    means[:, 2] = rng.uniform(0, 20, rows)  # a small LiFi path
    stddevs = means * rng.uniform(0, 0.3, (rows, 3))
    risks = rng.uniform(0, 0.2, (rows, 3)) * (rng.random((rows, 3)) < 0.3)
    stalls = rng.uniform(0, 1, rows)
    for quantile in (0.2, 0.5):
        args = (means, stddevs, 100, quantile, risks, stalls)
        np.testing.assert_array_equal(
            robust.robust_weights_many(*args, compiled=True),
            robust.robust_weights_many(*args, compiled=False),
        )


@needs_core
def test_shapes_beyond_the_core_are_refused_when_it_is_insisted_on() -> None:
    too_many = np.ones((1, compiled.core.MAX_PATHS + 1))
    with pytest.raises(ValueError, match="paths"):
        robust.robust_weights_many(too_many, too_many, 100, 0.2, compiled=True)
    # by default such a shape goes to numpy
    assert robust.robust_weights_many(too_many, too_many, 100, 0.2).shape == too_many.shape
    with pytest.raises(ValueError, match="holds"):
        compiled.core.optimal(np.ones(3), np.empty(2, dtype=np.int64), 1, 3, 100)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.floats(2.0**-1000, 1.7e308),
        st.sampled_from(
            [2.0**-1000, 1e-300, 1.0, 3.0, 12.1, 342.0, 1190.0, 1.7976931348623157e308]
        ),
    )
)
def test_a_paths_own_weight_at_its_own_rate_is_the_rate_divisor(capacity: float) -> None:
    """What lets the core skip a third of its divisions: at round rate c / m (path j's
    candidate m) path j's own weight, as the numpy twin divides it out, is m, for every m up
    to the core's largest weight, wherever c / m is a normal number (from 2^-1000 on)."""
    m = np.arange(1, 65536, dtype=np.float64)
    rate = capacity / m
    weights = capacity / rate
    weights *= 1 + 1e-12  # as optimal_weights_batch guards floor()
    np.testing.assert_array_equal(np.floor(weights), m)


def _core_order_statistic(values: FloatArray, rank: int) -> float:
    """The core's order statistic of ``values`` (none negative), through ``reach`` over one
    path whose belief is 0 ± 1: its draws are then the values themselves (0 + 1 · v)."""
    out = np.empty(1)
    draws = np.ascontiguousarray(values)
    compiled.core.reach(np.zeros(1), np.ones(1), draws, out, 1, 1, len(draws), rank)
    return float(out[0])


@needs_core
@settings(max_examples=400, deadline=None)
@given(
    values=st.integers(1, 1100).flatmap(
        lambda count: hnp.arrays(
            np.float64,
            count,
            elements=st.one_of(
                st.floats(0.0, 1e6),
                # many ties, and the corners the search answers before it counts
                st.sampled_from([0.0, 1.0, 2.0, 5e-324, 1e300, np.inf, np.nan]),
            ),
        )
    ),
    where=st.floats(0.0, 1.0),
)
@example(values=np.arange(128.0)[::-1], where=0.3)  # the rank below the sample's bracket
@example(values=np.r_[np.zeros(100), np.arange(28.0)], where=0.95)  # above it
@example(values=np.full(128, 7.0), where=0.5)  # every value tied
def test_the_core_s_order_statistic_is_numpy_s(values: FloatArray, where: float) -> None:
    """The draws' value of a rank, as np.sort puts them (NaN last): whether the rank falls
    below, within or above the bracket drawn from a sample of the values (128 draws: the
    scores' case), and with infinities and NaN, where every rank is searched over all."""
    rank = min(len(values) - 1, int(where * len(values)))
    assert _core_order_statistic(values, rank) == pytest.approx(
        float(np.sort(values)[rank]), rel=0.0, abs=0.0, nan_ok=True
    )


@needs_core
def test_each_rank_of_a_fleet_s_draws_is_numpy_s() -> None:
    """Every rank of 128 draws (the scores' own size), over drawn aggregates' shapes: smooth,
    clumped on a few values, with a long tail."""
    rng = np.random.default_rng(33)
    shapes = [
        rng.uniform(0, 1000, 128),
        rng.choice([10.0, 20.0, 30.0], 128),
        np.exp(rng.normal(0, 3, 128)),
        np.maximum(0.0, rng.normal(5, 10, 128)),
    ]
    for values in shapes:
        ordered = np.sort(values)
        found = [_core_order_statistic(values, rank) for rank in range(128)]
        assert found == ordered.tolist()
