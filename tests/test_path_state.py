"""The loop's per-path and per-CPE state in columns (xapp/path_state.py, the outage risk) does
what the dictionaries of small records it replaced did, value for value: one path at a time
and many at once alike, in any mix."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.domain import CapacityEstimate, Direction, KpiSample
from core.slots import Slots
from xapp.estimators.columns import as_step
from xapp.path_state import (
    DecisionTimes,
    HeardReports,
    LastUsableEstimates,
    PathConditions,
)
from xapp.policy.outage_risk import OutageRisk

PATHS = [(f"cpe-{c}", a, Direction.DOWNLINK) for c in range(3) for a in ("nr", "wifi", "lifi")]


@dataclass
class _Record:
    usable_before: bool = False
    observed: int = 0
    probability: float = 0.0


class ReferenceRisk:
    """The former OutageRisk: a record per path in a dictionary."""

    def __init__(self, memory: int, prior: int) -> None:
        self.memory, self.prior = memory, prior
        self.paths: dict[object, _Record] = {}

    def observe(self, path: object, usable: bool) -> float:
        record = self.paths.get(path)
        if record is None:
            record = self.paths[path] = _Record(observed=self.prior)
        if record.usable_before:
            went_dark = 0.0 if usable else 1.0
            record.observed += 1
            step = max(1.0 / record.observed, 1.0 / self.memory)
            record.probability += step * (went_dark - record.probability)
        record.usable_before = usable
        return record.probability


# Steps: which paths are observed (each once), usable or not, and whether at once.
steps = st.lists(
    st.tuples(
        st.dictionaries(st.sampled_from(range(len(PATHS))), st.booleans(), max_size=len(PATHS)),
        st.booleans(),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(steps, st.integers(1, 80), st.integers(0, 30))
def test_the_outage_risk_in_columns_is_the_former_record_per_path(
    run: list[tuple[dict[int, bool], bool]], memory: int, prior: int
) -> None:
    reference = ReferenceRisk(memory, prior)
    risk = OutageRisk(memory=memory, prior=prior)
    for observed, at_once in run:
        chosen = [PATHS[i] for i in observed]
        usable = list(observed.values())
        expected = [reference.observe(p, u) for p, u in zip(chosen, usable, strict=True)]
        if at_once:
            got = risk.observe_many(risk.slots.many(chosen), np.array(usable, dtype=bool)).tolist()
        else:
            got = [risk.observe(p, u) for p, u in zip(chosen, usable, strict=True)]
        assert got == expected
    for path in PATHS:
        record = reference.paths.get(path)
        assert risk.probability(path) == (0.0 if record is None else record.probability)


class ReferenceTimes:
    """The former decision interval: two dictionaries by CPE and direction."""

    def __init__(self) -> None:
        self.last: dict[object, float] = {}
        self.usual: dict[object, float] = {}

    def interval(self, key: object, now_s: float) -> float:
        last = self.last.get(key)
        self.last[key] = now_s
        usual = self.usual.get(key)
        if last is None or now_s <= last:
            return usual if usual is not None else 1.0
        gap = min(now_s - last, 60.0)
        usual = gap if usual is None else 0.8 * usual + 0.2 * gap
        self.usual[key] = usual
        return usual


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sets(st.sampled_from(range(4))),
            st.floats(0.0, 200.0, allow_nan=False),
            st.booleans(),
        ),
        max_size=40,
    )
)
def test_decision_intervals_in_columns_are_the_former_running_mean(
    run: list[tuple[set[int], float, bool]],
) -> None:
    reference, times = ReferenceTimes(), DecisionTimes()
    now_s = 0.0
    for keys, advance, at_once in run:
        now_s += advance if advance > 100 else advance / 100  # mostly sub-second, some long
        chosen = [(f"cpe-{k}", Direction.UPLINK) for k in sorted(keys)]
        expected = [reference.interval(key, now_s) for key in chosen]
        if at_once:
            got = times.intervals(times.slots.many(chosen), np.full(len(chosen), now_s)).tolist()
        else:
            got = [times.interval(key, now_s) for key in chosen]
        assert got == expected


def test_a_usable_estimate_is_kept_by_path_alone_or_many_at_once_and_forgotten() -> None:
    slots: Slots[tuple[str, str, Direction]] = Slots()
    kept = LastUsableEstimates(slots)
    first = CapacityEstimate(*PATHS[0], 300.0, 30.0, "kpi", 10.0)
    assert kept.get(PATHS[0]) is None
    kept.put(PATHS[0], first)
    assert kept.get(PATHS[0]) == first
    kept.put_many(
        slots.many([PATHS[1], PATHS[4]]),
        np.array([900.0, 50.0]),
        np.array([90.0, 5.0]),
        np.array([11.0, 12.0]),
        np.array([False, True]),
        "fused",
    )
    assert kept.get(PATHS[1]) == CapacityEstimate(*PATHS[1], 900.0, 90.0, "fused", 11.0)
    assert kept.get(PATHS[4]) == CapacityEstimate(
        *PATHS[4], 50.0, 5.0, "fused", 12.0, lower_bound=True
    )
    # a newer one replaces it, a source each
    kept.put_many(
        slots.many([PATHS[0]]),
        np.array([1.0]),
        np.array([0.5]),
        np.array([13.0]),
        np.array([False]),
        ["probe"],
    )
    assert kept.get(PATHS[0]) == CapacityEstimate(*PATHS[0], 1.0, 0.5, "probe", 13.0)
    kept.forget(lambda path: path[0] == "cpe-0")
    assert kept.get(PATHS[0]) is None
    assert kept.get(PATHS[1]) is None
    assert kept.get(PATHS[4]) is not None
    assert kept.get(PATHS[8]) is None  # never kept, never given a place


class ReferenceHeard:
    """The former dictionaries of what the loop heard: the first report's step time and the
    newest arrival per CPE and direction, each path's last said conditions."""

    def __init__(self) -> None:
        self.first: dict[tuple[str, Direction], float] = {}
        self.received: dict[tuple[str, Direction], float] = {}
        self.said: dict[tuple[str, str, Direction], list[float | None]] = {}

    def take(self, samples: list[KpiSample], now_s: float) -> None:
        for s in samples:
            key = (s.cpe_id, s.direction)
            self.first.setdefault(key, now_s)
            if s.received_s is not None:
                self.received[key] = max(self.received.get(key, s.received_s), s.received_s)
            kept = self.said.setdefault((s.cpe_id, s.access, s.direction), [None] * 3)
            for i, value in enumerate((s.rtt_ms, s.loss_rate_permille, s.throughput_mbps)):
                if value is not None:
                    kept[i] = value


# A step's reports: each a path, its arrival, rtt, loss and throughput (None: left out).
Report = tuple[int, float | None, float | None, float | None, float | None]
maybe = st.one_of(st.none(), st.floats(0, 1000, allow_nan=False))
reports = st.lists(
    st.tuples(st.sampled_from(range(len(PATHS) * 2)), maybe, maybe, maybe, maybe), max_size=30
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(reports, st.booleans(), st.booleans()), max_size=12))
def test_what_the_loop_heard_in_columns_is_what_the_dictionaries_kept(
    steps: list[tuple[list[Report], bool, bool]],
) -> None:
    """Paths reported several times in a step (the later report wins), values left out,
    arrivals read by decisions and CPEs forgotten: the columns answer as the dictionaries
    did, and a path never reported reads as nothing said."""
    paths = PATHS + [(c, a, Direction.UPLINK) for c, a, _ in PATHS]
    heard = HeardReports(Slots(), Slots())
    reference = ReferenceHeard()
    for now, (step, read, forget) in enumerate(steps):
        samples = [
            KpiSample(
                paths[p][0],
                paths[p][1],
                paths[p][2],
                time_s=now + 1.0,
                period_s=1.0,
                throughput_mbps=tput,
                rtt_ms=rtt,
                loss_rate_permille=loss,
                received_s=arrival,
            )
            for p, arrival, rtt, loss, tput in step
        ]
        heard.take(as_step(samples) if now % 2 else samples, float(now))
        reference.take(samples, float(now))
        if forget:  # cpe-1 removed
            heard.forget(lambda cpe_id: cpe_id == "cpe-1")
            for history in (reference.first, reference.received):
                for key in [k for k in history if k[0] == "cpe-1"]:
                    del history[key]
            for path in [k for k in reference.said if k[0] == "cpe-1"]:
                del reference.said[path]
        together = now % 3 == 0  # (read by decisions that push together, by their places)
        for cpe_id, _, direction in paths:
            key = (cpe_id, direction)
            assert heard.first_report_s(key) == reference.first.get(key)
            if read and not together:  # a decision follows the reports
                assert heard.take_received(key) == reference.received.pop(key, None)
        if read and together:
            keys = list(dict.fromkeys((c, d) for c, _, d in paths))
            places = [heard.key_slots.get(k) for k in keys]
            known = [k for k, place in zip(keys, places, strict=True) if place is not None]
            taken = heard.take_received_at(
                np.array([p for p in places if p is not None], dtype=np.intp)
            )
            assert taken == [reference.received.pop(k, None) for k in known]
        assert heard.unread() == len(reference.received)
        # no CPE and direction was first heard from after the newest first report
        assert all(first <= heard.newest_first_s for first in reference.first.values())
        for path in paths:
            rtt, loss, tput = reference.said.get(path, [None] * 3)
            assert heard.conditions(path) == PathConditions(rtt, loss, tput)


def test_reports_read_by_decisions_put_as_rows_are_read_all_at_once() -> None:
    """``drop_received``: the arrivals of the CPEs and directions at these places are read, the
    others' kept (a place given after the last report included)."""
    heard = HeardReports(Slots(), Slots())
    heard.take(
        [KpiSample(c, a, d, 1.0, 1.0, received_s=7.0 + i) for i, (c, a, d) in enumerate(PATHS)], 1.0
    )
    later = heard.key_slots.of(("cpe-9", Direction.DOWNLINK))
    heard.drop_received(np.array([heard.key_slots.of(("cpe-0", Direction.DOWNLINK)), later]))
    assert heard.take_received(("cpe-0", Direction.DOWNLINK)) is None
    assert heard.take_received(("cpe-1", Direction.DOWNLINK)) == 7.0 + 5
    assert heard.unread() == 1
    # read all at once by decisions that push together, a place given after the last report
    # among them: what each had, once
    cpe_2_up = heard.key_slots.of(("cpe-2", Direction.UPLINK))
    assert heard.take_received_at(np.array([later, cpe_2_up])) == [None, None]
    cpe_2 = heard.key_slots.of(("cpe-2", Direction.DOWNLINK))
    assert heard.take_received_at(np.array([cpe_2, later])) == [7.0 + 8, None]
    assert heard.take_received_at(np.array([cpe_2])) == [None]
    assert heard.unread() == 0
