"""The WRR fluid model reproduces the figures of the issue and of the paper's static test."""

import numpy as np
import pytest

from core.fluid import aggregate_mbps, aggregate_mbps_batch, per_path_mbps

PAPER = [342.0, 1190.0, 12.1]


def test_round_robin_on_paper_capacities_is_three_times_the_slowest_path() -> None:
    assert aggregate_mbps([1, 1, 1], PAPER) == pytest.approx(36.3)


def test_paper_weights_30_100_1_give_about_1493_mbps() -> None:
    assert aggregate_mbps([30, 100, 1], PAPER) == pytest.approx(1493.4)


def test_proportional_weights_reach_the_sum_of_capacities() -> None:
    assert aggregate_mbps([2, 3], [20.0, 30.0]) == pytest.approx(50.0)


def test_zero_weight_path_is_ignored_and_weighted_dead_path_stalls() -> None:
    assert aggregate_mbps([1, 0], [10.0, 0.0]) == pytest.approx(10.0)
    assert aggregate_mbps([1, 1], [10.0, 0.0]) == 0.0
    assert aggregate_mbps([0, 0], [10.0, 5.0]) == 0.0


def test_per_path_shares_follow_weights() -> None:
    carried = per_path_mbps([30, 100, 1], PAPER)
    assert sum(carried) == pytest.approx(1493.4)
    assert carried[0] == pytest.approx(342.0)  # NR is the bottleneck: it runs full
    assert carried[1] / carried[0] == pytest.approx(100 / 30)


def test_batch_agrees_with_scalar() -> None:
    rng = np.random.default_rng(0)
    weights = rng.integers(0, 5, size=(50, 3)).astype(float)
    caps = rng.uniform(0, 100, size=(50, 3))
    batch = aggregate_mbps_batch(weights, caps)
    for w, c, b in zip(weights, caps, batch, strict=True):
        assert b == pytest.approx(aggregate_mbps(list(w), list(c)))


def test_mismatched_lengths_are_rejected() -> None:
    with pytest.raises(ValueError, match="lengths must match"):
        aggregate_mbps([1, 2], [1.0])
