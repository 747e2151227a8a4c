"""Simulator non-idealities: what real nodes do that KPI formulas leave out (e2sim/nonideal.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from bench.simulated import SimulatedKpis
from core.domain import Direction, KpiSample
from core.scenario.load import parse_scenario
from core.scenario.truth import sample_truth
from e2sim.nonideal import NonIdealities, RadioLag, prb_fraction
from xapp.estimators.kpi import WIFI_MAC_EFFICIENCY, estimate_from_sample

CAPACITY = {"nr": 300.0, "wifi": 600.0, "lifi": 10.0}


def reports(
    nonideal: NonIdealities, utilisation: float, periods: int = 1
) -> list[dict[str, KpiSample]]:
    scenario = parse_scenario(
        {
            "name": "one",
            "duration_s": 10,
            "cpes": [
                {"id": "cpe-1", "accesses": {a: {"downlink_mbps": c} for a, c in CAPACITY.items()}}
            ],
        }
    )
    truth = sample_truth(scenario, Direction.DOWNLINK, 1.0)
    kpis = SimulatedKpis(truth, Direction.DOWNLINK, 7, nonideal=nonideal)
    capacity = np.array([list(CAPACITY.values())])
    out = []
    for tick in range(periods):
        samples = kpis.samples(tick, tick + 1.0, 1.0, capacity, capacity * utilisation)
        out.append({s.access: s for s in samples})
    return out


def read(sample: KpiSample) -> float:
    estimate = estimate_from_sample(sample)
    assert estimate is not None
    return estimate.capacity_mbps


def test_prb_fraction_solves_the_selective_gain() -> None:
    u = np.array([0.0, 0.3, 0.5, 1.0])
    assert prb_fraction(u, 0.0) == pytest.approx(u)
    f = prb_fraction(u, 0.15)
    assert f * (1 + 0.15 * (1 - f)) == pytest.approx(u)
    assert f[-1] == pytest.approx(1.0)


def test_ideal_reports_are_read_right_by_the_formulas() -> None:
    (held,) = reports(NonIdealities(), 0.5)
    assert read(held["nr"]) == pytest.approx(300.0, rel=0.04)
    assert read(held["wifi"]) == pytest.approx(600.0, rel=0.04)


def test_a_held_back_nr_path_is_over_read_under_frequency_selective_scheduling() -> None:
    """Half its capacity carried on its best sub-bands: rate per PRB above the average, so
    throughput × free / used PRBs over-reads; a saturating UE is read right."""
    gain = NonIdealities(nr_selective_gain=0.15)
    (held,) = reports(gain, 0.5)
    f = float(prb_fraction(0.5, 0.15))
    assert read(held["nr"]) == pytest.approx(300.0 * (1 + 0.15 * (1 - f)), rel=0.04)
    assert read(held["nr"]) > 300.0 * 1.04
    (saturated,) = reports(gain, 1.0)
    assert read(saturated["nr"]) == pytest.approx(300.0, rel=0.04)


def test_wifi_efficiency_of_its_own_defeats_the_nominal_formula_not_the_measured_rate() -> None:
    """Each station's MAC efficiency differs from the nominal one: PHY rate × nominal
    efficiency is off, the rate per airtime the station used is not."""
    spread = NonIdealities(wifi_efficiency_spread=0.3, wifi_contention_loss=0.2)
    (held,) = reports(spread, 0.5)
    assert read(held["wifi"]) == pytest.approx(600.0, rel=0.04)
    m = held["wifi"].measurements
    share = (m["WLAN.StaAirtime"] + 100.0 - m["WLAN.ChannelUtilization"]) / 100.0
    nominal = m["WLAN.StaPhyRateDl"] * WIFI_MAC_EFFICIENCY * share
    assert abs(nominal / 600.0 - 1) > 0.05
    (ideal,) = reports(NonIdealities(), 0.5)
    m = ideal["wifi"].measurements
    share = (m["WLAN.StaAirtime"] + 100.0 - m["WLAN.ChannelUtilization"]) / 100.0
    assert m["WLAN.StaPhyRateDl"] * WIFI_MAC_EFFICIENCY * share == pytest.approx(600.0, rel=0.02)


def test_radio_measurements_are_reported_a_period_late() -> None:
    lag = RadioLag(1)
    first, _ = lag.delay(
        "nr", {"sinr": np.array([10.0]), "thp": np.array([5.0])}, {}, frozenset({"sinr"})
    )
    second, _ = lag.delay(
        "nr", {"sinr": np.array([20.0]), "thp": np.array([6.0])}, {}, frozenset({"sinr"})
    )
    assert first["sinr"][0] == 10.0  # nothing earlier: its own
    assert second["sinr"][0] == 10.0  # the period before's
    assert second["thp"][0] == 6.0  # counters are not delayed
    # A station whose link was down had no measurement then: back, it reports this period's.
    back = RadioLag(1)
    sinr = frozenset({"sinr"})
    back.delay("wifi", {"sinr": np.array([0.0, 9.0])}, {}, sinr, np.array([True, False]))
    now, _ = back.delay(
        "wifi", {"sinr": np.array([25.0, 12.0])}, {}, sinr, np.array([False, False])
    )
    assert list(now["sinr"]) == [25.0, 9.0]


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match="nr_selective_gain"):
        NonIdealities(nr_selective_gain=-0.1)
    with pytest.raises(ValueError, match="unknown non-idealities 'harsh'"):
        NonIdealities.named("harsh")
    assert NonIdealities.named("realistic") == NonIdealities.realistic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "atsss",
            "bench",
            "loop",
            "--scenario",
            "paper-static",
            "--non-idealities",
            "harsh",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "unknown non-idealities 'harsh'" in done.stderr
    assert "Traceback" not in done.stderr
