"""ProbeEstimator: when it probes, what it makes of the answers, and what it keeps."""

from __future__ import annotations

import dataclasses
import itertools
from collections import deque
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.domain import (
    CapacityEstimate,
    Direction,
    KpiSample,
    ProbeOutcome,
    ProbeRequest,
)
from xapp.adapters.memory_store import MemoryStateStore
from xapp.estimators.columns import StepSamples
from xapp.estimators.probe import ProbeEstimator, ProbeSettings
from xapp.estimators.said import NOTHING, said_of
from xapp.estimators.saturation import HISTORY_PERIODS
from xapp.estimators.selection import EstimatorSelection, EstimatorSettings

DL = Direction.DOWNLINK


class ScriptedProber:
    """The Prober port answering from a table of capacities (the real one is HTTP to the
    agents, tested against a running agent in test_http_prober.py)."""

    def __init__(self, capacities: dict[str, float | None]) -> None:
        self.capacities = capacities
        self.started: list[tuple[float, ProbeRequest]] = []
        self._running: list[tuple[float, ProbeRequest]] = []
        self.silent = False  # never answer: for timeouts

    def start(self, request: ProbeRequest, now_s: float) -> None:
        self.started.append((now_s, request))
        self._running.append((now_s, request))

    def collect(self, now_s: float) -> Sequence[ProbeOutcome]:
        if self.silent:
            return []
        done = [(t, r) for t, r in self._running if t + r.duration_s <= now_s]
        self._running = [(t, r) for t, r in self._running if t + r.duration_s > now_s]
        out = []
        for t, r in done:
            capacity = self.capacities.get(r.access)
            if capacity is None:
                out.append(ProbeOutcome(r, t, t, None, 0.0, path_down=True, error="no route"))
            elif capacity < 0:
                out.append(ProbeOutcome(r, t, t, None, 0.0, error="agent answered 502"))
            else:
                out.append(ProbeOutcome(r, t, t + r.duration_s, capacity, capacity * 0.8))
        return out


class Fixed:
    def __init__(self, name: str, answers: dict[str, CapacityEstimate]) -> None:
        self.name = name
        self.answers = answers

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        pass

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        return self.answers.get(access)


def period(t: float, **throughput: float) -> list[KpiSample]:
    return [
        KpiSample("cpe-1", access, DL, t, 1.0, throughput_mbps=value)
        for access, value in throughput.items()
    ]


def run(estimator: ProbeEstimator, seconds: int, **throughput: float) -> None:
    for t in range(1, seconds + 1):
        estimator.update(period(float(t), **throughput), float(t))


def test_probe_only_probes_every_path_routinely_one_at_a_time() -> None:
    prober = ScriptedProber({"nr": 340.0, "wifi": 1190.0, "lifi": 12.0})
    estimator = ProbeEstimator(prober, ProbeSettings(routine_gap_s=10.0))
    run(estimator, 25, nr=30.0, wifi=90.0, lifi=1.0)
    starts = [(t, r.access) for t, r in prober.started]
    assert starts[:3] == [(1.0, "lifi"), (2.0, "nr"), (3.0, "wifi")]  # one per CPE at a time
    by_path: dict[str, list[float]] = {}
    for t, access in starts:
        by_path.setdefault(access, []).append(t)
    for times in by_path.values():
        assert all(b - a >= 10.0 for a, b in itertools.pairwise(times))
    estimate = estimator.estimate("cpe-1", "wifi", DL, 25.0)
    assert estimate is not None
    assert estimate.capacity_mbps == 1190.0
    assert estimate.source == "probe"
    assert estimator.stats.by_reason["no-estimate"] == len(starts)


def test_no_probe_while_fresh_estimates_agree_and_one_when_they_disagree() -> None:
    prober = ScriptedProber({"nr": 340.0, "wifi": 1190.0})
    kpi = Fixed("kpi", {})
    model = Fixed("model", {})
    estimator = ProbeEstimator(prober, ProbeSettings(), advisors=[kpi, model])
    for t in range(1, 6):
        now = float(t)
        kpi.answers = {
            "nr": CapacityEstimate("cpe-1", "nr", DL, 340.0, 34.0, "kpi", now),
            "wifi": CapacityEstimate("cpe-1", "wifi", DL, 1190.0, 119.0, "kpi", now),
        }
        model.answers = {
            "nr": CapacityEstimate("cpe-1", "nr", DL, 330.0, 40.0, "model", now),
            # the model read a held-back throughput: a bound, not a disagreement
            "wifi": CapacityEstimate("cpe-1", "wifi", DL, 90.0, 5.0, "model", now, True, True),
        }
        estimator.update(period(now, nr=30.0, wifi=90.0), now)
    assert prober.started == []
    model.answers["nr"] = CapacityEstimate("cpe-1", "nr", DL, 60.0, 6.0, "model", 6.0)
    kpi.answers["nr"] = CapacityEstimate("cpe-1", "nr", DL, 340.0, 34.0, "kpi", 6.0)
    estimator.update(period(6.0, nr=30.0, wifi=90.0), 6.0)
    assert [(r.access, r.reason) for _, r in prober.started] == [("nr", "disagree")]


def test_outages_failures_and_timeouts() -> None:
    prober = ScriptedProber({"nr": None, "wifi": -1.0})
    estimator = ProbeEstimator(prober, ProbeSettings(routine_gap_s=5.0, timeout_s=3.0))
    run(estimator, 4, nr=0.0, wifi=0.0)
    down = estimator.estimate("cpe-1", "nr", DL, 4.0)
    assert down is not None
    assert not down.available  # the probe could not get through: the path is down
    assert estimator.estimate("cpe-1", "wifi", DL, 4.0) is None  # the agent failed, not the path
    assert estimator.stats.path_down == 1
    assert estimator.stats.failed == 1
    prober.silent = True
    run(estimator, 12, nr=0.0, wifi=0.0)
    assert estimator.stats.timed_out >= 1


def test_link_state_down_is_never_probed_and_its_return_is() -> None:
    prober = ScriptedProber({"lifi": 12.0})
    estimator = ProbeEstimator(prober, ProbeSettings(), advisors=[Fixed("kpi", {})])
    lifi_down = KpiSample("cpe-1", "lifi", DL, 1.0, 1.0, throughput_mbps=0.0, available=False)
    estimator.update([lifi_down], 1.0)
    assert prober.started == []
    unavailable = estimator.estimate("cpe-1", "lifi", DL, 1.0)
    assert unavailable is not None
    assert not unavailable.available
    lifi_up = KpiSample("cpe-1", "lifi", DL, 2.0, 1.0, throughput_mbps=5.0, available=True)
    estimator.update([lifi_up], 2.0)
    assert [(r.access, r.reason) for _, r in prober.started] == [("lifi", "recovered")]


def test_a_silent_path_is_down_checked_only_when_its_node_never_reported_headroom() -> None:
    # Wi-Fi dies at t = 3 (weighted, silent while NR carries). Its node had reported Wi-Fi's
    # headroom before, so its return will show in the KPIs: no probe. A path whose node never
    # reported headroom (only throughput) is down-checked every second instead.
    for headroom_before in (True, False):
        prober = ScriptedProber({"nr": 340.0, "wifi": None})
        kpi = Fixed("kpi", {})
        estimator = ProbeEstimator(prober, ProbeSettings(), advisors=[kpi])
        for t in range(1, 9):
            now = float(t)
            wifi_up = t < 3
            answers = {"nr": CapacityEstimate("cpe-1", "nr", DL, 340.0, 34.0, "kpi", now)}
            answers["wifi"] = CapacityEstimate(
                "cpe-1",
                "wifi",
                DL,
                1190.0 if wifi_up else 0.0,
                119.0,
                "kpi",
                now,
                lower_bound=not (wifi_up and headroom_before),
            )
            kpi.answers = answers
            estimator.update(period(now, nr=300.0, wifi=900.0 if wifi_up else 0.0), now)
        reasons = [r.reason for t, r in prober.started if r.access == "wifi" and t >= 3]
        if headroom_before:
            assert reasons == []
        else:
            assert reasons == ["down-check"] * 6  # t = 3 … 8


def test_every_result_is_kept_with_the_kpis_that_led_to_it() -> None:
    prober = ScriptedProber({"wifi": 1190.0})
    store = MemoryStateStore()
    estimator = ProbeEstimator(prober, ProbeSettings(), records=store)
    run(estimator, 3, wifi=90.0)
    records = store.load_probe_records()
    assert len(records) == 1
    assert records[0].outcome.capacity_mbps == 1190.0
    assert [s.throughput_mbps for s in records[0].history] == [90.0, 90.0]


def wifi_sample(cpe_id: str) -> KpiSample:
    """A Wi-Fi period at t = 1 s whose KPIs say 1,190 Mbit/s (300 carried at 25 % airtime)."""
    return KpiSample(
        cpe_id,
        "wifi",
        DL,
        1.0,
        1.0,
        throughput_mbps=300.0,
        measurements={
            "WLAN.StaPhyRateDl": 2402.0,
            "WLAN.StaAirtime": 25.0,
            "WLAN.ChannelUtilization": 25.0,
        },
    )


def test_operator_override_switches_the_estimator_of_one_cpe() -> None:
    prober = ScriptedProber({"wifi": 1190.0, "nr": 340.0})
    chosen: dict[str, str] = {}
    selection = EstimatorSelection(prober, choice=lambda cpe_id, direction: chosen.get(cpe_id))
    sample = wifi_sample("cpe-1")
    selection.update([sample], 1.0)
    assert selection.mode_for("cpe-1", DL) == "fused"
    kpi_view = selection.estimate("cpe-1", "wifi", DL, 1.0)
    assert kpi_view is not None
    assert kpi_view.capacity_mbps == pytest.approx(1190.0, rel=0.01)
    chosen["cpe-1"] = "probe-only"
    assert selection.mode_for("cpe-1", DL) == "probe-only"
    assert selection.estimate("cpe-1", "wifi", DL, 1.0) is None  # nothing probed yet
    selection.update([replace_time(sample, 2.0)], 2.0)
    selection.update([replace_time(sample, 3.0)], 3.0)
    probed = selection.estimate("cpe-1", "wifi", DL, 3.0)
    assert probed is not None
    assert probed.source == "probe"
    chosen["cpe-1"] = "no-such-mode"  # an unknown choice falls back to the configured mode
    assert selection.mode_for("cpe-1", DL) == "fused"


def replace_time(sample: KpiSample, t: float) -> KpiSample:
    return dataclasses.replace(sample, time_s=t)


def test_only_the_controlled_directions_are_probed() -> None:
    """Uplink and downlink KPIs both arrive, but with only downlink weights controlled a probe
    of an uplink path would cost capacity for an estimate nobody uses."""
    prober = ScriptedProber({"nr": 340.0})
    selection = EstimatorSelection(prober, probe_directions=(DL,))
    for t in (1.0, 2.0):
        selection.update(
            [
                KpiSample("cpe-1", "nr", Direction.UPLINK, t, 1.0, throughput_mbps=50.0),
                KpiSample("cpe-1", "nr", DL, t, 1.0, throughput_mbps=300.0),
            ],
            t,
        )
    assert [(r.access, r.direction) for _, r in prober.started] == [("nr", DL)]


def test_no_probe_while_the_agent_has_the_word_on_carrier() -> None:
    """Gone: the agent will say when it is back, a down-check adds nothing. Back: until a
    report of a period that began after the return, a probe would only compete with the data
    the xApp just sent there."""
    prober = ScriptedProber({"wifi": 1190.0})
    estimator = ProbeEstimator(prober, ProbeSettings(routine_gap_s=1.0))
    estimator.update(period(1.0, wifi=90.0), 1.0)
    assert [t for t, _ in prober.started] == [1.0]  # no estimate from anyone: probed
    estimator.carrier_changed("cpe-1", "wifi", False, 1.5)
    for t in (2.0, 3.0, 4.0):
        estimator.update(period(t, wifi=0.0), t)
    assert [t for t, _ in prober.started] == [1.0]
    estimator.carrier_changed("cpe-1", "wifi", True, 4.3)
    estimator.update(period(5.0, wifi=50.0), 5.0)  # the period 4-5 s began before the return
    assert [t for t, _ in prober.started] == [1.0]
    estimator.update(period(6.0, wifi=900.0), 6.0)  # 5-6 s: the measurement speaks again
    assert [t for t, _ in prober.started] == [1.0, 6.0]


def test_each_cpe_feeds_only_the_estimators_its_mode_reads() -> None:
    """A fleet on the KPI estimator does not pay for the model's inference: the model is fed
    only the CPEs whose mode reads it (here one CPE switched to fused)."""
    prober = ScriptedProber({"wifi": 1190.0})
    chosen = {"cpe-1": "fused"}
    selection = EstimatorSelection(
        prober,
        EstimatorSettings(mode="kpi-only"),
        choice=lambda cpe_id, direction: chosen.get(cpe_id),
    )
    fed: list[str] = []
    model_update = selection.model.update

    def counting(samples, now_s):  # type: ignore[no-untyped-def]
        fed.extend(s.cpe_id for s in samples)
        model_update(samples, now_s)

    selection.model.update = counting  # type: ignore[method-assign]
    samples = [wifi_sample(f"cpe-{n}") for n in range(1000)]
    selection.update(samples, 1.0)
    assert fed == ["cpe-1"]
    for n in (0, 1, 999):
        estimate = selection.estimate(f"cpe-{n}", "wifi", DL, 1.0)
        assert estimate is not None
        assert estimate.capacity_mbps == pytest.approx(1190.0, rel=0.01)


def test_updates_within_a_down_check_interval_consider_only_the_paths_they_report() -> None:
    """The live loop feeds each node's reports as they come, three or four updates a period:
    every path is considered once every down-check interval, and in between only the new paths
    an update is about (a 1,000-CPE xApp spent a sixth of its time considering every path of
    the fleet at every update), or those back from an outage."""
    prober = ScriptedProber({"nr": 340.0, "wifi": 1190.0})
    estimator = ProbeEstimator(prober, ProbeSettings(routine_gap_s=10.0, max_per_cpe=2))
    first = [KpiSample(c, "nr", DL, 1.0, 1.0, throughput_mbps=30.0) for c in ("a", "b")]
    estimator.update(first, 1.0)  # a sweep: both CPEs' NR paths
    assert sorted(r.cpe_id for _, r in prober.started) == ["a", "b"]
    prober.started.clear()
    # b's Wi-Fi reports 0.3 s later, inside the interval: only that path is considered
    estimator.update([KpiSample("b", "wifi", DL, 1.0, 1.0, throughput_mbps=90.0)], 1.3)
    assert [(r.cpe_id, r.access) for _, r in prober.started] == [("b", "wifi")]
    prober.started.clear()
    # a's Wi-Fi was first seen then too but only probed at the next sweep, a second after the
    # last one, whatever that update reports
    estimator._remember([KpiSample("a", "wifi", DL, 1.0, 1.0)], 1.3)
    estimator.update([], 1.9)
    assert prober.started == []
    estimator.update([], 2.0)
    assert [(r.cpe_id, r.access) for _, r in prober.started] == [("a", "wifi")]
    prober.started.clear()
    # A known path due again between sweeps waits for the next one: a's NR, probed at 1.0,
    # is due from 11.0 on (routine_gap_s); reported at 11.3, inside the interval after the
    # sweep at 10.9, it is probed at the sweep of 11.9, not at once.
    estimator.update([], 10.9)
    estimator.update([KpiSample("a", "nr", DL, 11.3, 1.0, throughput_mbps=30.0)], 11.3)
    assert prober.started == []
    estimator.update([], 11.9)  # (b's paths are due by then too)
    assert ("a", "nr") in [(r.cpe_id, r.access) for _, r in prober.started]


def test_a_path_back_from_an_outage_is_probed_between_sweeps() -> None:
    """Between sweeps the reasons that can wait do, but a path back from an outage is what
    a probe is for at once: what it carries now is no guide yet."""
    prober = ScriptedProber({"nr": 340.0})
    estimator = ProbeEstimator(prober, ProbeSettings(routine_gap_s=10.0, min_gap_s=0.0))
    estimator.update([KpiSample("a", "nr", DL, 1.0, 1.0, available=False)], 1.0)  # a sweep
    assert prober.started == []  # reported down: never probed
    estimator.update([KpiSample("a", "nr", DL, 1.3, 0.3, available=True)], 1.3)
    assert [(r.cpe_id, r.access, r.reason) for _, r in prober.started] == [("a", "nr", "recovered")]


def test_said_many_tells_what_estimate_tells_path_by_path() -> None:
    """The probe's word on many paths at once (what fusion reads) is its estimate of each, as
    numbers: probed paths' results, a path found down, none for the others; with no path gone
    quiet or down, and with some."""
    prober = ScriptedProber({"nr": 340.0, "wifi": 1190.0, "lifi": None})
    estimator = ProbeEstimator(prober, ProbeSettings(routine_gap_s=10.0, max_per_cpe=3))
    cpes = ("a", "b")
    paths = [(c, a, DL) for c in cpes for a in ("nr", "wifi", "lifi")]

    def report(now_s: float, carried: dict[str, float]) -> list[KpiSample]:
        return [
            KpiSample(c, a, DL, now_s, 1.0, throughput_mbps=carried.get(a, 50.0))
            for c in cpes
            for a in ("nr", "wifi", "lifi")
        ]

    def agree(now_s: float) -> None:
        expected = [said_of(estimator.estimate(*path, now_s)) for path in paths]
        assert estimator.said_many(paths) == expected
        # and as a table (what fusion reads), a path never seen among them
        unseen = ("z", "nr", DL)
        table = estimator.said_rows([*paths, unseen])
        assert [tuple(row) for row in table.tolist()] == [*expected, NOTHING]

    estimator.update(report(1.0, {}), 1.0)  # every path probed (probe-only: no estimate)
    agree(1.0)
    estimator.update(report(2.0, {}), 2.0)  # the results: NR and Wi-Fi measured, LiFi down
    assert estimator.said_many(paths)[0] != NOTHING
    agree(2.0)
    # b's Wi-Fi weighted and carrying nothing while its other paths carry: silent
    estimator._silence._weights = lambda cpe_id, direction: {"nr": 1, "wifi": 1, "lifi": 1}
    estimator.update(
        [s for s in report(3.0, {}) if (s.cpe_id, s.access) != ("b", "wifi")]
        + [KpiSample("b", "wifi", DL, 3.0, 1.0, throughput_mbps=0.0)],
        3.0,
    )
    assert not estimator._silence.is_quiet()
    agree(3.0)
    # a path its node reports down before any probe of it: no result kept for it
    down = ("c", "nr", DL)
    estimator.update([KpiSample(*down, 4.0, 1.0, available=False)], 4.0)
    assert estimator._results.said(down) is None
    paths.append(down)
    agree(4.0)
    assert estimator.said_many([down])[0] != NOTHING  # (said down)


class ReferenceMemory:
    """What the probe estimator remembered of each sample before its histories were kept in
    rings by place: a deque per path, the paths down and back, when each was first seen."""

    def __init__(self) -> None:
        self.history: dict[tuple[str, str, Direction], deque[KpiSample]] = {}
        self.down: set[tuple[str, str, Direction]] = set()
        self.recovered: set[tuple[str, str, Direction]] = set()
        self.first_seen: dict[tuple[str, str, Direction], float] = {}

    def remember(self, samples: Sequence[KpiSample], now_s: float) -> None:
        for sample in samples:
            path = (sample.cpe_id, sample.access, sample.direction)
            if path not in self.history:
                self.first_seen.setdefault(path, now_s)
                self.history[path] = deque(maxlen=HISTORY_PERIODS)
            self.history[path].append(sample)
            if sample.available is False:
                self.down.add(path)
                self.recovered.discard(path)
            elif path in self.down and (
                sample.available is True or (sample.throughput_mbps or 0.0) > 0
            ):
                self.down.discard(path)
                self.recovered.add(path)


# A step's reports: which of four paths, the link state said and the throughput carried.
_reports = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.sampled_from([None, True, False]),
        st.sampled_from([None, 0.0, 5.0]),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_reports, max_size=16), st.booleans())
def test_what_the_probe_estimator_remembers_of_reports_is_what_it_did_path_by_path(
    steps: list[list[tuple[int, bool | None, float | None]]], as_step: bool
) -> None:
    """Paths reported once or several times a step, said down, back, or neither, for more
    periods than a history holds: the same histories (newest last), paths down and back, and
    first times as the former deque per path."""
    paths = [(c, a, DL) for c in ("a", "b") for a in ("nr", "wifi")]
    estimator = ProbeEstimator(ScriptedProber({}), ProbeSettings())
    reference = ReferenceMemory()
    for n, step in enumerate(steps):
        samples = [
            KpiSample(*paths[p], float(n), 1.0, throughput_mbps=carried, available=state)
            for p, state, carried in step
        ]
        estimator._remember(StepSamples(samples) if as_step else samples, float(n))
        reference.remember(samples, float(n))
        assert estimator._down == reference.down
        assert estimator._recovered == reference.recovered
        assert estimator._first_seen == reference.first_seen
        for path in paths:
            place = estimator._results.slots.get(path)
            kept = () if place is None else estimator._history.history(place)
            assert kept == tuple(reference.history.get(path, ()))
            newest = None if place is None else estimator._history.newest(place)
            assert newest is (kept[-1] if kept else None)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.floats(0.0, 10.0)),  # the newest probe result's time
            st.one_of(st.none(), st.floats(0.0, 10.0)),  # silent since
            st.one_of(st.none(), st.floats(0.0, 10.0)),  # reported down at
        ),
        min_size=1,
        max_size=6,
    )
)
def test_a_fleets_paths_read_as_a_table_are_their_estimates_down_silent_or_neither(
    states: list[tuple[float | None, float | None, float | None]],
) -> None:
    """A path with or without a probe result, silent since before or after it, reported down
    or not, in any mix: ``said_rows`` reads each as ``estimate`` says it, a path never seen
    among them."""
    estimator = ProbeEstimator(ScriptedProber({}), ProbeSettings())
    paths = [(f"cpe-{n}", "lifi", DL) for n in range(len(states))]
    for path, (result_at, silent_at, down_at) in zip(paths, states, strict=True):
        estimator._remember([KpiSample(*path, 0.0, 1.0, throughput_mbps=1.0)], 0.0)
        estimator.said_rows(paths)  # (read between changes, as a fleet's step reads it)
        if result_at is not None:
            estimator._results.put(
                path, said_of(CapacityEstimate(*path, 50.0, 5.0, "probe", result_at))
            )
        if silent_at is not None:
            estimator._silence.mark_silent(path, silent_at)
        if down_at is not None:
            estimator._remember([KpiSample(*path, down_at, 1.0, available=False)], down_at)
    asked = [*paths, ("cpe-never", "nr", DL)]
    expected = [said_of(estimator.estimate(*path, 11.0)) for path in asked]
    assert [tuple(row) for row in estimator.said_rows(asked).tolist()] == expected


@pytest.mark.parametrize("mode", ["fused", "kpi-only", "model-only", "probe-only"])
@pytest.mark.parametrize("directions", [(DL,), tuple(Direction)])
@pytest.mark.parametrize(
    "chosen", [{}, {("cpe-2", DL): "probe-only"}, {("cpe-2", DL): "no such estimator"}]
)
def test_the_advisors_of_every_cpe_at_once_are_each_ones(
    mode: str, directions: tuple[Direction, ...], chosen: dict[tuple[str, Direction], str]
) -> None:
    """A sweep asks whom to consult once for the fleet where no CPE has a choice of its own
    (an unknown one does not count): the same answer, by direction, as each CPE's."""
    selection = EstimatorSelection(
        ScriptedProber({}),
        EstimatorSettings(mode=mode),
        choice=lambda cpe_id, direction: chosen.get((cpe_id, direction)),
        choices=lambda: dict(chosen),
        probe_directions=directions,
    )
    everywhere = selection.probe.advisors_everywhere
    assert everywhere is not None
    told = everywhere()
    if "probe-only" in chosen.values():
        assert told is None  # a choice stands: each CPE is asked
        return
    assert told is not None
    for cpe_id in ("cpe-1", "cpe-2"):
        for direction in Direction:
            each = selection.probe.advisors_for(cpe_id, direction)
            assert told[direction] == each


def test_the_fleet_view_reads_when_each_cpes_access_last_reported() -> None:
    """``last_report_s``: the newest step in which either direction of a CPE's access had a
    report; None for one never heard from."""
    selection = EstimatorSelection(ScriptedProber({}))
    selection.update(
        [
            KpiSample("cpe-1", "nr", DL, 1.0, 1.0, throughput_mbps=300.0),
            KpiSample("cpe-2", "wifi", DL, 1.0, 1.0, throughput_mbps=500.0),
        ],
        1.0,
    )
    selection.update([KpiSample("cpe-1", "nr", Direction.UPLINK, 2.0, 1.0)], 2.0)
    selection.update([KpiSample("cpe-1", "nr", DL, 3.0, 1.0)], 3.5)
    heard = selection.last_report_s
    assert heard.get(("cpe-1", "nr")) == 3.5
    assert heard.get(("cpe-2", "wifi")) == 1.0
    assert heard.get(("cpe-2", "nr")) is None
    assert heard.get(("cpe-9", "wifi")) is None
