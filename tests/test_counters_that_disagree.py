"""A node's counters that disagree with one another for one CPE (a PHY rate or a PRB count of
almost nothing beside a real throughput, a throughput beyond any access) are that CPE's
problem alone: every other CPE of a 1,000-CPE fleet is estimated as if they had been sound,
and the CPE itself keeps what its sound counters tell."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from bench.xapp_bench import _NoAgents
from core.domain import MAX_CAPACITY_MBPS, Direction, KpiSample
from core.slots import Slots
from xapp.estimators.columns import StepSamples
from xapp.estimators.fusion import FusedEstimator
from xapp.estimators.kpi import KpiEstimator
from xapp.estimators.model import ModelEstimator
from xapp.estimators.probe import ProbeEstimator
from xapp.estimators.said import Path

from .test_model_history_equivalence import SHARED
from .test_shared_slots import _steps

CPES, PERIODS = 1000, 4
BAD = "cpe-0007"

# What a broken node may say of one station, each within the E2 catalogue's ranges but the
# last (which other KPI sources may still hand over).
Garble = Callable[[KpiSample], KpiSample]


def _measured(sample: KpiSample, **values: float) -> KpiSample:
    return dataclasses.replace(sample, measurements={**sample.measurements, **values})


GARBLES: dict[str, Garble] = {
    "a Wi-Fi PHY rate of 1e-300 Mbit/s": lambda s: (
        _measured(s, **{"WLAN.StaPhyRateDl": 1e-300, "WLAN.StaPhyRateUl": 1e-300})
        if s.access == "wifi"
        else s
    ),
    "an NR PRB count of 5e-324": lambda s: (
        _measured(s, **{"RRU.PrbUsedDl": 5e-324, "RRU.PrbUsedUl": 5e-324})
        if s.access == "nr"
        else s
    ),
    "a Wi-Fi station carrying three times its PHY rate": lambda s: (
        dataclasses.replace(s, throughput_mbps=3 * s.measurements["WLAN.StaPhyRateDl"])
        if s.access == "wifi"
        and s.direction == Direction.DOWNLINK
        and s.measurements.get("WLAN.StaPhyRateDl")
        and s.measurements.get("WLAN.StaAirtime", 0.0) >= 10.0
        else s
    ),
    "Wi-Fi and LiFi PHY rates at the catalogue's bound": lambda s: _measured(
        s,
        **{
            name: 50_000.0
            for name in ("WLAN.StaPhyRateDl", "LIFI.StaPhyRateDl", "LIFI.StaPhyRateUl")
            if name in s.measurements
        },
    ),
    "NR PRBs available at the catalogue's bound, one used": lambda s: (
        _measured(s, **{"RRU.PrbAvailDl": 3300.0, "RRU.PrbUsedDl": 1.0, "RRU.PrbTotDl": 0.0})
        if s.access == "nr" and s.direction == Direction.DOWNLINK
        else s
    ),
    "NR throughputs at the catalogue's bound (10^8 kbit/s)": lambda s: (
        dataclasses.replace(s, throughput_mbps=100_000.0)
        if s.access == "nr" and s.throughput_mbps is not None
        else s
    ),
    "a throughput of 10^12 Mbit/s": lambda s: (
        dataclasses.replace(s, throughput_mbps=1e12) if s.throughput_mbps is not None else s
    ),
}


REPORTS_NOTHING = {"a throughput of 10^12 Mbit/s"}


def _fused() -> tuple[FusedEstimator, ModelEstimator]:
    slots: Slots[Path] = Slots()
    kpi_source = KpiEstimator(slots)
    model = ModelEstimator(SHARED._models, slots=slots)
    probe = ProbeEstimator(_NoAgents(), advisors=(kpi_source, model), slots=slots)
    fused = FusedEstimator([kpi_source, model, probe], references=[kpi_source, probe], slots=slots)
    return fused, model


@pytest.fixture(scope="module")
def steps() -> list[list[KpiSample]]:
    return _steps(CPES, PERIODS)


@pytest.mark.parametrize("garble", list(GARBLES), ids=list(GARBLES))
def test_one_cpe_s_garbled_counters_leave_the_fleet_s_estimates_alone(
    steps: list[list[KpiSample]], garble: str
) -> None:
    (sound, _), (garbled, model) = _fused(), _fused()
    paths = sorted({(s.cpe_id, s.access, s.direction) for s in steps[0]})
    others = [p for p in paths if p[0] != BAD]
    assert len(others) < len(paths)
    for n, samples in enumerate(steps):
        now_s = n + 1.0
        sound.update(StepSamples(samples), now_s)
        garbled.update(
            StepSamples([GARBLES[garble](s) if s.cpe_id == BAD else s for s in samples]), now_s
        )
        expected, got = sound.estimate_rows(others, now_s), garbled.estimate_rows(others, now_s)
        for column in ("present", "capacity", "stddev", "measured_at", "available"):
            np.testing.assert_array_equal(getattr(got, column), getattr(expected, column))
        # and the CPE itself: an estimate of every path it reported, each within reason
        own = [p for p in paths if p[0] == BAD]
        rows = garbled.estimate_rows(own, now_s)
        if garble in REPORTS_NOTHING:  # every report of it is wrong: nothing, not garbage
            assert not rows.present.any()
        else:
            assert rows.present.all()
            assert (rows.capacity <= MAX_CAPACITY_MBPS).all()
    # the models stay in service; a forecast the NR model makes of absurd inputs is refused
    assert not model.unavailable
    assert ("nr" in model.refused) == garble.startswith("NR throughputs"), model.refused
