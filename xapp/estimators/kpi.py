"""KpiEstimator: capacity computed from what the node reports, without a model.

Throughput is what the weights let a path carry, a lower bound of its capacity. The headroom
comes from the share of the resource the path did not use:

- NR, each direction on its own PRBs: the UE used `RRU.PrbUsedDl` (`…Ul`) of the PRBs; what
  the other UEs left is `RRU.PrbAvailDl − (RRU.PrbTotDl % of RRU.PrbAvailDl − the UE's PRBs)`;
  capacity ≈ throughput × free PRBs / the UE's PRBs (the UE's spectral efficiency carried over
  to the free PRBs). A UE that carried nothing (its weight 0, or just back from an outage) is
  given the rate per PRB it last showed, on the PRBs free now; on the downlink scaled by how
  its reported channel changed since (CQI efficiency, TS 38.214 table, times layers), and
  flagged `lower_bound`: nothing it carries tells whether that rate still holds, so the policy
  explores it (xapp/policy/exploration.py) rather than trusting or ignoring it. What a PRB
  carries can be far below what the CQI promises (the cell's time-domain share, the carrier's
  pattern, load): a measured 5 Mbit/s on 70 PRBs at CQI 15 is 0.07 Mbit/s a PRB, the CQI's
  rate some fifteen times that. Only a downlink that never carried anything gets the rate of
  its reported CQI and layers on the free PRBs of the carrier (TS 38.306 rate, `NR_CARRIER`).
- Wi-Fi: capacity ≈ PHY rate × MAC efficiency × airtime available to the station (its own
  airtime plus what the channel left idle).
- LiFi: the PHY rate while the link is up; unavailable while it is down.

The stated uncertainty is about the *next* period, which the weights will be used for: the
measurement error plus how much the path's capacity has been moving from period to period
(an exponentially weighted variance of the changes), so a flickering path is not trusted
with a share it may not have a moment later.

Each is never below the measured throughput. Where the headroom KPIs are missing, the estimate
is the throughput with a wide uncertainty, so the policy treats it as the lower bound it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from core.domain import MAX_CAPACITY_MBPS, CapacityEstimate, Direction, KpiSample
from core.slots import Places, Slots, distinct, grown
from core.standards import nr as nr_standard
from xapp.estimators.columns import Group, columns_of, places_of_paths
from xapp.estimators.said import (
    AVAILABLE,
    CAPACITY,
    ESTIMATE,
    KIND,
    LOWER_BOUND,
    KeptEstimates,
    said_numbers,
)
from xapp.ports import Said

# The cell's carrier (bandwidth, TDD pattern, measured efficiency): the testbed's by default
NR_CARRIER = nr_standard.NrCarrier()
WIFI_MAC_EFFICIENCY = 1190.0 / 2401.96  # TCP goodput over PHY rate, measured (docs/e2sim.md)
# Below this airtime share (%) the counters' rounding (0.1 %) says too little of the rate per
# airtime; the nominal efficiency stands in.
MEASURED_AIRTIME_PCT = 5.0
# What a station's airtime can carry at most: its PHY rate. Counters that say more (a PHY rate
# of 1e-300 Mbit/s beside a real throughput) disagree with one another; they measure nothing.
MAX_MAC_EFFICIENCY = 1.0
RELATIVE_ERROR = 0.10  # of an estimate built from headroom KPIs
LOWER_BOUND_ERROR = 0.50  # of a bare throughput, which may be far below capacity
VOLATILITY_WEIGHT = 0.3
# A change counts at most this fraction of the new value: a path coming back from an outage is
# a step, not a sign that it will keep jumping.
MAX_CHANGE_RATIO = 0.5  # of the newest change in the running variance of changes

Path = tuple[str, str, Direction]


class KpiEstimator:
    name = "kpi"

    def __init__(self, slots: Slots[Path] | None = None) -> None:
        """``slots``: the fleet's paths' places, shared with the other estimators."""
        self._kept = KeptEstimates(self.name, slots)  # each path's newest estimate
        # The running variance of each path's period-to-period change (NaN: none yet), by the
        # kept estimates' slots.
        self._change_variance = np.full(0, math.nan)
        slots = self._kept.slots
        # Each Wi-Fi station's MAC efficiency as last measured: a period with too little
        # airtime to measure it (a path just back, or given little weight) uses it.
        self._wifi_efficiency = LastMeasured(slots)
        # Each NR uplink's rate per PRB as last measured (Mbit/s per PRB): the uplink of a UE
        # that sent nothing has no other news of its channel.
        self._nr_rate_per_prb = LastMeasured(slots)
        # Each NR downlink's rate per PRB as last measured, with the KPIs of that period (its
        # CQI and layers then, against which the channel's change is read).
        self._nr_downlink = LastMeasured(slots)

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        """Each sample's reading, worked out for each access and direction's samples at once
        (columns.py); a path reported twice in the step is read in order, one at a time."""
        columns = columns_of(samples)
        # the step's paths' places in the kept estimates' slots, found once for every
        # estimator sharing them
        step_places = places_of_paths(samples, self._kept.slots)
        for (access, direction), group in columns.groups.items():
            places = step_places[columns.places[(access, direction)]]
            if not distinct(places):  # a path reported twice
                self.update_one_by_one(group.samples)
                continue
            efficiency = rate = None
            if access == "wifi":
                efficiency = self._wifi_efficiency.measured(
                    places, measured_wifi_efficiency_of(group)
                )
            elif access == "nr" and direction == Direction.UPLINK:
                rate = self._nr_rate_per_prb.measured(places, measured_nr_rate_per_prb_of(group))
            elif access == "nr":
                rate = self._downlink_rates(places, group)
            read = readings_of(group, efficiency, rate)
            known = np.flatnonzero(read.known)
            self._keep_many(
                places[known],
                group.time_s[known],
                read.capacity[known],
                read.stddev[known],
                read.available[known],
                read.lower_bound[known],
            )

    def update_one_by_one(self, samples: Sequence[KpiSample]) -> None:
        """``update``, sample after sample (the reference, and a path reported twice)."""
        wifi_efficiency, nr_rate_per_prb = self._wifi_efficiency, self._nr_rate_per_prb
        for sample in samples:
            access, direction = sample.access, sample.direction
            path = (sample.cpe_id, access, direction)
            held = None  # the NR path's rate per PRB from before, for a period it is idle
            if access == "wifi":
                measured = measured_wifi_efficiency(sample)
                if measured is not None:
                    wifi_efficiency.put(path, measured)
            elif access == "nr" and direction == Direction.UPLINK:
                rate = measured_nr_rate_per_prb(sample)
                if rate is not None:
                    nr_rate_per_prb.put(path, rate)
                held = nr_rate_per_prb.get(path)
            elif access == "nr":
                rate = measured_nr_rate_per_prb(sample)
                before = self._nr_downlink.get_with_channel(path)
                if rate is not None:  # (it carried: its own PRBs tell, as _downlink_rates)
                    self._nr_downlink.put(path, rate, channel_product(sample.measurements))
                elif before is not None:
                    held = nr_rate_now(*before, channel_product(sample.measurements))
            reading = _reading(sample, wifi_efficiency.get(path), held)
            if reading is not None:
                self._keep(path, sample.time_s, *reading)

    def _downlink_rates(self, places: npt.NDArray[np.intp], group: Group) -> FloatArray:
        """Each NR downlink's rate per PRB as last measured (this period's where it carried
        something) into ``_nr_downlink``; then, for each path (at these distinct places) that
        carried nothing, what that rate is worth on its channel now (NaN: never measured, or
        the path carried: its own PRBs tell)."""
        measured = measured_nr_rate_per_prb_of(group)
        channel = channel_products_of(group)
        kept = self._nr_downlink
        kept.measured(places, measured, channel)
        rates = np.full(len(places), math.nan)
        idle = np.flatnonzero(np.isnan(measured))
        before, then = kept.with_channel_at(places[idle])
        now = channel[idle]
        # nr_rate_now of each: scaled where both channels are known (NaN: never measured)
        rates[idle] = np.where(np.isnan(then) | np.isnan(now), before, before * (now / then))
        return rates

    def change_variance(self, path: Path) -> float | None:
        """The running variance of the path's period-to-period change, None before its
        first change."""
        slot = self._kept.slots.get(path)
        if slot is None or slot >= len(self._change_variance):
            return None
        variance = float(self._change_variance[slot])
        return None if math.isnan(variance) else variance

    def _keep(
        self,
        path: Path,
        time_s: float,
        capacity: float,
        stddev: float,
        available: bool,
        lower_bound: bool,
    ) -> None:
        """A reading as the path's estimate: its σ widened by how much the path's capacity
        has been moving from period to period. (``_keep_many`` is its twin for many paths.)"""
        kept = self._kept
        slot = kept.slots.of(path)
        self._change_variance = grown(self._change_variance, slot + 1, math.nan)
        if available and not lower_bound:
            previous = kept.said(path)
            if previous is not None and previous[AVAILABLE] and previous[KIND] == ESTIMATE:
                change = min(abs(capacity - previous[CAPACITY]), MAX_CHANGE_RATIO * capacity)
                variance = float(self._change_variance[slot])
                # (squared as a product, as numpy squares in _keep_many: Python's change**2
                # is the C library's pow, which may round differently)
                squared = change * change
                if variance != variance:  # (NaN: the path's first change)
                    variance = squared
                self._change_variance[slot] = (
                    1 - VOLATILITY_WEIGHT
                ) * variance + VOLATILITY_WEIGHT * squared
            variance = float(self._change_variance[slot])
            spread = math.sqrt(0.0 if variance != variance else variance)
            stddev = math.hypot(stddev, spread)
        kept.put(path, said_numbers(capacity, stddev, time_s, available, lower_bound))

    def _keep_many(
        self,
        places: npt.NDArray[np.intp],
        time_s: npt.NDArray[np.float64],
        capacity: npt.NDArray[np.float64],
        stddev: npt.NDArray[np.float64],
        available: npt.NDArray[np.bool_],
        lower_bound: npt.NDArray[np.bool_],
    ) -> None:
        """``_keep`` of many paths (each once), as array operations: the same IEEE operations
        in the same order, but for ``math.hypot``, done path by path as there (numpy's hypot
        may differ from Python's in the last bit).
        tests/test_sample_columns.py holds the two equal. ``places``: the paths' places in
        the kept estimates' slots."""
        kept = self._kept
        self._change_variance = variances = grown(self._change_variance, len(kept.slots), math.nan)
        previous = kept.rows_at(places)
        exact = available & ~lower_bound
        changed = np.flatnonzero(
            exact & (previous[:, AVAILABLE] != 0) & (previous[:, KIND] == ESTIMATE)
        )
        # min(a, b) is a unless b < a; abs and the product as Python works them out
        now = capacity[changed]
        change = np.abs(now - previous[changed, CAPACITY])
        ceiling = MAX_CHANGE_RATIO * now
        change = np.where(ceiling < change, ceiling, change)
        squared = change * change
        variance = variances[places[changed]]
        variance = np.where(np.isnan(variance), squared, variance)
        variances[places[changed]] = (
            1 - VOLATILITY_WEIGHT
        ) * variance + VOLATILITY_WEIGHT * squared
        widened = np.flatnonzero(exact)
        spread = np.sqrt(np.nan_to_num(variances[places[widened]], nan=0.0))
        stddev = stddev.copy()
        stddev[widened] = list(map(math.hypot, stddev[widened].tolist(), spread.tolist()))
        table = np.column_stack(
            [
                np.where(lower_bound, LOWER_BOUND, ESTIMATE),
                capacity,
                stddev,
                time_s,
                available.astype(np.float64),
            ]
        )
        kept.put_rows(places, table)

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        return self._kept.estimate((cpe_id, access, direction))

    def said_many(self, paths: Sequence[Path]) -> list[Said]:
        return self._kept.said_many(paths)

    def said_rows(self, paths: Sequence[Path] | Places[Path]) -> npt.NDArray[np.float64]:
        return self._kept.said_rows(paths)


def estimate_from_sample(
    sample: KpiSample, wifi_efficiency: float | None = None
) -> CapacityEstimate | None:
    """``wifi_efficiency``: the station's MAC efficiency as last measured (KpiEstimator keeps
    it); without it, this period's where measurable, the nominal one otherwise."""
    reading = _reading(sample, wifi_efficiency)
    if reading is None:
        return None
    return _estimate(sample, *reading)


def _estimate(
    sample: KpiSample, capacity: float, stddev: float, available: bool, lower_bound: bool
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


def _reading(
    sample: KpiSample,
    wifi_efficiency: float | None = None,
    nr_rate_per_prb: float | None = None,
) -> tuple[float, float, bool, bool] | None:
    """What the sample says of its path: (capacity, σ, available, only a lower bound), or
    None. Plain numbers: the saturation labeller asks it of every sample too, and building a
    CapacityEstimate each time cost as much as the reading."""
    m = sample.measurements
    throughput = sample.throughput_mbps
    if sample.available is False:
        return 0.0, 0.0, False, False
    if throughput is not None and throughput > MAX_CAPACITY_MBPS:
        return None  # more than any access carries: the report is wrong, not the path fast
    headroom: float | None = None
    held = False  # the headroom is a rate the path showed before, not this period's
    if sample.access == "nr":
        found = _nr(m, throughput, sample.direction, nr_rate_per_prb)
        if found is not None:
            headroom, held = found
    elif sample.access == "wifi":
        if wifi_efficiency is None:
            wifi_efficiency = measured_wifi_efficiency(sample)
        headroom = _wifi(m, sample.direction, wifi_efficiency)
    elif sample.access == "lifi":
        key = "LIFI.StaPhyRateDl" if sample.direction == Direction.DOWNLINK else "LIFI.StaPhyRateUl"
        headroom = m.get(key)
    # Headroom counters that work out beyond any access's capacity (or overflow: a PRB count
    # of 1e-300) disagree with one another: only the throughput is left to tell.
    if headroom is not None and headroom <= MAX_CAPACITY_MBPS:
        capacity = max(headroom, throughput or 0.0)
        if held and sample.direction == Direction.DOWNLINK:
            # Held at weight 0, the downlink shows nothing of what it carries now: the rate it
            # showed, on its channel and PRBs now, is where exploring it starts from
            # (xapp/policy/exploration.py), not a measurement. (Trusted as one, a rate measured
            # in a dip kept a path that came back at 70-130 Mbit/s at 9 for half a minute.)
            return capacity, LOWER_BOUND_ERROR * max(capacity, 1.0), True, True
        return capacity, RELATIVE_ERROR * capacity, True, False
    if throughput is None:
        return None
    return throughput, LOWER_BOUND_ERROR * max(throughput, 1.0), True, True


def utilisation(sample: KpiSample) -> float | None:
    """What the path carried over what the KPIs say it could have (None: cannot tell).

    Well below 1, the path was held back (by its weight, or by the application), so anything
    learnt from its throughput is a lower bound of its capacity.
    """
    reading = _reading(sample)
    if reading is None or reading[3] or sample.throughput_mbps is None:
        return None
    capacity = reading[0]
    if capacity <= 0:
        return None
    return min(1.0, sample.throughput_mbps / capacity)


# (PRBs used by the UE, PRBs available, cell usage in %) per direction
_NR_PRBS = {
    Direction.DOWNLINK: ("RRU.PrbUsedDl", "RRU.PrbAvailDl", "RRU.PrbTotDl"),
    Direction.UPLINK: ("RRU.PrbUsedUl", "RRU.PrbAvailUl", "RRU.PrbTotUl"),
}


def _nr_prbs(
    m: Mapping[str, float], direction: Direction
) -> tuple[float | None, float, float] | None:
    """(PRBs the UE used: None when the gNB counts none for it, as for a UE it does not serve;
    PRBs free to it: its own and what the other UEs left; PRBs available), or None."""
    used_name, available_name, total_name = _NR_PRBS[direction]
    available = m.get(available_name)
    if not available:
        return None  # not reported, or no PRBs to speak of
    used = m.get(used_name)
    own = used or 0.0
    total_pct = m.get(total_name)
    others = max(0.0, total_pct / 100 * available - own) if total_pct is not None else 0.0
    return used, max(own, available - others), available


def measured_nr_rate_per_prb(sample: KpiSample) -> float | None:
    """What each PRB the UE used carried (Mbit/s), where it used any and carried something."""
    prbs = _nr_prbs(sample.measurements, sample.direction)
    throughput = sample.throughput_mbps
    if prbs is None or not prbs[0] or not throughput:
        return None
    return throughput / prbs[0]


def _nr(
    m: Mapping[str, float],
    throughput: float | None,
    direction: Direction,
    rate_per_prb: float | None,
) -> tuple[float, bool] | None:
    """The headroom the PRB counters tell, and whether it is a rate held from before."""
    prbs = _nr_prbs(m, direction)
    if prbs is None:
        return None
    used, free, available = prbs
    if throughput is not None and used:
        return throughput * free / used, False
    # Nothing carried by a UE the gNB serves (it counts its PRBs: 0): the rate per PRB it last
    # showed (on the downlink, as its channel now makes it), on the PRBs free now. A UE it does
    # not serve (its link down) has no count.
    if rate_per_prb is not None and used is not None:
        return rate_per_prb * free, True
    if direction == Direction.UPLINK:
        return None
    # A downlink that never carried anything: the channel quality the UE reports still tells
    # the rate the free PRBs would give it, if nothing else held it back.
    channel = nr_channel(m)
    if channel is None:
        return None
    return NR_CARRIER.rate_mbps(*channel, True) * free / available, False


CQI_BINS = "CARR.WBCQIDist|distBinX="


def reported_cqi(m: Mapping[str, float]) -> int | None:
    """The CQI bin with the most reports (distBinX = CQI + 1), or None."""
    best, count = None, 0.0
    for name, value in m.items():
        if name.startswith(CQI_BINS) and value > count:
            best, count = int(name.rsplit("=", 1)[1]) - 1, value
    return best


def reported_cqis_of(group: Group) -> FloatArray:
    """``reported_cqi`` of each sample of the group, NaN for None, from the bins' columns. A
    sample that reports one bin (the E2 reader's: each UE's own) has that bin's CQI if its
    count is above 0, whatever the order of its measurements; one with more than one bin,
    or a bin named otherwise than by a number, is read by ``reported_cqi`` itself (the first
    of equal counts in its own order wins there)."""
    out = np.full(len(group), math.nan)
    bins = sorted(name for name in group.names() if name.startswith(CQI_BINS))
    if not bins:
        return out
    try:
        cqis = np.array([int(name.rsplit("=", 1)[1]) - 1 for name in bins], dtype=np.float64)
    except ValueError:
        cqis = None  # (reported_cqi raises where it reads such a bin, and only there)
    counts = np.column_stack([group.column(name) for name in bins])
    given = ~np.isnan(counts)
    reported = given.sum(axis=1)
    alone = reported == 1
    if cqis is not None:
        which = np.argmax(given, axis=1)
        count = counts[np.arange(len(group)), which]
        out = np.where(alone & (count > 0), cqis[which], math.nan)
    for row in np.flatnonzero(reported > (1 if cqis is not None else 0)).tolist():
        cqi = reported_cqi(group.samples[row].measurements)
        out[row] = math.nan if cqi is None else cqi
    return out


def nr_channel(m: Mapping[str, float]) -> tuple[float, int] | None:
    """The downlink channel the UE reports: its CQI's efficiency (TS 38.214 table, bits per
    resource element) and its layers; None without a CQI."""
    cqi = reported_cqi(m)
    if cqi is None or cqi < 1:
        return None
    layers = round(m.get("CARR.AverageLayersDl", 1.0)) or 1
    return nr_standard.CQI_TABLE_256QAM[min(cqi, len(nr_standard.CQI_TABLE_256QAM) - 1)][2], layers


def channel_product(m: Mapping[str, float]) -> float:
    """What a resource element carries on the channel the KPIs ``m`` report (``nr_channel``:
    CQI efficiency × layers), NaN without a CQI."""
    channel = nr_channel(m)
    return math.nan if channel is None else channel[0] * channel[1]


_CQI_EFFICIENCY = np.array([row[2] for row in nr_standard.CQI_TABLE_256QAM], dtype=np.float64)


def channel_products_of(group: Group) -> FloatArray:
    """``channel_product`` of each sample of the group, from its columns (the CQI from the
    bins', ``reported_cqis_of``; the layers rounded half to even, as ``round``, 1 where
    absent or rounded to 0)."""
    cqi = reported_cqis_of(group)
    known = cqi >= 1  # (NaN: no CQI)
    index = np.minimum(np.where(known, cqi, 1.0), len(_CQI_EFFICIENCY) - 1).astype(np.intp)
    said = group.column("CARR.AverageLayersDl")
    layers = np.round(np.where(np.isnan(said), 1.0, said))
    layers = np.where(layers == 0, 1.0, layers)
    products: FloatArray = np.where(known, _CQI_EFFICIENCY[index] * layers, math.nan)
    return products


def nr_rate_now(rate_per_prb: float, then: float, now: float) -> float:
    """A downlink rate per PRB measured on the channel ``then`` (``channel_product``), on the
    channel ``now``: scaled by the change of what a resource element carries (as is, where
    either period has no CQI: NaN)."""
    if math.isnan(then) or math.isnan(now):
        return rate_per_prb
    return rate_per_prb * (now / then)


def measured_wifi_efficiency(sample: KpiSample) -> float | None:
    """What the station's downlink airtime carried over its PHY rate, where it used enough
    airtime to tell (None otherwise). A station's MAC efficiency is not a constant
    (aggregation, retries, contention): where it is measured, it replaces the nominal one."""
    if sample.access != "wifi" or sample.direction != Direction.DOWNLINK:
        return None
    m, throughput = sample.measurements, sample.throughput_mbps
    phy, airtime = m.get("WLAN.StaPhyRateDl"), m.get("WLAN.StaAirtime")
    if not throughput or not phy or airtime is None or airtime < MEASURED_AIRTIME_PCT:
        return None
    efficiency = throughput / (airtime / 100.0) / phy
    return efficiency if efficiency <= MAX_MAC_EFFICIENCY else None


def _wifi(m: Mapping[str, float], direction: Direction, efficiency: float | None) -> float | None:
    """PHY rate × MAC efficiency (the station's own where measured, the nominal one
    otherwise) × (its airtime + idle airtime)."""
    key = "WLAN.StaPhyRateDl" if direction == Direction.DOWNLINK else "WLAN.StaPhyRateUl"
    phy, airtime, busy = m.get(key), m.get("WLAN.StaAirtime"), m.get("WLAN.ChannelUtilization")
    if phy is None:
        return None
    share = 1.0
    if airtime is not None and busy is not None:
        share = min(1.0, (airtime + max(0.0, 100.0 - busy)) / 100.0)
    return phy * (efficiency or WIFI_MAC_EFFICIENCY) * share


class LastMeasured:
    """A value of each path as last measured (NaN: never), in a column by the kept estimates'
    slots, with the channel the period that measured it reported where asked (``channel``,
    ``channel_product``; NaN: none): a fleet's step measures thousands at once, and reads
    them back for the periods that could not."""

    def __init__(self, slots: Slots[Path]) -> None:
        self.slots = slots
        self._values = np.zeros(0)
        self._channel = np.zeros(0)

    def put(self, path: Path, value: float, channel: float = math.nan) -> None:
        place = self.slots.of(path)
        self._make_room()
        self._values[place], self._channel[place] = value, channel

    def get(self, path: Path) -> float | None:
        place = self.slots.get(path)
        if place is None or place >= len(self._values) or math.isnan(self._values[place]):
            return None
        return float(self._values[place])

    def get_with_channel(self, path: Path) -> tuple[float, float] | None:
        value = self.get(path)
        return None if value is None else (value, float(self._channel[self.slots.of(path)]))

    def measured(
        self,
        places: npt.NDArray[np.intp],
        values: FloatArray,
        channel: FloatArray | None = None,
    ) -> FloatArray:
        """The paths' (at these distinct places) newly measured values (NaN: not measurable)
        kept, with their periods' ``channel``; then what is kept for each (NaN: nothing)."""
        self._make_room()
        found = np.flatnonzero(~np.isnan(values))
        self._values[places[found]] = values[found]
        self._channel[places[found]] = math.nan if channel is None else channel[found]
        return self._values[places]

    def with_channel_at(self, places: npt.NDArray[np.intp]) -> tuple[FloatArray, FloatArray]:
        """``get_with_channel`` of the paths at these places, as two columns (NaN: none)."""
        self._make_room()
        return self._values[places], self._channel[places]

    def as_dict(self) -> dict[Path, float]:
        """Every path's value kept (for comparisons)."""
        return {
            path: value
            for path in self.slots.keys_at(range(len(self.slots)))
            if (value := self.get(path)) is not None
        }

    def _make_room(self) -> None:
        size = len(self.slots)
        if size > len(self._values):
            self._values = grown(self._values, size, math.nan)
            self._channel = grown(self._channel, size, math.nan)


# ---------------------------------------------------------------- the formulas on columns
#
# A step's samples of one access and direction at once (columns.py), in their usual case: an
# NR path that used PRBs and carried something, a Wi-Fi or LiFi path with its PHY rate. Every
# other sample (no headroom KPIs, an NR downlink read from its CQI, an NR uplink that sent
# nothing, a link down) is read by ``_reading`` itself, one at a time: the functions above are
# the reference, and tests/test_sample_columns.py holds the two equal, bit for bit. Python's
# max(a, b) is a unless b > a, and min(a, b) a unless b < a: written so here, operation for
# operation.

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_WIFI_PHY = {Direction.DOWNLINK: "WLAN.StaPhyRateDl", Direction.UPLINK: "WLAN.StaPhyRateUl"}
_LIFI_PHY = {Direction.DOWNLINK: "LIFI.StaPhyRateDl", Direction.UPLINK: "LIFI.StaPhyRateUl"}


class Readings(NamedTuple):
    """``_reading`` of each sample of a group (``known`` False: None)."""

    capacity: FloatArray
    stddev: FloatArray
    available: BoolArray
    lower_bound: BoolArray
    known: BoolArray


def readings_of(
    group: Group,
    wifi_efficiency: FloatArray | None = None,
    nr_rate_per_prb: FloatArray | None = None,
) -> Readings:
    """``_reading`` of each sample of the group, with (per sample, NaN for None) the station's
    MAC efficiency and the NR path's rate per PRB as last measured; without an efficiency,
    the sample's own where measurable (as ``_reading`` reads it)."""
    count = len(group)
    headroom = np.full(count, math.nan)
    usual = np.zeros(count, dtype=bool)
    if group.access == "nr":
        usual = _nr_usual(group, headroom)
    elif group.access == "wifi":
        own = measured_wifi_efficiency_of(group)
        given = own if wifi_efficiency is None else wifi_efficiency
        usual = _wifi_usual(group, headroom, np.where(np.isnan(given), own, given))
    elif group.access == "lifi":
        phy = group.column(_LIFI_PHY[group.direction])
        usual = ~np.isnan(phy)
        headroom = phy
    throughput = group.throughput
    # as _reading: a headroom beyond any access's capacity (or NaN) is none, and a throughput
    # beyond it gives no reading at all (both read by _reading below)
    usual &= ~group.down & (headroom <= MAX_CAPACITY_MBPS) & ~(throughput > MAX_CAPACITY_MBPS)
    carried = np.where(np.isnan(throughput) | (throughput == 0), 0.0, throughput)
    capacity = np.where(usual & (carried > headroom), carried, headroom)  # max(headroom, …)
    capacity = np.where(group.down, 0.0, np.where(usual, capacity, math.nan))
    out = Readings(
        capacity,
        np.where(group.down, 0.0, RELATIVE_ERROR * capacity),
        usual.copy(),
        np.zeros(count, dtype=bool),
        usual | group.down,
    )
    for i in np.flatnonzero(~out.known).tolist():  # the others, one by one
        efficiency = None if wifi_efficiency is None else _number(wifi_efficiency[i])
        rate = None if nr_rate_per_prb is None else _number(nr_rate_per_prb[i])
        reading = _reading(group.samples[i], efficiency, rate)
        if reading is not None:
            out.capacity[i], out.stddev[i], out.available[i], out.lower_bound[i] = reading
            out.known[i] = True
    return out


def utilisation_of(group: Group) -> FloatArray:
    """``utilisation`` of each sample of the group, NaN for None (made once a step: the
    models' inputs and the saturation labeller both read it)."""
    return group.memo("utilisation", lambda: _utilisation_of(group))


def _utilisation_of(group: Group) -> FloatArray:
    read = readings_of(group)
    throughput = group.throughput
    share = np.full(len(group), math.nan)
    counted = read.known & ~read.lower_bound & ~np.isnan(throughput) & (read.capacity > 0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ratio = throughput / read.capacity
    share[counted] = np.where(ratio < 1.0, ratio, 1.0)[counted]  # min(1.0, ratio)
    return share


def utilisations(samples: Sequence[KpiSample]) -> FloatArray:
    """``utilisation`` of every sample, in order (NaN for None)."""
    columns = columns_of(samples)
    return columns.in_order(utilisation_of(group) for group in columns.groups.values())


def measured_wifi_efficiency_of(group: Group) -> FloatArray:
    """``measured_wifi_efficiency`` of each sample of the group, NaN for None."""
    count = len(group)
    if group.access != "wifi" or group.direction != Direction.DOWNLINK:
        return np.full(count, math.nan)
    throughput = group.throughput
    phy, airtime = group.column("WLAN.StaPhyRateDl"), group.column("WLAN.StaAirtime")
    measurable = (
        ~np.isnan(throughput)
        & (throughput != 0)
        & ~np.isnan(phy)
        & (phy != 0)
        & (airtime >= MEASURED_AIRTIME_PCT)  # (NaN compares false)
    )
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        measured = throughput / (airtime / 100.0) / phy
    return np.where(measurable & (measured <= MAX_MAC_EFFICIENCY), measured, math.nan)


def measured_nr_rate_per_prb_of(group: Group) -> FloatArray:
    """``measured_nr_rate_per_prb`` of each sample of the group, NaN for None."""
    count = len(group)
    if group.access != "nr":
        return np.full(count, math.nan)
    used_name, available_name, _ = _NR_PRBS[group.direction]
    used, available = group.column(used_name), group.column(available_name)
    throughput = group.throughput
    measurable = (
        ~np.isnan(available)
        & (available != 0)
        & ~np.isnan(used)
        & (used != 0)
        & ~np.isnan(throughput)
        & (throughput != 0)
    )
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        rate = throughput / used
    return np.where(measurable, rate, math.nan)


def _nr_usual(group: Group, headroom: FloatArray) -> BoolArray:
    """``_nr`` where the UE used PRBs and carried something: throughput × free / used."""
    used_name, available_name, total_name = _NR_PRBS[group.direction]
    used, available = group.column(used_name), group.column(available_name)
    total = group.column(total_name)
    throughput = group.throughput
    usual: BoolArray = (
        ~np.isnan(available)
        & (available != 0)
        & ~np.isnan(used)
        & (used != 0)
        & ~np.isnan(throughput)
    )
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        # others: max(0.0, total % of available − own), 0 without the cell's usage
        others = total / 100 * available - used
        others = np.where(np.isnan(total), 0.0, np.where(others > 0.0, others, 0.0))
        free = available - others
        free = np.where(free > used, free, used)  # max(own, available − others)
        np.copyto(headroom, throughput * free / used, where=usual)
    return usual


def _wifi_usual(group: Group, headroom: FloatArray, efficiency: FloatArray) -> BoolArray:
    """``_wifi`` where the PHY rate is known: PHY rate × efficiency × airtime share."""
    phy = group.column(_WIFI_PHY[group.direction])
    airtime, busy = group.column("WLAN.StaAirtime"), group.column("WLAN.ChannelUtilization")
    idle = 100.0 - busy
    idle = np.where(idle > 0.0, idle, 0.0)  # max(0.0, 100 − busy)
    share = (airtime + idle) / 100.0
    share = np.where(np.isnan(airtime) | np.isnan(busy), 1.0, np.where(share < 1.0, share, 1.0))
    # the station's efficiency where measured (not 0), the nominal one otherwise
    efficiency = np.where(np.isnan(efficiency) | (efficiency == 0), WIFI_MAC_EFFICIENCY, efficiency)
    usual: BoolArray = ~np.isnan(phy)
    with np.errstate(invalid="ignore", over="ignore"):
        np.copyto(headroom, phy * efficiency * share, where=usual)
    return usual


def _number(value: float) -> float | None:
    """A column's value as the formulas above take it: None for NaN."""
    return None if math.isnan(value) else float(value)
