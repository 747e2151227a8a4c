"""KpiEstimator: headroom from PRB share, airtime and PHY rate; throughput only as a lower bound."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from core.domain import Direction, KpiSample
from core.standards import nr as nr_standard
from xapp.estimators.kpi import KpiEstimator, estimate_from_sample, utilisation

DL = Direction.DOWNLINK


def sample(
    access: str, throughput: float | None, available: bool | None = None, **measurements: float
) -> KpiSample:
    names = {k.replace("_", "."): v for k, v in measurements.items()}
    return KpiSample(
        "cpe-1",
        access,
        DL,
        10.0,
        1.0,
        throughput_mbps=throughput,
        available=available,
        measurements=names,
    )


def test_nr_underweighted_path_is_not_read_as_its_throughput() -> None:
    # 50 Mbit/s on 20 of 133 PRBs; the cell is 40 % busy: 133 − (53.2 − 20) PRBs are free to it.
    estimate = estimate_from_sample(
        sample("nr", 50.0, RRU_PrbUsedDl=20, RRU_PrbAvailDl=133, RRU_PrbTotDl=40)
    )
    assert estimate is not None
    assert estimate.capacity_mbps == pytest.approx(50.0 * (133 - (0.4 * 133 - 20)) / 20)
    assert estimate.capacity_mbps > 200


def test_wifi_from_phy_rate_and_idle_airtime() -> None:
    estimate = estimate_from_sample(
        sample(
            "wifi", 300.0, WLAN_StaPhyRateDl=2402, WLAN_StaAirtime=25, WLAN_ChannelUtilization=25
        )
    )
    assert estimate is not None
    assert estimate.capacity_mbps == pytest.approx(1190.0, rel=0.01)  # all airtime is its to take


def test_lifi_down_is_unavailable_and_throughput_alone_is_uncertain() -> None:
    down = estimate_from_sample(sample("lifi", 0.0, available=False, LIFI_StaPhyRateDl=12))
    assert down is not None
    assert not down.available
    assert down.capacity_mbps == 0.0
    bare = estimate_from_sample(sample("nr", 80.0))
    assert bare is not None
    assert bare.capacity_mbps == 80.0
    assert bare.stddev_mbps == 40.0
    assert estimate_from_sample(sample("nr", None)) is None


def test_estimator_keeps_the_latest_per_path() -> None:
    estimator = KpiEstimator()
    estimator.update(
        [
            sample("lifi", 10.0, LIFI_StaPhyRateDl=12.0),
            sample("lifi", 11.0, LIFI_StaPhyRateDl=14.0),
        ],
        11.0,
    )
    latest = estimator.estimate("cpe-1", "lifi", DL, 11.0)
    assert latest is not None
    assert latest.capacity_mbps == 14.0
    assert estimator.estimate("cpe-1", "wifi", DL, 11.0) is None


def test_nr_path_carrying_nothing_is_estimated_from_its_cqi() -> None:
    # Weight 0: no PRBs used, but the UE still reports CQI 15 (distBinX 16) and 2 layers; the
    # cell's other UEs use 40 % of the carrier.
    idle = sample(
        "nr",
        0.0,
        RRU_PrbUsedDl=0,
        RRU_PrbAvailDl=133,
        RRU_PrbTotDl=40,
        CARR_AverageLayersDl=2,
    )
    idle = dataclasses.replace(
        idle, measurements={**idle.measurements, "CARR.WBCQIDist|distBinX=16": 100.0}
    )
    estimate = estimate_from_sample(idle)
    assert estimate is not None
    assert not estimate.lower_bound
    full = nr_standard.NrCarrier().rate_mbps(nr_standard.CQI_TABLE_256QAM[15][2], 2, True)
    assert estimate.capacity_mbps == pytest.approx(full * 0.6, rel=0.01)
    assert full == pytest.approx(342, rel=0.05)  # the carrier the testbed calibrated


def test_uncertainty_grows_with_how_much_the_path_moves() -> None:
    steady, jumpy = KpiEstimator(), KpiEstimator()
    for t in range(10):
        steady.update([sample("lifi", 5.0, LIFI_StaPhyRateDl=12.0)], float(t))
        jumpy.update([sample("lifi", 5.0, LIFI_StaPhyRateDl=6.0 if t % 2 else 18.0)], float(t))
    calm = steady.estimate("cpe-1", "lifi", DL, 9.0)
    wild = jumpy.estimate("cpe-1", "lifi", DL, 9.0)
    assert calm is not None
    assert wild is not None
    assert calm.stddev_mbps == pytest.approx(1.2)  # the 10 % measurement error alone
    assert wild.stddev_mbps > 3 * calm.stddev_mbps


def test_utilisation_tells_a_held_back_path() -> None:
    held = sample("nr", 30.0, RRU_PrbUsedDl=10, RRU_PrbAvailDl=133, RRU_PrbTotDl=10)
    full = sample("nr", 300.0, RRU_PrbUsedDl=130, RRU_PrbAvailDl=133, RRU_PrbTotDl=98)
    # others use 13.3 − 10 PRBs, so 129.7 are the UE's to take
    assert utilisation(held) == pytest.approx(10 / (133 - (13.3 - 10)))
    assert utilisation(full) == pytest.approx(0.98, abs=0.005)
    assert utilisation(sample("nr", 30.0)) is None  # no headroom KPIs: cannot tell


def test_wifi_reads_the_rate_its_airtime_carried_and_remembers_the_efficiency() -> None:
    """A station whose MAC efficiency is 0.4, not the nominal 0.495: 2400 Mbit/s PHY, 30 % of
    the airtime carried 288 Mbit/s, 50 % of the channel idle: 960 × 0.8 = 768 Mbit/s (the
    nominal formula would say 951)."""
    estimator = KpiEstimator()
    busy = sample(
        "wifi",
        288.0,
        WLAN_StaPhyRateDl=2400.0,
        WLAN_StaAirtime=30.0,
        WLAN_ChannelUtilization=50.0,
    )
    estimator.update([busy], 10.0)
    estimate = estimator.estimate("cpe-1", "wifi", DL, 10.0)
    assert estimate is not None
    assert estimate.capacity_mbps == pytest.approx(768.0)
    # Next period it is given almost no weight: 1 % of the airtime is too little to measure the
    # rate it carried, and the efficiency measured before stands in for the nominal one.
    idle = sample(
        "wifi",
        9.0,
        WLAN_StaPhyRateDl=2400.0,
        WLAN_StaAirtime=1.0,
        WLAN_ChannelUtilization=21.0,
    )
    estimator.update([idle], 11.0)
    estimate = estimator.estimate("cpe-1", "wifi", DL, 11.0)
    assert estimate is not None
    assert estimate.capacity_mbps == pytest.approx(2400.0 * 0.4 * 0.8)
    # A fresh estimator knows no better than the nominal efficiency.
    fresh = estimate_from_sample(idle)
    assert fresh is not None
    assert fresh.capacity_mbps == pytest.approx(2400.0 * 1190.0 / 2401.96 * 0.8)


def uplink(throughput: float, **measurements: float) -> KpiSample:
    return KpiSample(
        "cpe-1",
        "nr",
        Direction.UPLINK,
        10.0,
        1.0,
        throughput_mbps=throughput,
        measurements={k.replace("_", "."): v for k, v in measurements.items()},
    )


def test_nr_uplink_is_read_from_its_own_prbs() -> None:
    # 9 Mbit/s on 10 of 133 uplink PRBs, the uplink 20 % busy: 133 − (26.6 − 10) are free to it.
    estimate = estimate_from_sample(
        uplink(9.0, RRU_PrbUsedUl=10, RRU_PrbAvailUl=133, RRU_PrbTotUl=20)
    )
    assert estimate is not None
    assert not estimate.lower_bound
    assert estimate.capacity_mbps == pytest.approx(9.0 * (133 - (0.2 * 133 - 10)) / 10)
    # The downlink's counters say nothing of the uplink: only its throughput, from below.
    blind = estimate_from_sample(uplink(9.0, RRU_PrbUsedDl=10, RRU_PrbAvailDl=133, RRU_PrbTotDl=20))
    assert blind is not None
    assert blind.lower_bound


def test_nr_uplink_sending_nothing_keeps_the_rate_per_prb_it_last_showed() -> None:
    """A UE whose uplink weight is 0 (or that just came back from an outage) sends nothing and
    reports no uplink CQI: its last rate per PRB on the PRBs free now still tells its capacity,
    where its throughput alone (0) would leave it to a probe."""
    estimator = KpiEstimator()
    # 0.5 Mbit/s per PRB on 100 PRBs, nobody else on the uplink
    estimator.update([uplink(50.0, RRU_PrbUsedUl=100, RRU_PrbAvailUl=133, RRU_PrbTotUl=75)], 10.0)
    # then nothing sent; the cell's other UEs now use 40 PRBs of the 133
    estimator.update([uplink(0.0, RRU_PrbUsedUl=0, RRU_PrbAvailUl=133, RRU_PrbTotUl=30)], 11.0)
    estimate = estimator.estimate("cpe-1", "nr", Direction.UPLINK, 11.0)
    assert estimate is not None
    assert not estimate.lower_bound
    assert estimate.capacity_mbps == pytest.approx(0.5 * (133 - 0.3 * 133), rel=0.01)
    # Its link down, the gNB serves it no PRBs to count (noValue): the cell's counters alone
    # say nothing of it, however fast it was.
    estimator.update([uplink(0.0, RRU_PrbAvailUl=133, RRU_PrbTotUl=30)], 12.0)
    down = estimator.estimate("cpe-1", "nr", Direction.UPLINK, 12.0)
    assert down is not None
    assert down.lower_bound
    # A UE that never sent has no such memory: a lower bound, to be explored.
    never = KpiEstimator()
    never.update([uplink(0.0, RRU_PrbUsedUl=0, RRU_PrbAvailUl=133, RRU_PrbTotUl=30)], 11.0)
    found = never.estimate("cpe-1", "nr", Direction.UPLINK, 11.0)
    assert found is not None
    assert found.lower_bound


def test_nr_without_available_prbs_is_not_a_division_by_zero() -> None:
    idle = sample("nr", 0.0, RRU_PrbUsedDl=0, RRU_PrbAvailDl=0, RRU_PrbTotDl=0)
    idle = dataclasses.replace(
        idle, measurements={**idle.measurements, "CARR.WBCQIDist|distBinX=16": 100.0}
    )
    estimate = estimate_from_sample(idle)
    assert estimate is not None
    assert estimate.lower_bound


def downlink(cpe: str, throughput: float, cqi: int, **prbs: float) -> KpiSample:
    """An NR downlink period reporting CQI ``cqi`` (its distBinX is cqi + 1), one layer."""
    measurements = {k.replace("_", "."): v for k, v in prbs.items()}
    measurements[f"CARR.WBCQIDist|distBinX={cqi + 1}"] = 100.0
    measurements["CARR.AverageLayersDl"] = 1.0
    return KpiSample(
        cpe, "nr", DL, 10.0, 1.0, throughput_mbps=throughput, measurements=measurements
    )


def test_nr_downlink_carrying_nothing_keeps_the_rate_per_prb_it_last_showed() -> None:
    """What a PRB carries can be far below what the CQI promises (a measured trace: 5 Mbit/s
    on 70 PRBs at CQI 15, where the CQI's rate on the free PRBs is some 200 Mbit/s). A
    downlink given weight 0 carries nothing the next period: read from its CQI alone it looked
    40 times faster than it was, the policy gave it a share, and the round stalled on it.
    Its last rate per PRB, scaled by how its channel changed since, is where exploring it
    starts from: a bound, as nothing it carries now says whether that rate still holds.
    A fleet of 1,000 CPEs, each with its own rate and channel, read at once (columns) and one
    sample at a time alike."""
    rng = np.random.default_rng(7)
    cpes = [f"cpe-{n:04d}" for n in range(1000)]
    used = rng.integers(5, 120, len(cpes))
    per_prb = rng.uniform(0.02, 1.5, len(cpes))  # Mbit/s a PRB carried
    cqi_then = rng.integers(1, 16, len(cpes))
    cqi_now = rng.integers(1, 16, len(cpes))
    busy_now = rng.uniform(0.0, 80.0, len(cpes))  # the cell's use, % of the 133 PRBs
    carried = [
        downlink(
            c, float(p * u), int(q), RRU_PrbUsedDl=float(u), RRU_PrbAvailDl=133.0, RRU_PrbTotDl=95.0
        )
        for c, p, u, q in zip(cpes, per_prb, used, cqi_then, strict=True)
    ]
    idle = [
        downlink(c, 0.0, int(q), RRU_PrbUsedDl=0.0, RRU_PrbAvailDl=133.0, RRU_PrbTotDl=float(b))
        for c, q, b in zip(cpes, cqi_now, busy_now, strict=True)
    ]
    at_once, one_by_one = KpiEstimator(), KpiEstimator()
    at_once.update(carried, 10.0)
    at_once.update(idle, 11.0)
    one_by_one.update_one_by_one(carried)
    one_by_one.update_one_by_one(idle)
    table = nr_standard.CQI_TABLE_256QAM
    for n, cpe in enumerate(cpes):
        estimate = at_once.estimate(cpe, "nr", DL, 11.0)
        assert estimate is not None
        assert estimate == one_by_one.estimate(cpe, "nr", DL, 11.0)
        assert estimate.lower_bound
        free = 133.0 - busy_now[n] / 100.0 * 133.0
        channel = table[cqi_now[n]][2] / table[cqi_then[n]][2]
        assert estimate.capacity_mbps == pytest.approx(per_prb[n] * channel * free, rel=1e-9)
        assert estimate.stddev_mbps == pytest.approx(0.5 * max(estimate.capacity_mbps, 1.0))
    # A downlink that never carried anything has only its CQI to go by.
    never = KpiEstimator()
    never.update(idle[:1], 11.0)
    first = never.estimate(cpes[0], "nr", DL, 11.0)
    assert first is not None
    assert not first.lower_bound
    rate = nr_standard.NrCarrier().rate_mbps(table[cqi_now[0]][2], 1, True)
    assert first.capacity_mbps == pytest.approx(rate * (1 - busy_now[0] / 100.0), rel=1e-9)
