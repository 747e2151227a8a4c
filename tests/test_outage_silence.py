"""Outage by silence when each node's reports come on their own.

The live loop feeds each node's indication to the estimators as it arrives, so a CPE's NR
samples and its Wi-Fi samples of one period reach the silence tracker in separate calls. The
tracker used to look for "another access carried" within one call only: live, a dead Wi-Fi
path stayed usable while the simulated loop (every node's samples in one call) dropped it, and
the two disagreed by up to 0.028 of efficiency on paper-interruption's downlink.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path as FilePath
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.domain import Direction, KpiSample
from tests.helpers import assert_core_built
from xapp.estimators import outage
from xapp.estimators.outage import Path, SilenceTracker, WeightLookup

DL = Direction.DOWNLINK
CPES = [f"cpe-{i}" for i in range(1000)]
# Every CPE's weights in force: Wi-Fi carries everything, NR is on weight 0.
WEIGHTS = {"nr": 0, "wifi": 1}


def node_report(access: str, time_s: float, carried: dict[str, float]) -> list[KpiSample]:
    return [KpiSample(cpe, access, DL, time_s, 1.0, throughput_mbps=carried[cpe]) for cpe in CPES]


@pytest.mark.parametrize("wifi_first", [True, False])
def test_a_dead_path_is_silent_whichever_node_reports_first(wifi_first: bool) -> None:
    tracker = SilenceTracker(lambda cpe_id, direction: WEIGHTS)
    dead = set(CPES[::3])
    # The weighted Wi-Fi path of a third of the fleet died: it carried nothing, and MPTCP fell
    # back to NR, which carried what it could. The others carried on Wi-Fi as weighted.
    wifi = node_report("wifi", 31.0, {c: 0.0 if c in dead else 900.0 for c in CPES})
    nr = node_report("nr", 31.0, {c: 12.0 if c in dead else 0.0 for c in CPES})
    for batch in (wifi, nr) if wifi_first else (nr, wifi):
        tracker.update(batch)
    assert {p[0] for p in tracker.silent()} == dead
    assert all(p[1] == "wifi" for p in tracker.silent())
    assert tracker.silent_since(("cpe-0", "wifi", DL)) == 31.0
    # NR is on weight 0: carrying nothing there says nothing.
    assert tracker.silent_since(("cpe-1", "nr", DL)) is None


def test_silence_needs_another_access_carrying_in_the_same_period() -> None:
    tracker = SilenceTracker(lambda cpe_id, direction: WEIGHTS)
    # An idle application: nothing carried anywhere in period 31.
    tracker.update(node_report("wifi", 31.0, dict.fromkeys(CPES, 0.0)))
    # NR carried in period 30 (an older report, come late): not the same period.
    tracker.update(node_report("nr", 30.0, dict.fromkeys(CPES, 5.0)))
    assert tracker.silent() == set()
    # In period 32 NR carried and Wi-Fi did not: silent from then; carrying again ends it.
    tracker.update(node_report("nr", 32.0, dict.fromkeys(CPES, 5.0)))
    tracker.update(node_report("wifi", 32.0, dict.fromkeys(CPES, 0.0)))
    assert len(tracker.silent()) == len(CPES)
    tracker.update(node_report("wifi", 33.0, dict.fromkeys(CPES, 800.0)))
    assert tracker.silent() == set()


def test_a_path_silent_for_periods_on_end_is_silent_since_the_first() -> None:
    """Wi-Fi dead for three periods, its node reporting first each time (quiet until NR
    carries): silent since the first, not since the newest."""
    tracker = SilenceTracker(lambda cpe_id, direction: WEIGHTS)
    for period in (31.0, 32.0, 33.0):
        tracker.update(node_report("wifi", period, dict.fromkeys(CPES, 0.0)))
        tracker.update(node_report("nr", period, dict.fromkeys(CPES, 12.0)))
    assert len(tracker.silent()) == len(CPES)
    assert tracker.silent_since(("cpe-7", "wifi", DL)) == 31.0
    np.testing.assert_array_equal(
        tracker.silent_times([("cpe-7", "wifi", DL), ("cpe-7", "nr", DL)]), [31.0, math.nan]
    )


class ReferenceTracker:
    """The tracker as first written, a key made for each sample: the reference the tracker's
    look-up by path is held to."""

    def __init__(self, weights: WeightLookup) -> None:
        self.weights = weights
        self.since: dict[Path, float] = {}
        self.periods: dict[tuple[str, Direction], list[Any]] = {}  # [time, carried, quiet]

    def update(self, samples: list[KpiSample]) -> None:
        for s in samples:
            key = (s.cpe_id, s.direction)
            period = self.periods.get(key)
            if period is None:
                period = self.periods[key] = [s.time_s, False, []]
            elif s.time_s > period[0]:
                period[:] = [s.time_s, False, []]
            path = (s.cpe_id, s.access, s.direction)
            if (s.throughput_mbps or 0.0) > 0:
                self.since.pop(path, None)
                if s.time_s == period[0] and not period[1]:
                    period[1] = True
                    for quiet in period[2]:
                        self.since.setdefault(quiet, period[0])
                    period[2].clear()
            elif s.time_s == period[0]:
                weights = self.weights(s.cpe_id, s.direction)
                if weights is None or weights.get(s.access, 0) > 0:
                    if period[1]:
                        self.since.setdefault(path, s.time_s)
                    else:
                        period[2].append(path)


_samples = st.builds(
    lambda cpe, access, direction, time_s, carried: KpiSample(
        cpe, access, direction, time_s, 1.0, throughput_mbps=carried
    ),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["nr", "wifi", "lifi"]),
    st.sampled_from(list(Direction)),
    st.sampled_from([1.0, 2.0, 3.0]),
    st.sampled_from([None, 0.0, -0.0, 5.0]),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.lists(_samples, max_size=12), st.booleans()), max_size=8),
    st.dictionaries(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(list(Direction))),
        st.dictionaries(st.sampled_from(["nr", "wifi", "lifi"]), st.integers(0, 2)),
    ),
)
def test_the_tracker_says_what_its_reference_says(
    updates: list[tuple[list[KpiSample], bool]],
    weights: dict[tuple[str, Direction], dict[str, int]],
) -> None:
    """Updates of any samples (old periods among them, a path twice, nothing carried, paths
    on weight 0, none pushed yet), each followed by a probe's word on one path or not: the
    same silent paths, since the same times, as the reference; with the C walk where it is
    built and with its Python twin."""

    def lookup(cpe_id: str, direction: Direction) -> Mapping[str, int] | None:
        return weights.get((cpe_id, direction))

    trackers = [SilenceTracker(lookup, compiled=False)]
    if outage._core is not None:
        trackers.append(SilenceTracker(lookup, compiled=True))
    reference = ReferenceTracker(lookup)
    every = [(c, a, d) for c in "abc" for a in ("nr", "wifi", "lifi") for d in Direction]
    for samples, cleared in updates:
        reference.update(samples)
        for tracker in trackers:
            tracker.update(samples)
        if cleared and samples:
            path = (samples[0].cpe_id, samples[0].access, samples[0].direction)
            for tracker in trackers:
                tracker.clear(path)
            reference.since.pop(path, None)
        expected = [reference.since.get(p, math.nan) for p in every]
        for tracker in trackers:
            assert {p: t for p in every if (t := tracker.silent_since(p)) is not None} == (
                reference.since
            )
            np.testing.assert_array_equal(tracker.silent_times(every), expected)


def test_the_core_was_built() -> None:
    """The C walk was built (the differential test above ran it)."""
    source = FilePath(outage.__file__).with_name("_silence.c")
    assert_core_built(outage._core, "xapp.estimators._silence", source)


@pytest.mark.parametrize("compiled", [False, True])
def test_a_sample_without_a_time_is_refused_whole(compiled: bool) -> None:
    """A step with a sample whose time is no number: a clear error, nothing of the step
    taken in (not the samples before it either), and the tracker goes on with the next."""
    if compiled and outage._core is None:
        pytest.skip("the core is not built (test_the_core_was_built says why)")
    tracker = SilenceTracker(lambda cpe_id, direction: WEIGHTS, compiled=compiled)
    quiet = node_report("wifi", 31.0, dict.fromkeys(CPES, 0.0))[:3]
    carried = KpiSample("cpe-0", "nr", DL, 31.0, 1.0, throughput_mbps=5.0)
    bad = KpiSample("cpe-1", "nr", DL, "soon", 1.0, throughput_mbps=5.0)  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError), match=r"real number|could not convert"):
        tracker.update([*quiet, carried, bad])
    assert tracker.is_quiet()
    tracker.update([*quiet, carried])
    assert tracker.silent() == {("cpe-0", "wifi", DL)}
