"""Calibration of the radio models against the 5G-CLARITY measurements."""

from __future__ import annotations

import numpy as np
import pytest

from core.standards import nr as nr_standard
from e2sim.radio import lifi, nr, wifi
from e2sim.radio.nr import RadioStateError


@pytest.mark.parametrize(("pattern", "expected_mbps"), [("5ms", 342.0), ("1ms", 116.0)])
def test_nr_paper_configurations(pattern: str, expected_mbps: float) -> None:
    carrier = nr_standard.NrCarrier(tdd=nr_standard.PATTERNS[pattern])
    state = nr.ue_state(carrier, sinr_db=30.0, other_load=0.0, active_ues=1)
    assert state.cqi == 15
    assert state.layers_dl == 2
    assert state.capacity_dl_mbps == pytest.approx(expected_mbps, rel=0.05)


def test_nr_capacity_rises_with_sinr_and_is_shared_by_load() -> None:
    carrier = nr_standard.NrCarrier()
    capacities = [nr.ue_state(carrier, s, 0.0, 1).capacity_dl_mbps for s in range(-9, 31, 3)]
    assert capacities == sorted(capacities)
    assert capacities[0] < 10 < 300 < capacities[-1]
    alone = nr.ue_state(carrier, 25.0, 0.0, 1).capacity_dl_mbps
    assert nr.ue_state(carrier, 25.0, 0.5, 1).capacity_dl_mbps == pytest.approx(alone / 2)
    assert nr.ue_state(carrier, 25.0, 0.0, 4).capacity_dl_mbps == pytest.approx(alone / 4)


def test_nr_cqi_thresholds_follow_the_table() -> None:
    for cqi in range(1, 16):
        assert nr.cqi_from_sinr(nr.sinr_for_cqi(cqi) + 1e-6) == cqi
    sinr = nr.sinr_for_capacity(nr_standard.NrCarrier(), 200.0, 1.0)
    assert nr.ue_state(nr_standard.NrCarrier(), sinr, 0.0, 1).capacity_dl_mbps >= 200.0


def test_wifi_at_one_metre_and_falling_with_distance() -> None:
    link = wifi.WifiLink()
    at_1m = wifi.station_state(link, 1.0, 0.0, 1)
    assert at_1m.phy_rate_mbps == pytest.approx(2402, rel=0.001)  # 2 streams, MCS 11, 160 MHz
    assert at_1m.capacity_dl_mbps == pytest.approx(1190, rel=0.05)
    capacities = [
        wifi.station_state(link, d, 0.0, 1).capacity_dl_mbps for d in (1, 4, 8, 12, 20, 30, 50)
    ]
    assert capacities == sorted(capacities, reverse=True)
    assert capacities[-1] < 0.1 * capacities[0]
    assert link.phy_rate_mbps(11, 4) == pytest.approx(4804, rel=0.001)  # the AP's peak
    busy = wifi.station_state(link, 1.0, 0.5, 2).capacity_dl_mbps
    assert busy == pytest.approx(at_1m.capacity_dl_mbps / 4)


def test_lifi_mean_and_spread_match_the_measurements() -> None:
    rng = np.random.default_rng(7)
    snr = np.clip(lifi.MEAN_SNR_DB + lifi.SNR_SPREAD_DB * rng.standard_normal(20_000), -15, 40)
    rates = np.array([lifi.rate_mbps(float(s)) for s in snr])
    assert rates.mean() == pytest.approx(12.1, rel=0.05)
    low, high = np.percentile(rates, [5, 95])
    assert 4 <= low <= 8
    assert 17 <= high <= 22
    assert lifi.rate_mbps(40.0) == lifi.NOMINAL_MBPS
    assert lifi.station_state(5.0, link_up=False).capacity_dl_mbps == 0.0
    assert lifi.rate_mbps(lifi.snr_for_rate(12.1)) == pytest.approx(12.1)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: nr.cqi_from_sinr(-30.0), "NR SINR -30 dB is outside"),
        (lambda: wifi.station_state(wifi.WifiLink(), -1.0, 0.0, 1), "Wi-Fi distance -1 m"),
        (lambda: lifi.rate_mbps(-40.0), "LiFi SNR -40 dB is outside"),
        (lambda: nr.ue_state(nr_standard.NrCarrier(), 10.0, 1.5, 1), "cell load 1.5"),
    ],
)
def test_impossible_radio_states_are_clear_errors(call: object, message: str) -> None:
    with pytest.raises(RadioStateError, match=message):
        call()  # type: ignore[operator]
