"""FusedEstimator: combine estimators by their uncertainty and age (inverse-variance).

Each source's standard deviation grows with the estimate's age (capacities drift:
`drift_mbps_per_s` × age, added in quadrature), then the estimates are averaged with weights
1/σ². Availability overrides everything: a path is unavailable as soon as the newest word on
it says so — a source reporting it down (link-state KPI, failed probe), or a zero throughput
in a period when another access of the same CPE carried traffic — and available again with
the next period that carries traffic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xapp.domain import CapacityEstimate, Direction, KpiSample
from xapp.ports import CapacityEstimator

MIN_STDDEV_MBPS = 0.1


class FusedEstimator:
    name = "fused"

    def __init__(
        self,
        sources: Sequence[CapacityEstimator],
        drift_ratio_per_s: float = 0.02,
        max_age_s: float = 30.0,
    ) -> None:
        if not sources:
            raise ValueError("fusion needs at least one estimator")
        self.sources = list(sources)
        self.drift_ratio_per_s = drift_ratio_per_s
        self.max_age_s = max_age_s
        self._silent_since: dict[tuple[str, str, Direction], float] = {}

    def update(self, samples: Sequence[KpiSample]) -> None:
        for source in self.sources:
            source.update(samples)
        carried: dict[tuple[str, Direction, float], bool] = {}
        for s in samples:
            key = (s.cpe_id, s.direction, s.time_s)
            carried[key] = carried.get(key, False) or (s.throughput_mbps or 0.0) > 0
        for s in samples:
            path = (s.cpe_id, s.access, s.direction)
            others_carried = carried.get((s.cpe_id, s.direction, s.time_s), False)
            if (s.throughput_mbps or 0.0) <= 0 and others_carried:
                self._silent_since.setdefault(path, s.time_s)
            elif (s.throughput_mbps or 0.0) > 0:
                self._silent_since.pop(path, None)

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        found = [
            e
            for source in self.sources
            if (e := source.estimate(cpe_id, access, direction, now_s)) is not None
            and e.age_s(now_s) <= self.max_age_s
        ]
        if not found:
            return None
        newest = max(found, key=lambda e: e.measured_at_s)
        silent = (cpe_id, access, direction) in self._silent_since
        if not newest.available or silent:
            return CapacityEstimate(
                cpe_id, access, direction, 0.0, 0.0, self.name, newest.measured_at_s, False
            )
        usable = [e for e in found if e.available]
        weights, values = [], []
        for e in usable:
            drift = self.drift_ratio_per_s * e.capacity_mbps * e.age_s(now_s)
            sigma = max(math.hypot(e.stddev_mbps, drift), MIN_STDDEV_MBPS)
            weights.append(1.0 / sigma**2)
            values.append(e.capacity_mbps)
        total = sum(weights)
        mean = sum(w * v for w, v in zip(weights, values, strict=True)) / total
        return CapacityEstimate(
            cpe_id,
            access,
            direction,
            mean,
            math.sqrt(1.0 / total),
            self.name,
            newest.measured_at_s,
            True,
        )
