"""Fusion by inverse variance and age; availability from the newest word on the path."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from xapp.domain import CapacityEstimate, Direction, KpiSample
from xapp.estimators.fusion import FusedEstimator

DL = Direction.DOWNLINK


class Fixed:
    """A source that answers what it was told (the estimators themselves have their own tests)."""

    def __init__(self, name: str, estimate: CapacityEstimate | None) -> None:
        self.name = name
        self.answer = estimate
        self.seen: list[KpiSample] = []

    def update(self, samples: Sequence[KpiSample]) -> None:
        self.seen += samples

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        return self.answer


def est(capacity: float, stddev: float, at_s: float, available: bool = True) -> CapacityEstimate:
    return CapacityEstimate("cpe-1", "wifi", DL, capacity, stddev, "x", at_s, available)


def test_inverse_variance_weighting_and_age() -> None:
    fused = FusedEstimator([Fixed("a", est(100.0, 10.0, 10.0)), Fixed("b", est(200.0, 10.0, 10.0))])
    assert fused.estimate("cpe-1", "wifi", DL, 10.0).capacity_mbps == pytest.approx(150.0)  # type: ignore[union-attr]
    sharp = FusedEstimator([Fixed("a", est(100.0, 1.0, 10.0)), Fixed("b", est(200.0, 10.0, 10.0))])
    assert sharp.estimate("cpe-1", "wifi", DL, 10.0).capacity_mbps == pytest.approx(101.0, abs=0.1)  # type: ignore[union-attr]
    stale = FusedEstimator([Fixed("a", est(100.0, 1.0, 0.0)), Fixed("b", est(200.0, 1.0, 10.0))])
    assert stale.estimate("cpe-1", "wifi", DL, 10.0).capacity_mbps > 190  # type: ignore[union-attr]
    too_old = FusedEstimator([Fixed("a", est(100.0, 1.0, 0.0))], max_age_s=5)
    assert too_old.estimate("cpe-1", "wifi", DL, 10.0) is None


def test_newest_report_of_an_outage_wins() -> None:
    fused = FusedEstimator(
        [Fixed("model", est(100.0, 5.0, 9.0)), Fixed("kpi", est(0.0, 0.0, 10.0, available=False))]
    )
    down = fused.estimate("cpe-1", "wifi", DL, 10.0)
    assert down is not None
    assert not down.available


def test_silence_while_others_carry_traffic_is_an_outage_until_traffic_returns() -> None:
    source = Fixed("kpi", est(100.0, 5.0, 10.0))
    fused = FusedEstimator([source])

    def period(t: float, wifi: float) -> list[KpiSample]:
        return [
            KpiSample("cpe-1", "wifi", DL, t, 1.0, throughput_mbps=wifi),
            KpiSample("cpe-1", "nr", DL, t, 1.0, throughput_mbps=300.0),
        ]

    fused.update(period(10.0, 0.0))
    assert not fused.estimate("cpe-1", "wifi", DL, 10.0).available  # type: ignore[union-attr]
    fused.update(period(11.0, 500.0))
    assert fused.estimate("cpe-1", "wifi", DL, 11.0).available  # type: ignore[union-attr]
    assert len(source.seen) == 4
