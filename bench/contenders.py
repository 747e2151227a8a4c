"""The weight setters compared by the closed-loop evaluator.

Each contender is asked, tick by tick, which weights are in force and how much of each path's
capacity is left to the data, and is told what the data then carried:

- ``ControlledContender``: the real ``ControlLoop`` with an estimator and a policy, fed simulated
  KPIs every reporting period; its pushes take effect after the control delay.
- ``OracleContender``: the optimal weights for the true capacities, instantly.
- ``ReportOracleContender``: the same, but only as a loop fed by periodic reports could: at
  each report it knows the true capacities of the period's last tick, and its weights land
  after the control delay. Perfect knowledge without foresight: where capacities only step
  (links going and coming back) no loop fed by the reports does better without predicting the
  steps; where they jitter, hedging against the next period (the robust policy) beats its
  exact optimum.
- ``StaticContender``: fixed weights (round robin 1-1-1, the kernel's default).
- ``PaperProbeContender``: the method of Navarro-Ortiz et al. (Sensors 2024): iperf3 probes on
  every path (10 TCP flows, 5 s of every 10 s) that take their share from the data while they
  run, results rounded to 10 Mbit/s, proportional weights updated every 12 s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from bench.simulated import SimulatedKpis, SimulatedProber
from core.domain import Direction, KpiSample, WeightSet
from core.scenario.model import Scenario
from core.scenario.truth import Truth
from xapp.adapters.memory_store import MemoryStateStore
from xapp.control_loop import ControlLoop
from xapp.policy.baselines import proportional_weights
from xapp.policy.exploration import Exploration
from xapp.policy.hysteresis import Hysteresis
from xapp.policy.optimal import optimal_weights_batch
from xapp.policy.weight_policy import WeightPolicy
from xapp.ports import CapacityEstimator

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_EPS = 1e-9


class Contender(Protocol):
    name: str
    pushes: int

    def weights(self, tick: int, time_s: float) -> IntArray: ...

    def data_share(self, tick: int) -> FloatArray | float:
        """What each path (C, A), or all of them, leaves to the data at this tick."""
        ...

    def observe(self, tick: int, carried_mbps: FloatArray) -> None: ...


def kernel_default_weights(truth: Truth) -> IntArray:
    """Weight 1 on every path: what the WRR kernel does for subflows no rule matches."""
    return truth.has_path.astype(np.int64)


class StaticContender:
    def __init__(self, name: str, weights: IntArray) -> None:
        self.name = name
        self.pushes = 0
        self._weights = weights

    def weights(self, tick: int, time_s: float) -> IntArray:
        return self._weights

    def data_share(self, tick: int) -> float:
        return 1.0

    def observe(self, tick: int, carried_mbps: FloatArray) -> None:
        pass


class OracleContender:
    def __init__(self, truth: Truth, in_round: BoolArray, max_weight: int) -> None:
        self.name = "oracle"
        self.pushes = 0
        self._truth = truth
        self._in_round = in_round
        self._max_weight = max_weight
        self._last_capacity: FloatArray | None = None
        self._weights = kernel_default_weights(truth)

    def weights(self, tick: int, time_s: float) -> IntArray:
        capacity = np.where(self._in_round[tick], self._truth.usable_mbps[tick], 0.0)
        if self._last_capacity is None or not np.array_equal(capacity, self._last_capacity):
            new = optimal_weights_batch(capacity, self._max_weight)
            self.pushes += int(np.any(new != self._weights, axis=1).sum())
            self._weights = new
            self._last_capacity = capacity
        return self._weights

    def data_share(self, tick: int) -> float:
        return 1.0

    def observe(self, tick: int, carried_mbps: FloatArray) -> None:
        pass


class ReportOracleContender:
    def __init__(
        self, truth: Truth, reporting_period_s: float, control_delay_s: float, max_weight: int
    ) -> None:
        self.name = "report-oracle"
        self.pushes = 0
        self._truth = truth
        self._period_s = reporting_period_s
        self._next_report_s = reporting_period_s
        self._max_weight = max_weight
        self._weights = _DelayedWeights(kernel_default_weights(truth), control_delay_s)
        self._decided = self._weights.current.copy()

    def weights(self, tick: int, time_s: float) -> IntArray:
        if time_s + _EPS >= self._next_report_s:
            self._next_report_s += self._period_s
            # The report covers the period that ended now; its last tick is the one before.
            capacity = self._truth.usable_mbps[max(tick - 1, 0)]
            new = optimal_weights_batch(capacity, self._max_weight)
            for c in np.flatnonzero(np.any(new != self._decided, axis=1)):
                self.pushes += 1
                self._weights.schedule(time_s, int(c), new[c])
            self._decided = new
        return self._weights.apply_due(time_s)

    def data_share(self, tick: int) -> float:
        return 1.0

    def observe(self, tick: int, carried_mbps: FloatArray) -> None:
        pass


@dataclass(frozen=True)
class _Pending:
    apply_at_s: float
    cpe_index: int
    weights: IntArray


class _DelayedWeights:
    """Weights in force per CPE, with pushes that land after the control delay."""

    def __init__(self, initial: IntArray, delay_s: float) -> None:
        self.current = initial.copy()
        self.delay_s = delay_s
        self._pending: deque[_Pending] = deque()

    def schedule(self, now_s: float, cpe_index: int, weights: IntArray) -> None:
        self._pending.append(_Pending(now_s + self.delay_s, cpe_index, weights))

    def apply_due(self, now_s: float) -> IntArray:
        while self._pending and self._pending[0].apply_at_s <= now_s + _EPS:
            due = self._pending.popleft()
            self.current[due.cpe_index] = due.weights
        return self.current


class ControlledContender:
    """The control loop under test, wired to simulated KPIs and a delayed weight sink."""

    def __init__(
        self,
        name: str,
        scenario: Scenario,
        truth: Truth,
        *,
        direction: Direction,
        estimator: CapacityEstimator,
        policy: WeightPolicy,
        hysteresis: Hysteresis,
        reporting_period_s: float,
        control_delay_s: float,
        kpis: SimulatedKpis,
        prober: SimulatedProber | None = None,
        store: MemoryStateStore | None = None,
        initial_weights: Mapping[str, int] | None = None,
        exploration: Exploration | None = None,
    ) -> None:
        self.name = name
        self.exploration = exploration
        self.pushes = 0
        self.estimator = estimator
        self.prober = prober
        self._kpis = kpis
        self._truth = truth
        self._direction = direction
        self._period_s = reporting_period_s
        self._next_report_s = reporting_period_s
        self._now_s = 0.0
        self._cpe_index = {cpe_id: i for i, cpe_id in enumerate(truth.cpe_ids)}
        self._access_index = {access: a for a, access in enumerate(truth.accesses)}
        self._carried_sum = np.zeros(truth.has_path.shape)
        self._capacity_sum = np.zeros(truth.has_path.shape)
        self._carried_ticks = 0
        self._last_tick = 0
        start = kernel_default_weights(truth)
        store = store or MemoryStateStore()
        if initial_weights is not None:
            row = np.array([initial_weights.get(a, 0) for a in truth.accesses], dtype=np.int64)
            start = np.where(truth.has_path, row[np.newaxis, :], 0)
            for entry in scenario.cpes:
                store.save_weights(
                    WeightSet(
                        cpe_id=entry.cpe.cpe_id,
                        direction=direction,
                        weights={a: initial_weights.get(a, 0) for a in entry.cpe.access_names},
                        mode=entry.rule.mode,
                        sequence=1,
                        reason="initial weights",
                    )
                )
        self._weights = _DelayedWeights(start, control_delay_s)
        self.loop = ControlLoop(
            cpes=[entry.cpe for entry in scenario.cpes],
            directions=[direction],
            source=self,
            estimator=estimator,
            policy=policy,
            sink=self,
            store=store,
            hysteresis=hysteresis,
            rules={entry.cpe.cpe_id: entry.rule for entry in scenario.cpes},
            exploration=exploration,
        )

    def weights(self, tick: int, time_s: float) -> IntArray:
        if time_s + _EPS >= self._next_report_s:
            self._now_s = time_s
            # The report covers the period that ended now: its last tick is the one before,
            # not this one (what changes at this very tick is the next report's news).
            self._last_tick = max(tick - 1, 0)
            self.loop.step(time_s)
            self._next_report_s += self._period_s
        return self._weights.apply_due(time_s)

    def data_share(self, tick: int) -> FloatArray | float:
        if self.prober is None:
            return 1.0
        return self.prober.data_share(float(self._truth.times_s[tick]))

    @property
    def probe_mbit(self) -> float | None:
        return None if self.prober is None else self.prober.probe_mbit

    def observe(self, tick: int, carried_mbps: FloatArray) -> None:
        self._carried_sum += carried_mbps
        self._capacity_sum += self._truth.usable_mbps[tick]
        self._carried_ticks += 1

    def access_events(self, time_s: float, events: list[tuple[int, int, bool]]) -> None:
        """The agents' word of carriers lost or back: the loop decides for those CPEs now."""
        self._now_s = time_s
        cpe_ids = set()
        for c, a, up in events:
            cpe_id = self._truth.cpe_ids[c]
            self.loop.access_event(cpe_id, self._truth.accesses[a], up, time_s)
            cpe_ids.add(cpe_id)
        self.loop.decide_now(cpe_ids, time_s)

    # KpiSource: what the access nodes would report for the period that just ended.
    def poll(self, now_s: float) -> Sequence[KpiSample]:
        ticks = max(self._carried_ticks, 1)
        carried, capacity = self._carried_sum / ticks, self._capacity_sum / ticks
        self._carried_sum = np.zeros_like(self._carried_sum)
        self._capacity_sum = np.zeros_like(self._capacity_sum)
        self._carried_ticks = 0
        return self._kpis.samples(self._last_tick, now_s, self._period_s, capacity, carried)

    # WeightSink: the push reaches the kernel after the control delay.
    def push(self, weight_set: WeightSet) -> None:
        self.pushes += 1
        c = self._cpe_index[weight_set.cpe_id]
        row = np.array(
            [weight_set.weights.get(access, 0) for access in self._truth.accesses], dtype=np.int64
        )
        self._weights.schedule(self._now_s, c, row)


@dataclass(frozen=True)
class ProbeMethodSettings:
    """The paper's dynamic experiment (section 6.5)."""

    period_s: float = 10.0
    duration_s: float = 5.0
    parallel_flows: int = 10
    update_period_s: float = 12.0
    round_to_mbps: float = 10.0
    max_weight: int = 100


class PaperProbeContender:
    def __init__(self, truth: Truth, settings: ProbeMethodSettings, control_delay_s: float) -> None:
        self.name = "paper-probe"
        self.pushes = 0
        self.settings = settings
        self._truth = truth
        # Each path is shared fairly by flows: the probe's N flows against the data's one.
        self._probe_share = settings.parallel_flows / (settings.parallel_flows + 1)
        self._measured: FloatArray | None = None
        self._next_probe_end_s = settings.duration_s
        self._next_update_s = settings.update_period_s
        self._weights = _DelayedWeights(kernel_default_weights(truth), control_delay_s)
        self.probe_mbit = 0.0

    def _probing(self, time_s: float) -> bool:
        return (time_s % self.settings.period_s) + _EPS < self.settings.duration_s

    def weights(self, tick: int, time_s: float) -> IntArray:
        s = self.settings
        if time_s + _EPS >= self._next_probe_end_s:
            first = self._truth.tick_at(self._next_probe_end_s - s.duration_s)
            window = self._truth.usable_mbps[first:tick]
            achieved = window.mean(axis=0) * self._probe_share
            self._measured = np.round(achieved / s.round_to_mbps) * s.round_to_mbps
            self._next_probe_end_s += s.period_s
        if time_s + _EPS >= self._next_update_s:
            self._next_update_s += s.update_period_s
            if self._measured is not None:
                for c, row in enumerate(self._measured):
                    if row.max() <= 0:
                        continue
                    new = np.array(proportional_weights(row.tolist(), s.max_weight))
                    if not np.array_equal(new, self._weights.current[c]):
                        self.pushes += 1
                        self._weights.schedule(time_s, c, new)
        return self._weights.apply_due(time_s)

    def data_share(self, tick: int) -> FloatArray | float:
        probing = self._probing(float(self._truth.times_s[tick]))
        if probing:
            self.probe_mbit += float(
                self._truth.usable_mbps[tick].sum() * self._probe_share * self._truth.step_s
            )
        return 1.0 - self._probe_share if probing else 1.0

    def observe(self, tick: int, carried_mbps: FloatArray) -> None:
        pass
