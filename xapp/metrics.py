"""What the running xApp exposes on /metrics, beyond the E2 counters of the indication processor.

Label cardinality stays bounded: per-node state and report age for the configured nodes only;
per-access capacity and weight are exported for the first
``first_cpes`` CPEs (in configuration order) and as sums over all CPEs; pushes are counted per
agent role, not per agent.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import reduce
from itertools import repeat
from operator import add, attrgetter, eq
from typing import Protocol

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from core.domain import CapacityEstimate, Cpe, Direction, WeightSet
from xapp.control_loop import StepOutcome
from xapp.e2.node_health import NODE_STATES
from xapp.push_record import StepPushes, pushes_and_failures

_DIRECTION = attrgetter("direction")
_DELAY = attrgetter("delay")
_DECIDED = attrgetter("decided_s")
_APPLIED = attrgetter("applied_s")
# a bucket's bound as Histogram writes it in its ``le`` label ("0.005", "1.0", "+Inf")
_LE: Callable[[float], str] = floatToGoString


class Observed(Protocol):
    """What the collector reads of the service at scrape time."""

    def cpes(self) -> Sequence[Cpe]: ...

    def estimate(
        self, cpe_id: str, access: str, direction: Direction
    ) -> CapacityEstimate | None: ...

    def weights_in_force(self, cpe_id: str, direction: Direction) -> WeightSet | None: ...

    def overrides_by_kind(self) -> dict[str, int]: ...

    def probe_mbit(self) -> float: ...

    def model_inference(self) -> tuple[int, float]: ...

    def exploration(self) -> tuple[int, int]: ...

    def node_health(self) -> list[tuple[str, str, float | None]]: ...

    def agent_counts(self) -> dict[str, int]: ...


class XappMetrics:
    """``observed``: what the state collector reads at scrape time (None: the step's metrics
    alone, as `atsss bench xapp` keeps them)."""

    def __init__(
        self, registry: CollectorRegistry, observed: Observed | None, first_cpes: int = 20
    ):
        self.decision_seconds = Histogram(
            "atsss_decision_seconds",
            "Time of one control step (every CPE and direction)",
            buckets=(0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0),
            registry=registry,
        )
        self.control_delay_seconds = StageHistogram(
            "atsss_control_delay_seconds",
            "From the arrival of the report a push was decided from to the decision (stage "
            "decided) and to the agent's answer that it is in force (stage applied)",
            ("decided", "applied"),
            buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0),
        )
        registry.register(self.control_delay_seconds)
        self.pushes = Counter(
            "atsss_weight_pushes",
            "Weight sets pushed to agents, by the agent's role and the result",
            ["role", "result"],
            registry=registry,
        )
        if observed is not None:
            registry.register(_StateCollector(observed, first_cpes))

    def observe_step(
        self,
        seconds: float,
        outcomes: Sequence[StepOutcome],
        downlink_via_cpe: bool,
        sifted: StepPushes | None = None,
    ) -> None:
        """A control step's time, its pushes and failures counted per agent role (one
        increment per role and result a step: a fleet's step pushes thousands), and each
        push's control delay (observed together). ``sifted``: the outcomes' pushes and
        failures, where the caller has them (``pushes_and_failures``)."""
        self.decision_seconds.observe(seconds)
        pushes, failures = sifted if sifted is not None else pushes_and_failures(outcomes)
        for result, counted in (("applied", pushes), ("failed", failures)):
            if not counted:
                continue
            uplink = sum(map(eq, map(_DIRECTION, counted), repeat(Direction.UPLINK)))
            by_cpe = len(counted) if downlink_via_cpe else uplink
            for role, count in (("cpe", by_cpe), ("proxy", len(counted) - by_cpe)):
                if count:
                    self.pushes.labels(role, result).inc(count)
        delays = list(filter(None, map(_DELAY, pushes)))
        if delays:
            self.control_delay_seconds.observe_many("decided", list(map(_DECIDED, delays)))
            self.control_delay_seconds.observe_many("applied", list(map(_APPLIED, delays)))


class StageHistogram(Collector):
    """A histogram per stage, exposed as ``prometheus_client.Histogram`` with a ``stage``
    label exposes one (each stage's cumulative buckets, count and sum; every stage from the
    start), observed many values at once: ``Histogram.observe`` takes a lock and walks the
    buckets for each value, and a fleet's step observes two values a push, thousands of
    pushes (some 30 ms of a step at 10,000 CPEs). Each value is counted in the first bucket
    whose bound it is at most (a NaN in none, as ``observe``), and added to the sum in turn,
    as one ``observe`` after another adds it."""

    def __init__(
        self, name: str, documentation: str, stages: Sequence[str], buckets: Sequence[float]
    ) -> None:
        self._name, self._documentation = name, documentation
        bounds = sorted(float(b) for b in buckets)
        self._bounds = np.array(bounds if bounds[-1:] == [math.inf] else [*bounds, math.inf])
        self._counts = {stage: np.zeros(len(self._bounds), dtype=np.int64) for stage in stages}
        self._sums = dict.fromkeys(stages, 0.0)
        self._lock = threading.Lock()  # (a scrape reads from another thread)

    def observe_many(self, stage: str, values: Sequence[float]) -> None:
        """``observe`` of each value, in order, in ``stage``."""
        at = np.searchsorted(self._bounds, np.asarray(values, dtype=np.float64), side="left")
        counted = np.bincount(at, minlength=len(self._bounds) + 1)[: len(self._bounds)]
        with self._lock:
            self._counts[stage] += counted
            self._sums[stage] = reduce(add, values, self._sums[stage])

    def describe(self) -> Iterator[HistogramMetricFamily]:
        yield HistogramMetricFamily(self._name, self._documentation, labels=["stage"])

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=["stage"])
        bounds = list(map(_LE, self._bounds.tolist()))
        with self._lock:
            taken = [
                (stage, counts.cumsum().tolist(), self._sums[stage])
                for stage, counts in self._counts.items()
            ]
        for stage, cumulative, total in taken:
            family.add_metric(
                [stage], list(zip(bounds, map(float, cumulative), strict=True)), total
            )
        yield family


class _StateCollector(Collector):
    def __init__(self, observed: Observed, first_cpes: int) -> None:
        self._observed = observed
        self._first = first_cpes

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        capacity = GaugeMetricFamily(
            "atsss_capacity_mbps",
            "Estimated capacity per access, for the first CPEs",
            labels=["cpe", "access", "direction"],
        )
        weight = GaugeMetricFamily(
            "atsss_weight",
            "WRR weight in force per access, for the first CPEs",
            labels=["cpe", "access", "direction"],
        )
        total = GaugeMetricFamily(
            "atsss_capacity_total_mbps",
            "Estimated capacity summed over every CPE, per access",
            labels=["access", "direction"],
        )
        sums: dict[tuple[str, str], float] = {}
        cpes = self._observed.cpes()
        for index, cpe in enumerate(cpes):
            for direction in Direction:
                # only the first CPEs' weights are shown: a fleet's other thousands are not read
                # (for a CPE another replica holds, reading is a round trip to SDL)
                held = (
                    self._observed.weights_in_force(cpe.cpe_id, direction)
                    if index < self._first
                    else None
                )
                for access in cpe.access_names:
                    estimate = self._observed.estimate(cpe.cpe_id, access, direction)
                    if estimate is not None:
                        key = (access, direction.value)
                        sums[key] = sums.get(key, 0.0) + estimate.capacity_mbps
                    if index >= self._first:
                        continue
                    labels = [cpe.cpe_id, access, direction.value]
                    if estimate is not None:
                        capacity.add_metric(labels, estimate.capacity_mbps)
                    if held is not None:
                        weight.add_metric(labels, held.weights.get(access, 0))
        for (access, way), value in sorted(sums.items()):
            total.add_metric([access, way], value)
        overrides = GaugeMetricFamily(
            "atsss_overrides_active", "Operator overrides in force, by kind", labels=["kind"]
        )
        for kind, count in sorted(self._observed.overrides_by_kind().items()):
            overrides.add_metric([kind], count)
        cpe_count = GaugeMetricFamily("atsss_cpes", "CPEs under control")
        cpe_count.add_metric([], len(cpes))
        probe = CounterMetricFamily(
            "atsss_probe_megabits", "Megabits the capacity probes sent (probe traffic)"
        )
        probe.add_metric([], self._observed.probe_mbit())
        count, seconds = self._observed.model_inference()
        inference = CounterMetricFamily(
            "atsss_model_inferences", "Batched model predictions", labels=[]
        )
        inference.add_metric([], count)
        inference_time = CounterMetricFamily(
            "atsss_model_inference_seconds", "Time spent in model predictions"
        )
        inference_time.add_metric([], seconds)
        yield from (capacity, weight, total, overrides, cpe_count, probe, inference, inference_time)
        raises, overshoots = self._observed.exploration()
        explored = CounterMetricFamily(
            "atsss_exploration_raises",
            "Decisions that gave a path known only from below more share than it carried",
        )
        explored.add_metric([], raises)
        overshot = CounterMetricFamily(
            "atsss_exploration_overshoots",
            "Raises the path could not keep up with (each costs at most one period's step)",
        )
        overshot.add_metric([], overshoots)
        yield from (explored, overshot)
        yield from _node_families(self._observed.node_health())
        agents = GaugeMetricFamily(
            "atsss_agents",
            "Agents (by URL; the proxy's per CPE) whose last call succeeded (ok) or that are "
            "failing and left alone for a while",
            labels=["state"],
        )
        for state, count in sorted(self._observed.agent_counts().items()):
            agents.add_metric([state], count)
        yield agents


def _node_families(nodes: list[tuple[str, str, float | None]]) -> Iterator[GaugeMetricFamily]:
    age = GaugeMetricFamily(
        "atsss_e2_node_report_age_seconds",
        "Seconds since the E2 node's last indication (absent: none yet)",
        labels=["node"],
    )
    state = GaugeMetricFamily(
        "atsss_e2_node_state",
        "1 for the state the E2 node's subscription is in, 0 for the others",
        labels=["node", "state"],
    )
    for node, current, seconds in nodes:
        if seconds is not None:
            age.add_metric([node], seconds)
        for name in NODE_STATES:
            state.add_metric([node, name], 1.0 if name == current else 0.0)
    yield from (age, state)
