"""Saturated periods as training labels: which periods are kept, how often, how many."""

from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.simulated import SimulatedKpis
from core.domain import Direction, KpiSample, SaturatedPeriod
from core.scenario.load import load_scenario
from core.scenario.truth import sample_truth
from core.slots import Slots
from xapp.adapters.memory_store import MemoryStateStore
from xapp.estimators import saturation
from xapp.estimators.columns import StepSamples
from xapp.estimators.kpi import utilisations
from xapp.estimators.saturation import (
    HISTORY_PERIODS,
    MAX_KEPT_PER_S,
    SATURATED_PERIODS,
    SATURATED_UTILISATION,
    SaturationLabeller,
)

DL = Direction.DOWNLINK


def run(labeller: SaturationLabeller, seconds: int, held_back: dict[str, float]) -> None:
    """paper-static's KPIs, each path carrying its capacity times ``held_back`` (1 if absent)."""
    scenario = load_scenario("paper-static").cut(float(seconds))
    truth = sample_truth(scenario, DL, 1.0)
    kpis = SimulatedKpis(truth, DL, seed=2)
    share = np.array([held_back.get(a, 1.0) for a in truth.accesses])
    for k in range(1, len(truth.times_s)):
        capacity = truth.usable_mbps[k - 1]
        labeller.update(kpis.samples(k, float(truth.times_s[k]), 1.0, capacity, capacity * share))


def test_saturated_paths_are_labelled_with_their_throughput_and_history() -> None:
    store = MemoryStateStore()
    labeller = SaturationLabeller(store, every_s=10.0, per_path=5)
    run(labeller, 40, {"lifi": 0.3})  # LiFi carries a third of what it could: held back
    periods = store.load_saturated_periods()
    by_access: dict[str, list[float]] = {}
    for period in periods:
        last = period.history[-1]
        by_access.setdefault(last.access, []).append(period.capacity_mbps)
        assert last.direction == DL
        assert len(period.history) >= 3
        assert [s.time_s for s in period.history] == sorted(s.time_s for s in period.history)
    assert "lifi" not in by_access  # its throughput says nothing of its capacity
    # One label per path every 10 s at most, from the third saturated period on.
    assert 3 <= len(by_access["nr"]) <= 4
    assert 3 <= len(by_access["wifi"]) <= 4
    # What a saturated path carried is its capacity (the simulator's KPI noise aside).
    assert np.median(by_access["nr"]) == pytest.approx(342.0, rel=0.1)
    assert np.median(by_access["wifi"]) == pytest.approx(1190.0, rel=0.1)


def test_the_store_keeps_the_newest_periods_of_each_path() -> None:
    store = MemoryStateStore()
    labeller = SaturationLabeller(store, every_s=1.0, per_path=5)
    run(labeller, 30, {})
    periods = store.load_saturated_periods()
    per_path: dict[str, list[float]] = {}
    for period in periods:
        per_path.setdefault(period.history[-1].access, []).append(period.history[-1].time_s)
    assert {a: len(t) for a, t in per_path.items()} == {"nr": 5, "wifi": 5, "lifi": 5}
    assert min(per_path["nr"]) >= 25.0  # the newest: periods 26 to 30
    assert labeller.kept > 15


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="every_s"):
        SaturationLabeller(MemoryStateStore(), every_s=0, per_path=5)
    with pytest.raises(ValueError, match="per_path"):
        SaturationLabeller(MemoryStateStore(), every_s=60, per_path=0)


def test_a_period_whose_own_kpis_cannot_tell_is_not_labelled() -> None:
    """Two saturated periods, then one without the KPIs that say what the path could carry:
    its throughput may be held back, so it is no label, though the periods before were full."""
    scenario = load_scenario("paper-static").cut(5.0)
    truth = sample_truth(scenario, DL, 1.0)
    kpis = SimulatedKpis(truth, DL, seed=2)
    store = MemoryStateStore()
    labeller = SaturationLabeller(store, every_s=1.0, per_path=10)
    for k in (1, 2):
        capacity = truth.usable_mbps[k - 1]
        labeller.update(kpis.samples(k, float(truth.times_s[k]), 1.0, capacity, capacity))
    capacity = truth.usable_mbps[2]
    third = kpis.samples(3, float(truth.times_s[3]), 1.0, capacity, capacity * 0.3)
    labeller.update([replace(s, measurements={}) for s in third])
    assert store.load_saturated_periods() == []


class CountingStore(MemoryStateStore):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def put_saturated_periods(self, periods):  # type: ignore[no-untyped-def]
        self.batches.append(len(periods))
        super().put_saturated_periods(periods)


def test_a_fleet_saturating_at_once_is_kept_in_bounded_batches() -> None:
    """1,000 CPEs whose paths all saturate in the same period, reporting every second: one
    write per update, of at most MAX_KEPT_PER_S periods; the paths left out are kept at the
    next periods."""
    store = CountingStore()
    labeller = SaturationLabeller(store, every_s=1000.0, per_path=1)
    scenario = load_scenario("paper-static").cut(8.0)
    truth = sample_truth(scenario, DL, 1.0)
    kpis = SimulatedKpis(truth, DL, seed=2)
    for k in range(1, len(truth.times_s)):
        capacity = truth.usable_mbps[k - 1]
        one = kpis.samples(k, float(truth.times_s[k]), 1.0, capacity, capacity)
        labeller.update([replace(s, cpe_id=f"cpe-{n:04d}") for n in range(1000) for s in one])
    assert store.batches, "nothing was kept"
    assert max(store.batches) == MAX_KEPT_PER_S
    assert len(store.batches) == len(truth.times_s) - 1  # one write per update, never more
    assert len(store.load_saturated_periods()) == labeller.kept == sum(store.batches)


def test_a_fleet_reporting_every_100_ms_is_kept_at_the_same_rate_a_second() -> None:
    """1,000 CPEs whose LiFi paths all stay at their limit, reporting every 100 ms: a second's
    burst at first, then MAX_KEPT_PER_S a second (a tenth of it an update), as at 1 s reports;
    no stretch of time keeps more than its seconds' worth and one second's burst."""
    store = CountingStore()
    labeller = SaturationLabeller(store, every_s=1000.0, per_path=1)
    updates = 30
    for step in range(1, updates + 1):
        labeller.update(
            [
                KpiSample(
                    f"cpe-{n:04d}",
                    "lifi",
                    DL,
                    step / 10,
                    0.1,
                    throughput_mbps=50.0,
                    measurements={"LIFI.StaPhyRateDl": 60.0},
                )
                for n in range(1000)
            ]
        )
    first = SATURATED_PERIODS - 1  # the first update a path can be kept at
    assert store.batches[:first] == [0] * first
    assert store.batches[first] == MAX_KEPT_PER_S
    assert store.batches[first + 1 :] == [MAX_KEPT_PER_S // 10] * (updates - first - 1)
    for start in range(updates - 9):
        assert sum(store.batches[start : start + 10]) <= MAX_KEPT_PER_S * (1 + 0.9)
    assert labeller.kept == len(store.load_saturated_periods()) == sum(store.batches)


class ReferenceLabeller:
    """The labeller as first written, a record per path and a dozen steps per sample: the
    reference the rows of arrays are held to."""

    def __init__(self, every_s: float, per_path: int) -> None:
        self.every_s, self.per_path = every_s, per_path
        self.paths: dict[tuple[str, str, Direction], list[Any]] = {}
        self.budget = float(MAX_KEPT_PER_S)  # what may be kept, as of the newest time `then`
        self.then: float | None = None

    def _most(self, samples: list[KpiSample]) -> int:
        """MAX_KEPT_PER_S a second of the samples' time, a second's worth at most."""
        times = [s.time_s for s in samples if math.isfinite(s.time_s)]
        if times and (self.then is None or max(times) > self.then):
            if self.then is not None:
                gained = MAX_KEPT_PER_S * (max(times) - self.then)
                self.budget = min(float(MAX_KEPT_PER_S), self.budget + gained)
            self.then = max(times)
        return math.floor(self.budget + 1e-9)

    def update(self, samples: list[KpiSample]) -> list[tuple[SaturatedPeriod, int]]:
        kept: list[tuple[SaturatedPeriod, int]] = []
        most = self._most(samples) if samples else 0
        for sample, share in zip(samples, utilisations(samples).tolist(), strict=True):
            key = (sample.cpe_id, sample.access, sample.direction)
            # history, shares, when last kept, periods kept
            path = self.paths.setdefault(
                key, [deque(maxlen=HISTORY_PERIODS), deque(maxlen=SATURATED_PERIODS), -math.inf, 0]
            )
            path[0].append(sample)
            path[1].append(None if math.isnan(share) else share)
            if len(kept) >= most or sample.time_s - path[2] < self.every_s:
                continue
            shares = path[1]
            if len(shares) < SATURATED_PERIODS or shares[-1] is None:
                continue
            if (sample.throughput_mbps or 0.0) <= 0:
                continue
            known = [u for u in shares if u is not None]
            if not known or min(known) < SATURATED_UTILISATION:
                continue
            kept.append((SaturatedPeriod(tuple(path[0])), path[3] % self.per_path))
            path[3] += 1
            path[2] = sample.time_s
        self.budget -= len(kept)
        return kept


class Recorded(MemoryStateStore):
    """A store that keeps what each update put."""

    def __init__(self) -> None:
        super().__init__()
        self.puts: list[list[tuple[SaturatedPeriod, int]]] = []

    def put_saturated_periods(self, periods: Sequence[tuple[SaturatedPeriod, int]]) -> None:
        self.puts.append(list(periods))
        super().put_saturated_periods(periods)


_lifi = st.builds(
    lambda cpe, direction, time_s, carried, phy: KpiSample(
        cpe,
        "lifi",
        direction,
        time_s,
        1.0,
        throughput_mbps=carried,
        measurements={} if phy is None else {"LIFI.StaPhyRateDl": phy, "LIFI.StaPhyRateUl": phy},
    ),
    st.sampled_from(["a", "b"]),
    st.sampled_from(list(Direction)),
    st.sampled_from([1.0, 2.0, 2.5, 4.0, math.nan]),
    st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.0, math.nan]), st.floats(5.0, 12.0)),
    st.one_of(st.none(), st.sampled_from([10.0, 15.0, 20.0])),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(_lifi, max_size=10), max_size=10),
    st.sampled_from([0.5, 1.0, 2.0]),
    st.integers(1, 3),
    st.integers(1, 60),
    st.booleans(),
)
def test_the_labeller_keeps_what_its_reference_keeps(
    updates: list[list[KpiSample]], every_s: float, per_path: int, most: int, shared: bool
) -> None:
    """Updates of any samples (a path twice in one, periods back in time, throughputs none, 0
    or NaN, utilisations unknown, at the limit or not, more to keep than the budget lets):
    the same periods kept, with the same histories, in the same slots, as the reference.
    ``shared``: the paths' places are the estimators' (other paths placed first), read from
    the step's samples as the service gives them."""
    store = Recorded()
    slots: Slots[tuple[str, str, Direction]] | None = None
    if shared:
        slots = Slots()
        slots.many([(f"other-{n}", "nr", DL) for n in range(5)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(saturation, "MAX_KEPT_PER_S", most)
        patch.setattr(sys.modules[__name__], "MAX_KEPT_PER_S", most)
        labeller, reference = (
            SaturationLabeller(store, every_s, per_path, slots=slots),
            ReferenceLabeller(every_s, per_path),
        )
        for samples in updates:
            labeller.update(StepSamples(samples) if shared else samples)
            expected = reference.update(samples)
            got = store.puts[-1]
            assert [(p.history, slot) for p, slot in got] == [
                (p.history, slot) for p, slot in expected
            ]
    assert labeller.kept == sum(len(put) for put in store.puts)


def test_a_growing_fleet_is_labelled_as_its_reference_labels_it() -> None:
    """Paths added step after step, well past the rows first made (they grow), each at its
    limit in every period: the same periods kept as the reference keeps."""
    store = Recorded()
    labeller, reference = SaturationLabeller(store, 1.0, 2), ReferenceLabeller(1.0, 2)
    for step in range(1, 13):
        samples = [
            KpiSample(
                f"cpe-{n}",
                "lifi",
                DL,
                float(step),
                1.0,
                throughput_mbps=50.0,
                measurements={"LIFI.StaPhyRateDl": 60.0},
            )
            for n in range(150 * step)
        ]
        labeller.update(samples)
        expected = reference.update(samples)
        assert [(p.history, slot) for p, slot in store.puts[-1]] == [
            (p.history, slot) for p, slot in expected
        ]
    assert labeller.kept == sum(len(put) for put in store.puts) > 100
