"""The probe planner's sweep judges a fleet's paths at once (``ProbeEstimator._reasons``): it
must start exactly the probes the former path-by-path planner started, for the same reasons
and in the same order. That planner is kept here as the reference (its squares written as
products, the one deliberate change: numpy squares by multiplying, CPython by the C library's
pow, which may differ in the last bit)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from core.domain import CapacityEstimate, Direction, KpiSample, ProbeOutcome, ProbeRequest
from xapp.estimators.probe import REASONS, ProbeEstimator, ProbeSettings
from xapp.estimators.said import said_of
from xapp.ports import CapacityEstimator

Path = tuple[str, str, Direction]
ACCESSES = ("nr", "wifi", "lifi")


class ReferencePlanner(ProbeEstimator):
    """The planner as it was: every path's reason worked out alone."""

    def _plan(self, now_s: float, paths: object) -> None:
        per_cpe = Counter(path[0] for path in self._in_flight)
        candidates: list[tuple[int, Path, str]] = []
        for path in paths:  # type: ignore[attr-defined]
            if path in self._in_flight or path in self._down:
                continue
            if (path[0], path[1]) in self._carrier_word:
                continue
            advisors = self.advisors_for(path[0], path[2])
            if advisors is None:
                continue
            if path not in self._headroom_known and self._seen_back(
                path, advisors, -math.inf, now_s
            ):
                self._headroom_known.add(path)
            silent_since = self._silence.silent_since(path)
            silent = silent_since is not None and not self._seen_back(
                path, advisors, silent_since, now_s
            )
            if silent and path in self._headroom_known:
                continue
            if silent:
                gap = self.settings.down_check_s
            elif advisors:
                gap = self.settings.min_gap_s
            else:
                gap = self.settings.routine_gap_s
            last = self._last_start.get(path)
            if last is not None and now_s - last < gap:
                continue
            reason = "down-check" if silent else self._reason(path, advisors, now_s)
            if reason is not None:
                candidates.append((REASONS.index(reason), path, reason))
        for _, path, reason in sorted(candidates):
            if per_cpe[path[0]] >= self.settings.max_per_cpe:
                continue
            per_cpe[path[0]] += 1
            self._start(path, reason, now_s)

    def _seen_back(
        self, path: Path, advisors: Sequence[CapacityEstimator], since_s: float, now_s: float
    ) -> bool:
        return any(
            e is not None and e.shows_path_usable_since(since_s)
            for e in (advisor.estimate(*path, now_s) for advisor in advisors)
        )

    def _reason(
        self, path: Path, advisors: Sequence[CapacityEstimator], now_s: float
    ) -> str | None:
        if path in self._recovered:
            if path not in self._headroom_known:
                return "recovered"
            self._recovered.discard(path)
        exact = []
        for advisor in advisors:
            e = advisor.estimate(*path, now_s)
            if (
                e is not None
                and e.available
                and not e.lower_bound
                and max(0.0, now_s - e.measured_at_s) <= self.settings.fresh_s
            ):
                exact.append(e)
        if not exact:
            return "no-estimate"
        if len(exact) > 1:
            low = min(exact, key=lambda e: e.capacity_mbps)
            high = max(exact, key=lambda e: e.capacity_mbps)
            gap = high.capacity_mbps - low.capacity_mbps
            joint_sigma = math.hypot(low.stddev_mbps, high.stddev_mbps)
            if gap > self.settings.disagree_ratio * high.capacity_mbps and gap > 2 * joint_sigma:
                return "disagree"
        squares = [max(e.stddev_mbps, 1e-3) * max(e.stddev_mbps, 1e-3) for e in exact]
        precision = sum(1.0 / square for square in squares)
        combined_sigma = math.sqrt(1.0 / precision)
        combined = sum(e.capacity_mbps / s for e, s in zip(exact, squares, strict=True)) / precision
        if combined > 0 and combined_sigma / combined > self.settings.uncertain_ratio:
            return "uncertain"
        max_age = self.settings.max_age_s
        if max_age is not None:
            since = self._last_start.get(path, self._first_seen.get(path, now_s))
            if now_s - since >= max_age:
                return "periodic"
        return None


class Advisor:
    """An estimator answering from a table the test rewrites every period."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.answers: dict[Path, CapacityEstimate] = {}

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        pass

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        return self.answers.get((cpe_id, access, direction))


class Recording:
    """A prober that starts nothing but a record; every probe answers at once, some failing."""

    def __init__(self) -> None:
        self.started: list[tuple[float, str, str, Direction, str]] = []
        self._asked: list[ProbeRequest] = []

    def start(self, request: ProbeRequest, now_s: float) -> None:
        self.started.append(
            (now_s, request.cpe_id, request.access, request.direction, request.reason)
        )
        self._asked.append(request)

    def collect(self, now_s: float) -> Sequence[ProbeOutcome]:
        asked, self._asked = self._asked, []
        out = []
        for i, r in enumerate(asked):
            if i % 3 == 0:
                out.append(ProbeOutcome(r, now_s - 1, now_s, None, 0.0, error="refused"))
            elif i % 3 == 1:
                out.append(ProbeOutcome(r, now_s - 1, now_s, None, 0.0, path_down=True))
            else:
                out.append(ProbeOutcome(r, now_s - 1, now_s, 80.0, 10.0))
        return out


# What an advisor says of a path in a period: nothing, down, a lower bound, or an exact
# estimate (capacity, σ, age); round and awkward values both.
capacities = st.one_of(st.sampled_from([0.0, 1.0, 10.0, 100.0]), st.floats(0, 2000))
sigmas = st.one_of(st.sampled_from([0.0, 1e-4, 1.0, 30.0]), st.floats(0, 500))
words = st.one_of(
    st.none(),
    st.tuples(st.just("down"), st.just(0.0), st.just(0.0), st.sampled_from([0.0, 2.0])),
    st.tuples(
        st.sampled_from(["bound", "exact", "exact"]),
        capacities,
        sigmas,
        st.sampled_from([0.0, 1.0, 3.0, 3.5, 8.0]),
    ),
)
throughputs = st.one_of(st.none(), st.sampled_from([0.0, 0.0, 5.0, 50.0]))
availability = st.sampled_from([None, None, None, True, False])


def _estimate(path: Path, word: tuple[str, float, float, float], now_s: float) -> CapacityEstimate:
    kind, capacity, sigma, age = word
    return CapacityEstimate(
        *path,
        capacity,
        sigma,
        "advisor",
        now_s - age,
        available=kind != "down",
        lower_bound=kind == "bound",
    )


@settings(max_examples=150, deadline=None)
@given(
    cpes=st.integers(1, 4),
    periods=st.lists(
        st.tuples(
            st.lists(st.tuples(words, words), min_size=24, max_size=24),
            st.lists(st.tuples(throughputs, availability), min_size=24, max_size=24),
            st.lists(st.booleans(), min_size=12, max_size=12),
        ),
        min_size=2,
        max_size=6,
    ),
    max_age_s=st.sampled_from([None, 2.0]),
    max_per_cpe=st.sampled_from([1, 2]),
    probe_only=st.booleans(),
    advising=st.sampled_from(["per CPE", "downlink only", "everywhere"]),
)
def test_the_sweep_starts_the_probes_the_path_by_path_planner_started(
    cpes: int,
    periods: list[
        tuple[list[tuple[object, object]], list[tuple[float | None, bool | None]], list[bool]]
    ],
    max_age_s: float | None,
    max_per_cpe: int,
    probe_only: bool,
    advising: str,
) -> None:
    """The reference planner asks each CPE's advisors; the sweep too, and again told them for
    every CPE at once by direction (``advisors_everywhere``: where no CPE has its own)."""
    probe_settings = ProbeSettings(
        max_age_s=max_age_s, max_per_cpe=max_per_cpe, min_gap_s=2.0, routine_gap_s=2.0
    )
    paths = [
        (f"cpe-{c}", access, direction)
        for c in range(cpes)
        for access in ACCESSES
        for direction in Direction
    ]
    runs = []
    for planner, at_once in (
        (ReferencePlanner, False),
        (ProbeEstimator, False),
        (ProbeEstimator, True),
    ):
        kpi, model = Advisor("kpi"), Advisor("model")

        def advisors_for(
            cpe_id: str, direction: Direction, both: tuple[Advisor, Advisor] = (kpi, model)
        ) -> Sequence[Advisor] | None:
            if probe_only:
                return ()
            uplink = direction == Direction.UPLINK
            if advising == "per CPE":
                return None if cpe_id == "cpe-3" and uplink else both
            return None if uplink and advising == "downlink only" else both

        def advisors_everywhere() -> dict[Direction, Sequence[Advisor] | None] | None:
            if advising == "per CPE":
                return None
            return {d: advisors_for("any", d) for d in Direction}

        prober = Recording()
        estimator = planner(
            prober,
            probe_settings,
            advisors_for=advisors_for,
            advisors_everywhere=advisors_everywhere if at_once else None,
        )
        for t, (said, reported, carriers) in enumerate(periods, start=1):
            now_s = float(t)
            for path, (kpi_word, model_word) in zip(paths, said, strict=False):
                for advisor, word in ((kpi, kpi_word), (model, model_word)):
                    if word is None:
                        advisor.answers.pop(path, None)
                    else:
                        advisor.answers[path] = _estimate(path, word, now_s)  # type: ignore[arg-type]
            for (cpe_id, access, _), gone in zip(paths[::2], carriers, strict=False):
                if gone and t % 2:
                    estimator.carrier_changed(cpe_id, access, t % 4 == 1, now_s - 0.5)
            samples = [
                KpiSample(*path, now_s, 1.0, throughput_mbps=carried, available=up)
                for path, (carried, up) in zip(paths, reported, strict=False)
                if carried is not None or up is not None
            ]
            estimator.update(samples, now_s)
            # its own estimates as numbers (what fusion reads) are its estimates
            assert estimator.said_many(paths) == [
                said_of(estimator.estimate(*path, now_s)) for path in paths
            ]
        runs.append(
            (
                prober.started,
                sorted(estimator._recovered),
                sorted(estimator._headroom_known),
                dict(estimator.stats.by_reason),
            )
        )
    assert runs[0] == runs[1] == runs[2]


def test_the_sweep_gives_every_reason() -> None:
    """The generated fleets above reach every reason (so the comparison means something)."""
    prober = Recording()
    kpi, model = Advisor("kpi"), Advisor("model")
    estimator = ProbeEstimator(
        prober, ProbeSettings(max_age_s=1.0, max_per_cpe=6), advisors_for=lambda c, d: (kpi, model)
    )
    dl = Direction.DOWNLINK
    now_s = 1.0
    kpi.answers = {
        ("a", "nr", dl): _estimate(("a", "nr", dl), ("exact", 100.0, 1.0, 0.0), now_s),
        ("a", "wifi", dl): _estimate(("a", "wifi", dl), ("exact", 100.0, 60.0, 0.0), now_s),
        ("a", "lifi", dl): _estimate(("a", "lifi", dl), ("exact", 100.0, 1.0, 0.0), now_s),
        # apart and uncertain both: disagreeing comes first
        ("c", "nr", dl): _estimate(("c", "nr", dl), ("exact", 10.0, 75.0, 0.0), now_s),
    }
    model.answers = {
        ("c", "nr", dl): _estimate(("c", "nr", dl), ("exact", 300.0, 75.0, 0.0), now_s),
        ("a", "nr", dl): _estimate(("a", "nr", dl), ("exact", 300.0, 1.0, 0.0), now_s),
        ("a", "lifi", dl): _estimate(("a", "lifi", dl), ("exact", 101.0, 1.0, 0.0), now_s),
        ("b", "nr", dl): _estimate(("b", "nr", dl), ("bound", 10.0, 1.0, 0.0), now_s),
    }
    samples = [
        KpiSample(c, a, dl, now_s, 1.0, throughput_mbps=1.0)
        for c, a in [("a", "nr"), ("a", "wifi"), ("a", "lifi"), ("b", "nr"), ("c", "nr")]
    ]
    estimator.update(samples, now_s)
    estimator.update([], 2.0)  # a second sweep: the exact, agreeing LiFi is now due ("periodic")
    reasons = {(r[1], r[2]): r[4] for r in prober.started}
    assert reasons == {
        ("a", "nr"): "disagree",
        ("a", "wifi"): "uncertain",
        ("b", "nr"): "no-estimate",
        ("a", "lifi"): "periodic",
        ("c", "nr"): "disagree",
    }
