"""FusedEstimator: combine estimators by their uncertainty and age (inverse-variance).

Each source's standard deviation grows with the estimate's age (capacities drift:
`drift_mbps_per_s` × age, added in quadrature), then the estimates are averaged with weights
1/σ². An estimate that is only a lower bound (learnt from a path held back by its weight) does
not pull the result down: it can only raise it. Availability overrides everything: a path is unavailable as soon as the newest word on
it says so — a source reporting it down (link-state KPI, failed probe), or silence (outage.py:
a weighted path carrying nothing while another access of the CPE carried traffic) — and
available again with the next period that carries traffic or a newer source finding it usable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xapp.domain import CapacityEstimate, Direction, KpiSample
from xapp.estimators.outage import SilenceTracker, WeightLookup
from xapp.ports import CapacityEstimator

MIN_STDDEV_MBPS = 0.1


class FusedEstimator:
    name = "fused"

    def __init__(
        self,
        sources: Sequence[CapacityEstimator],
        drift_ratio_per_s: float = 0.02,
        max_age_s: float = 30.0,
        weights: WeightLookup | None = None,
    ) -> None:
        if not sources:
            raise ValueError("fusion needs at least one estimator")
        self.sources = list(sources)
        self.drift_ratio_per_s = drift_ratio_per_s
        self.max_age_s = max_age_s
        self._silence = SilenceTracker(weights)

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        for source in self.sources:
            source.update(samples, now_s)
        self._silence.update(samples)

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
        silent_since = self._silence.silent_since((cpe_id, access, direction))
        # Only a direct measurement of headroom (KPIs or a probe) newer than the silence says
        # the path is back; a lower bound of 0 says nothing.
        silent = silent_since is not None and not any(
            e.available
            and not e.lower_bound
            and e.capacity_mbps > 0
            and e.measured_at_s > silent_since
            for e in found
        )
        if not newest.available or silent:
            return CapacityEstimate(
                cpe_id, access, direction, 0.0, 0.0, self.name, newest.measured_at_s, False
            )
        usable = [e for e in found if e.available]
        exact = [e for e in usable if not e.lower_bound]
        bounds = [e for e in usable if e.lower_bound]
        if not exact:
            best = max(bounds, key=lambda e: e.capacity_mbps)
            return CapacityEstimate(
                cpe_id,
                access,
                direction,
                best.capacity_mbps,
                self._sigma(best, now_s),
                self.name,
                newest.measured_at_s,
                True,
                lower_bound=True,
            )
        weights = [1.0 / self._sigma(e, now_s) ** 2 for e in exact]
        total = sum(weights)
        mean = sum(w * e.capacity_mbps for w, e in zip(weights, exact, strict=True)) / total
        floor = max((e.capacity_mbps for e in bounds), default=0.0)
        return CapacityEstimate(
            cpe_id,
            access,
            direction,
            max(mean, floor),
            math.sqrt(1.0 / total),
            self.name,
            newest.measured_at_s,
            True,
        )

    def _sigma(self, estimate: CapacityEstimate, now_s: float) -> float:
        drift = self.drift_ratio_per_s * estimate.capacity_mbps * estimate.age_s(now_s)
        return max(math.hypot(estimate.stddev_mbps, drift), MIN_STDDEV_MBPS)
