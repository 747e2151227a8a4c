"""KpiEstimator: capacity computed from what the node reports, without a model.

Throughput is what the weights let a path carry, a lower bound of its capacity. The headroom
comes from the share of the resource the path did not use:

- NR: the UE used `RRU.PrbUsedDl` of the PRBs; what the other UEs left is
  `RRU.PrbAvailDl − (RRU.PrbTotDl % of RRU.PrbAvailDl − the UE's PRBs)`; capacity ≈ throughput ×
  free PRBs / the UE's PRBs (the UE's spectral efficiency carried over to the free PRBs).
- Wi-Fi: capacity ≈ PHY rate × MAC efficiency × airtime available to the station (its own
  airtime plus what the channel left idle).
- LiFi: the PHY rate while the link is up; unavailable while it is down.

Each is never below the measured throughput. Where the headroom KPIs are missing, the estimate
is the throughput with a wide uncertainty, so the policy treats it as the lower bound it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xapp.domain import CapacityEstimate, Direction, KpiSample

WIFI_MAC_EFFICIENCY = 1190.0 / 2401.96  # TCP goodput over PHY rate, measured (docs/e2sim.md)
RELATIVE_ERROR = 0.10  # of an estimate built from headroom KPIs
LOWER_BOUND_ERROR = 0.50  # of a bare throughput, which may be far below capacity


class KpiEstimator:
    name = "kpi"

    def __init__(self) -> None:
        self._latest: dict[tuple[str, str, Direction], CapacityEstimate] = {}

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        for sample in samples:
            estimate = estimate_from_sample(sample)
            if estimate is not None:
                self._latest[(sample.cpe_id, sample.access, sample.direction)] = estimate

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        return self._latest.get((cpe_id, access, direction))


def estimate_from_sample(sample: KpiSample) -> CapacityEstimate | None:
    m = sample.measurements
    throughput = sample.throughput_mbps
    if sample.available is False:
        return _estimate(sample, 0.0, 0.0, available=False)
    headroom: float | None = None
    if sample.access == "nr" and sample.direction == Direction.DOWNLINK:
        headroom = _nr(m, throughput)
    elif sample.access == "wifi":
        headroom = _wifi(m, sample.direction)
    elif sample.access == "lifi":
        key = "LIFI.StaPhyRateDl" if sample.direction == Direction.DOWNLINK else "LIFI.StaPhyRateUl"
        headroom = m.get(key)
    if headroom is not None:
        capacity = max(headroom, throughput or 0.0)
        return _estimate(sample, capacity, RELATIVE_ERROR * capacity, available=True)
    if throughput is None:
        return None
    return _estimate(
        sample,
        throughput,
        LOWER_BOUND_ERROR * max(throughput, 1.0),
        available=True,
        lower_bound=True,
    )


def utilisation(sample: KpiSample) -> float | None:
    """What the path carried over what the KPIs say it could have (None: cannot tell).

    Well below 1, the path was held back (by its weight, or by the application), so anything
    learnt from its throughput is a lower bound of its capacity.
    """
    estimate = estimate_from_sample(sample)
    if estimate is None or estimate.lower_bound or sample.throughput_mbps is None:
        return None
    if estimate.capacity_mbps <= 0:
        return None
    return min(1.0, sample.throughput_mbps / estimate.capacity_mbps)


def _nr(m: Mapping[str, float], throughput: float | None) -> float | None:
    used, available, total_pct = (
        m.get("RRU.PrbUsedDl"),
        m.get("RRU.PrbAvailDl"),
        m.get("RRU.PrbTotDl"),
    )
    if throughput is None or used is None or available is None or used <= 0:
        return None
    others = max(0.0, (total_pct or 0.0) / 100 * available - used) if total_pct is not None else 0.0
    free = max(used, available - others)
    return throughput * free / used


def _wifi(m: Mapping[str, float], direction: Direction) -> float | None:
    key = "WLAN.StaPhyRateDl" if direction == Direction.DOWNLINK else "WLAN.StaPhyRateUl"
    phy, airtime, busy = m.get(key), m.get("WLAN.StaAirtime"), m.get("WLAN.ChannelUtilization")
    if phy is None:
        return None
    share = 1.0
    if airtime is not None and busy is not None:
        share = min(1.0, (airtime + max(0.0, 100.0 - busy)) / 100.0)
    return phy * WIFI_MAC_EFFICIENCY * share


def _estimate(
    sample: KpiSample, capacity: float, stddev: float, available: bool, lower_bound: bool = False
) -> CapacityEstimate:
    return CapacityEstimate(
        cpe_id=sample.cpe_id,
        access=sample.access,
        direction=sample.direction,
        capacity_mbps=capacity,
        stddev_mbps=stddev,
        source="kpi",
        measured_at_s=sample.time_s,
        available=available,
        lower_bound=lower_bound,
    )
