"""Closed-loop evaluation in simulated time: estimator + policy against baselines on a scenario.

Every contender runs over the same ground truth on the same time grid. Reported per contender:
efficiency (data carried over the sum of the path capacities, both integrated over time and all
CPEs), weight pushes, and the time to re-converge after each step change of the truth (reaching
95 % of what the oracle carries at that moment).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from bench.agent_reaction import AgentReaction
from bench.connection import DEFAULT_DETECTION_S, subflows_in_round
from bench.contenders import (
    Contender,
    ControlledContender,
    OracleContender,
    PaperProbeContender,
    ProbeMethodSettings,
    ReportOracleContender,
    StaticContender,
    kernel_default_weights,
)
from bench.simulated import SimulatedKpis, SimulatedProber
from core.domain import Direction
from core.fluid import carried_mbps
from core.scenario.model import Scenario
from core.scenario.truth import Truth
from e2sim.kpis import measured_radio
from e2sim.nonideal import NonIdealities
from e2sim.world import scenario_truth
from xapp.adapters.memory_store import MemoryStateStore
from xapp.estimators.oracle import OracleNoiseEstimator
from xapp.estimators.probe import ProbeSettings
from xapp.estimators.selection import MODES, EstimatorSelection, EstimatorSettings
from xapp.policy.exploration import Exploration, ExplorationConfig
from xapp.policy.hysteresis import Hysteresis
from xapp.policy.weight_policy import PolicyConfig, make_policy
from xapp.ports import CapacityEstimator

FloatArray = npt.NDArray[np.float64]

CONTENDERS = ("optimal", "proportional", "rr", "paper-probe", "report-oracle", "oracle")
CONTROLLED = ("optimal", "proportional")  # the contenders that run the control loop
ESTIMATORS = ("oracle-noise", *MODES)

# A step change: the CPE's total capacity moves by this fraction within one tick, or a link
# goes up or down. Re-converged: carrying this fraction of what the oracle carries.
STEP_FRACTION = 0.05
RECONVERGED_FRACTION = 0.95


@dataclass(frozen=True)
class LoopSettings:
    direction: Direction = Direction.DOWNLINK
    step_s: float = 0.1
    reporting_period_s: float = 1.0
    control_delay_s: float = 0.1
    detection_s: float = DEFAULT_DETECTION_S
    estimators: tuple[str, ...] = ("oracle-noise",)
    estimator_noise: float = 0.05
    probe_settings: ProbeSettings = field(default_factory=ProbeSettings)
    min_gain: float = Hysteresis.min_gain
    max_pushes_per_s: float | None = Hysteresis.max_pushes_per_s
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    probe: ProbeMethodSettings = field(default_factory=ProbeMethodSettings)
    contenders: tuple[str, ...] = CONTENDERS
    trace_cpe: int = 0
    # Weights in force at the start for the controlled contenders (default: the kernel's 1 each)
    initial_weights: dict[str, int] | None = None
    # The CPE agents' local reaction to carrier loss (bench/agent_reaction.py); None: none.
    agent_reaction_s: float | None = None
    # What the simulated nodes do that the KPI formulas leave out (e2sim/nonideal.py)
    nonideal: NonIdealities = field(default_factory=NonIdealities)
    # How paths known only from below get more share (xapp/policy/exploration.py); None: never
    exploration: ExplorationConfig | None = field(default_factory=ExplorationConfig)

    def __post_init__(self) -> None:
        if self.step_s <= 0:
            raise ValueError(f"step_s must be > 0, got {self.step_s}")
        if self.reporting_period_s < self.step_s:
            raise ValueError(
                f"reporting_period_s ({self.reporting_period_s}) must be ≥ step_s ({self.step_s})"
            )
        if self.control_delay_s < 0:
            raise ValueError(f"control_delay_s must be ≥ 0, got {self.control_delay_s}")
        unknown = [c for c in self.contenders if c not in CONTENDERS]
        if unknown:
            raise ValueError(
                f"unknown policy {', '.join(unknown)}; expected some of {', '.join(CONTENDERS)}"
            )
        unknown = [e for e in self.estimators if e not in ESTIMATORS]
        if unknown or not self.estimators:
            raise ValueError(
                f"unknown estimator {', '.join(unknown)!r}; expected some of "
                f"{', '.join(ESTIMATORS)}"
            )

    def contender_names(self) -> list[str]:
        """Controlled contenders once per estimator ("optimal/fused") when several are asked."""
        names = []
        for contender in self.contenders:
            if contender in CONTROLLED and len(self.estimators) > 1:
                names += [f"{contender}/{e}" for e in self.estimators]
            else:
                names.append(contender)
        return names


@dataclass(frozen=True)
class Reconvergence:
    steps: int
    mean_s: float | None
    max_s: float | None
    not_reconverged: int


@dataclass(frozen=True)
class ContenderResult:
    name: str
    efficiency: float
    mean_aggregate_mbps: float
    weight_pushes: int
    reconvergence: Reconvergence
    final_weights: dict[str, int]
    probe_traffic_fraction: float | None = None
    # Paths known only from below (xapp/policy/exploration.py): raises shown to the policy, and
    # those the path could not keep up with (each cost at most one period's step)
    exploration_raises: int | None = None
    exploration_overshoots: int | None = None


@dataclass(frozen=True)
class Trace:
    """Per-tick record of one CPE, for plots."""

    cpe_id: str
    accesses: tuple[str, ...]
    times_s: FloatArray
    capacity_mbps: FloatArray  # (T, A), 0 while a link is down
    carried_mbps: dict[str, FloatArray]  # contender → (T, A)
    weights: dict[str, npt.NDArray[np.int64]]  # contender → (T, A)


@dataclass(frozen=True)
class LoopReport:
    scenario: str
    direction: Direction
    duration_s: float
    cpes: int
    mean_capacity_mbps: float
    results: list[ContenderResult]
    trace: Trace
    wall_s: float

    def result(self, name: str) -> ContenderResult:
        return next(r for r in self.results if r.name == name)

    def as_dict(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "direction": self.direction.value,
            "duration_s": self.duration_s,
            "cpes": self.cpes,
            "mean_capacity_mbps": round(self.mean_capacity_mbps, 3),
            "wall_s": round(self.wall_s, 3),
            "results": {
                r.name: {
                    "efficiency": round(r.efficiency, 4),
                    "mean_aggregate_mbps": round(r.mean_aggregate_mbps, 3),
                    "weight_pushes": r.weight_pushes,
                    "reconvergence": {
                        "steps": r.reconvergence.steps,
                        "mean_s": _rounded(r.reconvergence.mean_s),
                        "max_s": _rounded(r.reconvergence.max_s),
                        "not_reconverged": r.reconvergence.not_reconverged,
                    },
                    "final_weights": r.final_weights,
                    "probe_traffic_fraction": _rounded(r.probe_traffic_fraction, 4),
                    "exploration": None
                    if r.exploration_raises is None
                    else {"raises": r.exploration_raises, "overshoots": r.exploration_overshoots},
                }
                for r in self.results
            },
        }


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


Progress = Callable[[str], None]


def evaluate(
    scenario: Scenario, settings: LoopSettings | None = None, progress: Progress | None = None
) -> LoopReport:
    settings = settings or LoopSettings()
    started = time.perf_counter()
    truth = scenario_truth(scenario, settings.direction, settings.step_s)
    in_round = subflows_in_round(truth, settings.detection_s)
    capacity = truth.usable_mbps
    names = settings.contender_names()
    if "oracle" not in names:
        names.append("oracle")  # re-convergence is measured against it
    runs: dict[str, _Run] = {}
    for name in names:
        if progress is not None:
            progress(f"{scenario.name}: running {name}")
        contender = _make_contender(name, scenario, truth, in_round, settings)
        runs[name] = _simulate(contender, truth, in_round, settings.trace_cpe)

    steps = _step_changes(truth)
    oracle_aggregate = runs["oracle"].aggregate_mbps
    total_capacity = float(capacity.sum())
    results = []
    for name in settings.contender_names():
        run = runs[name]
        probe_fraction = None
        probe_mbit = getattr(run.contender, "probe_mbit", None)
        if probe_mbit is not None:
            carried_mbit = float(run.aggregate_mbps.sum() * truth.step_s)
            probe_fraction = probe_mbit / carried_mbit if carried_mbit else None
        explored = getattr(run.contender, "exploration", None)
        results.append(
            ContenderResult(
                name=name,
                efficiency=float(run.aggregate_mbps.sum()) / total_capacity
                if total_capacity
                else 0.0,
                mean_aggregate_mbps=float(run.aggregate_mbps.mean()),
                weight_pushes=run.contender.pushes,
                reconvergence=_reconvergence(run.aggregate_mbps, oracle_aggregate, steps, truth),
                final_weights=dict(
                    zip(truth.accesses, run.trace_weights[-1].tolist(), strict=True)
                ),
                probe_traffic_fraction=probe_fraction,
                exploration_raises=None if explored is None else explored.stats.raises,
                exploration_overshoots=None if explored is None else explored.stats.overshoots,
            )
        )
    c = settings.trace_cpe
    trace = Trace(
        cpe_id=truth.cpe_ids[c],
        accesses=truth.accesses,
        times_s=truth.times_s,
        capacity_mbps=capacity[:, c, :],
        carried_mbps={n: runs[n].trace_carried for n in settings.contender_names()},
        weights={n: runs[n].trace_weights for n in settings.contender_names()},
    )
    return LoopReport(
        scenario=scenario.name,
        direction=settings.direction,
        duration_s=float(len(truth.times_s) * truth.step_s),
        cpes=len(truth.cpe_ids),
        mean_capacity_mbps=float(capacity.sum(axis=2).mean()),
        results=results,
        trace=trace,
        wall_s=time.perf_counter() - started,
    )


def _make_contender(
    name: str,
    scenario: Scenario,
    truth: Truth,
    in_round: npt.NDArray[np.bool_],
    settings: LoopSettings,
) -> Contender:
    if name == "oracle":
        return OracleContender(truth, in_round, settings.policy.max_weight)
    if name == "report-oracle":
        return ReportOracleContender(
            truth, settings.reporting_period_s, settings.control_delay_s, settings.policy.max_weight
        )
    if name == "rr":
        return StaticContender("rr", kernel_default_weights(truth))
    if name == "paper-probe":
        return PaperProbeContender(truth, settings.probe, settings.control_delay_s)
    policy, _, estimator_name = name.partition("/")
    store = MemoryStateStore()
    estimator, prober = _make_estimator(
        estimator_name or settings.estimators[0], settings, truth, scenario.seed, store
    )
    controlled = ControlledContender(
        name,
        scenario,
        truth,
        direction=settings.direction,
        estimator=estimator,
        policy=make_policy(policy, _policy_config(settings)),
        hysteresis=Hysteresis(settings.min_gain, settings.max_pushes_per_s),
        reporting_period_s=settings.reporting_period_s,
        control_delay_s=settings.control_delay_s,
        kpis=SimulatedKpis(
            truth,
            settings.direction,
            scenario.seed,
            measured_radio(scenario, truth.times_s),
            settings.nonideal,
            scenario.node_measurements,
        ),
        prober=prober,
        store=store,
        initial_weights=settings.initial_weights,
        exploration=None if settings.exploration is None else Exploration(settings.exploration),
    )
    if settings.agent_reaction_s is None:
        return controlled
    return AgentReaction(controlled, truth, settings.agent_reaction_s)


def _policy_config(settings: LoopSettings) -> PolicyConfig:
    """Where the agents react to carrier loss, a dark weighted path stalls the round only for
    their reaction time, not for MPTCP's own detection."""
    if settings.agent_reaction_s is None:
        return settings.policy
    return replace(settings.policy, outage_stall_s=settings.agent_reaction_s)


def _make_estimator(
    name: str, settings: LoopSettings, truth: Truth, seed: int, store: MemoryStateStore
) -> tuple[CapacityEstimator, SimulatedProber | None]:
    if name == "oracle-noise":
        return OracleNoiseEstimator(truth, settings.estimator_noise, seed), None
    prober = SimulatedProber(truth, seed)

    def weights_in_force(cpe_id: str, direction: Direction) -> dict[str, int] | None:
        current = store.load_weights(cpe_id, direction)
        return None if current is None else dict(current.weights)

    estimator = EstimatorSelection(
        prober,
        EstimatorSettings(mode=name, probe=settings.probe_settings),
        weights=weights_in_force,
    )
    return estimator, prober


@dataclass
class _Run:
    contender: Contender
    aggregate_mbps: FloatArray  # (T, C)
    trace_carried: FloatArray  # (T, A)
    trace_weights: npt.NDArray[np.int64]  # (T, A)


def _simulate(
    contender: Contender, truth: Truth, in_round: npt.NDArray[np.bool_], trace_cpe: int
) -> _Run:
    ticks, cpes, accesses = truth.capacity_mbps.shape
    aggregate = np.zeros((ticks, cpes))
    trace_carried = np.zeros((ticks, accesses))
    trace_weights = np.zeros((ticks, accesses), dtype=np.int64)
    for k, t in enumerate(truth.times_s):
        weights = contender.weights(k, float(t))
        capacity = truth.usable_mbps[k] * contender.data_share(k)
        carried = carried_mbps(weights, capacity, in_round[k])
        contender.observe(k, carried)
        aggregate[k] = carried.sum(axis=1)
        trace_carried[k] = carried[trace_cpe]
        trace_weights[k] = weights[trace_cpe]
    return _Run(contender, aggregate, trace_carried, trace_weights)


def _step_changes(truth: Truth) -> list[tuple[int, int]]:
    """(tick, CPE) pairs where the truth jumps: a link flips or the total moves by ≥ 5 %."""
    total = truth.usable_mbps.sum(axis=2)  # (T, C)
    moved = np.abs(np.diff(total, axis=0)) >= STEP_FRACTION * np.maximum(total[:-1], 1e-9)
    flipped = np.any(np.diff(truth.available.astype(np.int8), axis=0) != 0, axis=2)
    ticks, cpes = np.nonzero(moved | flipped)
    return [(int(k) + 1, int(c)) for k, c in zip(ticks, cpes, strict=True)]


def _reconvergence(
    aggregate: FloatArray,
    oracle: FloatArray,
    steps: Sequence[tuple[int, int]],
    truth: Truth,
) -> Reconvergence:
    ticks = len(truth.times_s)
    by_cpe: dict[int, list[int]] = {}
    for k, c in steps:
        by_cpe.setdefault(c, []).append(k)
    durations: list[float] = []
    missed = 0
    for c, starts in by_cpe.items():
        good = aggregate[:, c] >= RECONVERGED_FRACTION * oracle[:, c] - 1e-9
        for i, start in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else ticks
            hits = np.flatnonzero(good[start:end])
            if hits.size:
                durations.append(float(hits[0]) * truth.step_s)
            else:
                missed += 1
    return Reconvergence(
        steps=len(steps),
        mean_s=float(np.mean(durations)) if durations else None,
        max_s=float(np.max(durations)) if durations else None,
        not_reconverged=missed,
    )
