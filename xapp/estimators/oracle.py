"""An estimator that reads the ground truth and adds noise: a stand-in for evaluation only.

It answers what a good real estimator would: the mean capacity over the last reporting
period, off by a seeded relative error of ``noise_ratio`` (one standard deviation); its stated
uncertainty combines that error with how much the capacity varied within the period (which a
real estimator sees in the spread of its KPIs). It can only exist where ground truth exists
(the closed-loop evaluator).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from core.domain import CapacityEstimate, Direction, KpiSample


class GroundTruth(Protocol):
    def usable_stats_mbps(
        self, cpe_id: str, access: str, start_s: float, end_s: float
    ) -> tuple[float, float]:
        """Mean and standard deviation of the capacity over [start_s, end_s), 0 while down."""
        ...


class OracleNoiseEstimator:
    name = "oracle-noise"

    def __init__(self, truth: GroundTruth, noise_ratio: float = 0.05, seed: int = 0) -> None:
        if noise_ratio < 0:
            raise ValueError(f"noise_ratio must be ≥ 0, got {noise_ratio}")
        self.noise_ratio = noise_ratio
        self._truth = truth
        self._rng = np.random.default_rng(seed)
        self._latest: dict[tuple[str, str, Direction], CapacityEstimate] = {}

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        for s in samples:
            if s.available is False:
                estimate = CapacityEstimate(
                    s.cpe_id, s.access, s.direction, 0.0, 0.0, self.name, s.time_s, False
                )
            else:
                mean, spread = self._truth.usable_stats_mbps(
                    s.cpe_id, s.access, s.time_s - s.period_s, s.time_s
                )
                noisy = max(0.0, mean * (1.0 + self.noise_ratio * self._rng.standard_normal()))
                stddev = float(np.hypot(self.noise_ratio * noisy, spread))
                estimate = CapacityEstimate(
                    s.cpe_id, s.access, s.direction, noisy, stddev, self.name, s.time_s
                )
            self._latest[(s.cpe_id, s.access, s.direction)] = estimate

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        return self._latest.get((cpe_id, access, direction))
