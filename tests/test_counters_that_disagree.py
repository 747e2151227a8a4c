"""A node's counters that disagree with one another for one CPE (a PHY rate or a PRB count of
almost nothing beside a real throughput, a throughput beyond any access) are that CPE's
problem alone: every other CPE of a 1,000-CPE fleet is estimated as if they had been sound,
and the CPE itself keeps what its sound counters tell."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import numpy as np
import pytest

from bench.xapp_bench import _CountingSink, _NoAgents, _Queue, scaled_site, service_loop
from core.domain import MAX_CAPACITY_MBPS, Direction, KpiSample
from core.scenario.e2_identities import e2_cpes
from core.slots import Slots
from kpm.catalogue import load_catalogue
from tests.helpers import sharing
from xapp.adapters.memory_store import MemoryStateStore
from xapp.estimators.columns import StepSamples
from xapp.estimators.fusion import FusedEstimator
from xapp.estimators.kpi import KpiEstimator
from xapp.estimators.model import ModelEstimator
from xapp.estimators.probe import ProbeEstimator
from xapp.estimators.said import Path

from .test_model_history_equivalence import SHARED
from .test_shared_slots import _steps

pytestmark = sharing("steps")

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
    described = {m["access"]: m["refused"] for m in model.describe()}
    assert (described["nr"] is not None) == ("nr" in model.refused), described


# ------------------------------------------------- the whole loop, with what the E2 reader lets by

CATALOGUE = load_catalogue()
# (step, CPE, direction, the weights pushed or None, the reason)
Outcome = tuple[int, str, Direction, list[tuple[str, int]] | None, str]


def _in_range(name: str, draw: random.Random) -> float:
    """What a node may send for the measurement, canonical units: anything the catalogue's
    range lets by, its edges and the smallest numbers above 0 as often."""
    entry = CATALOGUE.get(name.split("|", 1)[0])
    assert entry is not None, name
    low, high = entry.canonical_value(entry.min), entry.canonical_value(entry.max)
    edges = [v for v in (low, high, 5e-324, 1e-300, 1e-9) if low <= v <= high]
    return draw.choice(edges) if draw.random() < 0.5 else draw.uniform(low, high)


def garbled_reports(names: list[str], seed: int) -> dict[str, float]:
    """New values for one to eight of a CPE's measurements (every access and direction),
    drawn with ``seed``: the same in every run (a loop of 1,000 CPEs is too slow to search
    for a failure and shrink it; hypothesis does that on the estimators above)."""
    draw = random.Random(seed)
    return {name: _in_range(name, draw) for name in draw.sample(names, draw.randint(1, 8))}


def _with(sample: KpiSample, values: dict[str, float]) -> KpiSample:
    """The sample as the E2 reader would make it of a report carrying ``values`` instead:
    the throughput field follows its measurement."""
    mine = {n: v for n, v in values.items() if n in sample.measurements}
    if not mine:
        return sample
    name = CATALOGUE.throughput_name(sample.access, sample.direction == Direction.DOWNLINK)
    throughput = mine.get(name, sample.throughput_mbps) if name else sample.throughput_mbps
    return dataclasses.replace(
        sample, throughput_mbps=throughput, measurements={**sample.measurements, **mine}
    )


def _outcomes(steps: list[list[KpiSample]], values: dict[str, float] | None) -> list[Outcome]:
    """Every decision of a 1,000-CPE loop built as the service builds it, over the steps, with
    the BAD CPE's reports carrying ``values``: (step, CPE, direction, weights pushed, reason)."""
    domain_cpes = e2_cpes(scaled_site(CPES, PERIODS + 1.0))
    source = _Queue()
    loop = service_loop(domain_cpes, source, _CountingSink(), MemoryStateStore(), "fused")
    found: list[Outcome] = []
    try:
        for n, samples in enumerate(steps):
            source.keep(
                [_with(s, values) if values is not None and s.cpe_id == BAD else s for s in samples]
            )
            for outcome in loop.step(n + 1.0):
                pushed = None if outcome.pushed is None else sorted(outcome.pushed.weights.items())
                found.append((n, outcome.cpe_id, outcome.direction, pushed, outcome.reason))
    finally:
        loop.close()  # (its push threads)
    return found


@pytest.fixture(scope="module")
def sound_outcomes(steps: list[list[KpiSample]]) -> list[Outcome]:
    return _outcomes(steps, None)


@pytest.mark.parametrize("seed", range(8))
def test_a_1000_cpe_loop_decides_every_other_cpe_alike_whatever_one_cpe_s_node_reports(
    steps: list[list[KpiSample]], sound_outcomes: list[Outcome], seed: int
) -> None:
    """Values the E2 reader lets by (the catalogue's ranges, its edges and numbers next to 0)
    for some of one CPE's measurements, in every step: every step decides, and every other
    CPE's decisions (weights pushed, reasons) are those of the loop where that CPE's reports
    were sound."""
    names = sorted({n for s in steps[0] if s.cpe_id == BAD for n in s.measurements})
    values = garbled_reports(names, seed)
    got = _outcomes(steps, values)
    others, expected = ([o for o in outcomes if o[1] != BAD] for outcomes in (got, sound_outcomes))
    differ = [(a, b) for a, b in zip(others, expected, strict=False) if a != b]
    assert len(others) == len(expected)
    assert not differ, (len(differ), differ[:2])
    assert len({o[0] for o in got if o[1] == BAD}) == PERIODS  # decided (or held) each step
