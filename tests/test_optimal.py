"""The integer optimiser: exact, and never worse than the published rules."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.fluid import aggregate_mbps
from xapp.policy.baselines import proportional_weights
from xapp.policy.optimal import optimal_weights, optimal_weights_batch

PAPER = [342.0, 1190.0, 12.1]

capacity = st.floats(min_value=0.01, max_value=10_000, allow_nan=False, allow_infinity=False)


@st.composite
def comparable_capacities(draw: st.DrawFn) -> list[float]:
    """1 to 3 paths, every one at least 1 % of the largest."""
    largest = draw(capacity)
    others = draw(st.lists(st.floats(min_value=0.01, max_value=1.0), min_size=0, max_size=2))
    return [largest] + [largest * f for f in others]


def test_paper_capacities_beat_the_papers_weights() -> None:
    chosen = optimal_weights(PAPER)
    assert aggregate_mbps(list(chosen), PAPER) > aggregate_mbps([30, 100, 1], PAPER)
    assert aggregate_mbps(list(chosen), PAPER) >= 0.99 * sum(PAPER)


@settings(max_examples=400, deadline=None)
@given(comparable_capacities())
def test_reaches_97_percent_of_the_sum_and_beats_proportional(caps: list[float]) -> None:
    chosen = optimal_weights(caps)
    achieved = aggregate_mbps(list(chosen), caps)
    assert achieved >= 0.97 * sum(caps)
    assert achieved >= aggregate_mbps(list(proportional_weights(caps)), caps) * (1 - 1e-9)
    assert all(0 <= w <= 100 for w in chosen)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.just(0.0), capacity), min_size=1, max_size=4))
def test_never_worse_than_proportional_for_any_capacities(caps: list[float]) -> None:
    chosen = optimal_weights(caps)
    assert aggregate_mbps(list(chosen), caps) >= aggregate_mbps(
        list(proportional_weights(caps)), caps
    ) * (1 - 1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=50.0), min_size=1, max_size=3))
def test_matches_exhaustive_search_for_small_weights(caps: list[float]) -> None:
    max_weight = 7
    best = max(
        aggregate_mbps(list(w), caps)
        for w in itertools.product(range(max_weight + 1), repeat=len(caps))
    )
    chosen = optimal_weights(caps, max_weight)
    assert aggregate_mbps(list(chosen), caps) == pytest.approx(best, rel=1e-9, abs=1e-12)


def test_ties_prefer_the_smallest_weights() -> None:
    assert optimal_weights([100.0, 100.0]) == (1, 1)
    assert optimal_weights([50.0, 100.0, 150.0]) == (1, 2, 3)


def test_path_too_small_to_carry_a_segment_per_round_gets_zero() -> None:
    chosen = optimal_weights([1000.0, 1000.0, 0.5])
    assert chosen[2] == 0


def test_no_capacity_means_no_weights() -> None:
    assert optimal_weights([0.0, 0.0]) == (0, 0)


def test_batch_rows_equal_single_calls() -> None:
    rng = np.random.default_rng(3)
    caps = rng.uniform(0, 500, size=(20, 3))
    batch = optimal_weights_batch(caps, 50)
    for row, expected in zip(caps, batch, strict=True):
        assert optimal_weights(list(row), 50) == tuple(expected)


@pytest.mark.parametrize("bad", [[-1.0, 2.0], [float("nan"), 1.0], [float("inf"), 1.0]])
def test_bad_capacities_are_rejected(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="finite and ≥ 0"):
        optimal_weights(bad)


def test_max_weight_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_weight"):
        optimal_weights([1.0], 0)
