"""From capacity estimates to integer WRR weights for one CPE and direction.

A ``WeightPolicy`` first decides which paths may carry traffic (fresh, available, within the
ATSSS thresholds, chosen by the steering mode, not negligibly small), then weighs them with a
weighing rule: for the ``optimal`` policy, the weights whose conservative quantile of predicted
aggregate is highest given the estimates' uncertainty (``xapp.policy.robust``); for the
baselines, the published rules on the point estimates. It also predicts what the current
weights would carry under the same beliefs, so hysteresis can compare like with like.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from core.domain import CapacityEstimate, Direction, SteeringMode, SteeringRule
from xapp.policy.baselines import proportional_weights, round_robin_weights
from xapp.policy.fluid import aggregate_mbps
from xapp.policy.robust import robust_weights, scores_mbps

FloatArray = npt.NDArray[np.float64]
# (point estimates, standard deviations, max weight, quantile, each path's probability of going
# dark within the period, the share of the period a weighted path going dark stalls) → weights
WeighingRule = Callable[[FloatArray, FloatArray, int, float, FloatArray, float], npt.ArrayLike]


@dataclass(frozen=True)
class PolicyConfig:
    """Knobs of the weight policy; defaults suit a 5G/Wi-Fi/LiFi CPE reporting every second."""

    max_weight: int = 100
    # A path below this fraction of the largest path's capacity goes to standby: it could only
    # be weighted 1 against the largest path's max_weight, and would still drag the round.
    min_share_of_largest: float = 0.01
    stale_after_s: float = 15.0
    # The policy maximises this quantile of the predicted aggregate (0.5: the median).
    quantile: float = 0.3
    # Fraction of the priority path's capacity above which PRIORITY_BASED counts it saturated.
    saturation_fraction: float = 0.9
    # How long a weighted path that went dark stalls the round before it is taken out: MPTCP's
    # own detection (the paper measured 0.4-0.5 s), or the agent's reaction where it has one.
    outage_stall_s: float = 0.45

    def __post_init__(self) -> None:
        if not 1 <= self.max_weight <= 255:
            raise ValueError(f"max_weight must be in 1..255, got {self.max_weight}")
        if not 0 <= self.min_share_of_largest < 1:
            raise ValueError(
                f"min_share_of_largest must be in [0, 1), got {self.min_share_of_largest}"
            )
        if self.stale_after_s <= 0:
            raise ValueError(f"stale_after_s must be > 0, got {self.stale_after_s}")
        if not 0 < self.quantile < 1:
            raise ValueError(f"quantile must be in (0, 1), got {self.quantile}")
        if not 0 < self.saturation_fraction <= 1:
            raise ValueError(
                f"saturation_fraction must be in (0, 1], got {self.saturation_fraction}"
            )
        if not 0 <= self.outage_stall_s <= 60:
            raise ValueError(f"outage_stall_s must be in [0, 60], got {self.outage_stall_s}")


@dataclass(frozen=True)
class PathView:
    """What the policy knows about one of the CPE's paths at decision time."""

    access: str
    estimate: CapacityEstimate | None
    rtt_ms: float | None = None
    loss_rate_permille: float | None = None
    # How likely the path is to go dark before the next decision (from its recent history).
    outage_probability: float = 0.0


@dataclass(frozen=True)
class PolicyInput:
    cpe_id: str
    direction: Direction
    now_s: float
    paths: tuple[PathView, ...]
    rule: SteeringRule = field(default_factory=SteeringRule)
    # What the CPE is currently sending; None means "as much as it can" (a bulk transfer).
    demand_mbps: float | None = None
    current: Mapping[str, int] | None = None
    # Time until the next decision: the share of it a dark weighted path stalls the round.
    decision_interval_s: float = 1.0
    # Accesses the operator took out (they come with no estimate, and are said so).
    excluded: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Proposal:
    """Weights for every path of the CPE, and the capacities they were computed from."""

    weights: Mapping[str, int]
    predicted_mbps: float
    # What the weights in force would carry under the same beliefs (None: no weights yet).
    current_predicted_mbps: float | None
    # Paths with a fresh, available, non-zero estimate.
    usable: frozenset[str]
    reason: str


class WeightPolicy:
    """Steering mode and path selection, then a weighing rule over the selected paths."""

    def __init__(
        self, name: str, weigh: WeighingRule, config: PolicyConfig, *, uncertainty_aware: bool
    ) -> None:
        self.name = name
        self._weigh = weigh
        self.config = config
        self._uncertainty_aware = uncertainty_aware

    def propose(self, request: PolicyInput) -> Proposal | None:
        """Weights for the request's paths, or None when no path has a usable estimate."""
        usable = {
            p.access: _estimate(p) for p in request.paths if self._usable(p.estimate, request.now_s)
        }
        if not usable:
            return None
        conservative = {a: e.quantile_mbps(self.config.quantile) for a, e in usable.items()}
        candidates = _within_thresholds(
            [p for p in request.paths if p.access in usable], request.rule
        )
        selected, why = self._select(request, candidates, conservative)
        selected = self._drop_negligible(selected, conservative)
        weights = dict.fromkeys((p.access for p in request.paths), 0)
        if request.rule.mode in (
            SteeringMode.ACTIVE_STANDBY,
            SteeringMode.SMALLEST_DELAY,
            SteeringMode.REDUNDANT,
        ):
            weights.update(dict.fromkeys(selected, 1))
        else:
            risk = {p.access: p.outage_probability for p in request.paths}
            chosen = self._weigh(
                np.array([usable[a].capacity_mbps for a in selected]),
                np.array([usable[a].stddev_mbps for a in selected]),
                self.config.max_weight,
                self.config.quantile,
                np.array([risk[a] for a in selected]),
                self._stall_fraction(request),
            )
            weights.update(zip(selected, (int(w) for w in np.asarray(chosen)), strict=True))
        standby = sorted(
            p.access
            for p in request.paths
            if p.access not in usable and p.access not in request.excluded
        )
        excluded = sorted(request.excluded & {p.access for p in request.paths})
        reason = why + (f"; no usable estimate for {', '.join(standby)}" if standby else "")
        reason += f"; excluded by the operator: {', '.join(excluded)}" if excluded else ""
        if request.current is None:
            (predicted_mbps,) = self._predict([weights], usable, request)
            current_predicted_mbps = None
        else:
            predicted_mbps, current_predicted_mbps = self._predict(
                [weights, request.current], usable, request
            )
        return Proposal(
            weights=weights,
            predicted_mbps=predicted_mbps,
            current_predicted_mbps=current_predicted_mbps,
            usable=frozenset(usable),
            reason=reason,
        )

    def _stall_fraction(self, request: PolicyInput) -> float:
        interval = max(request.decision_interval_s, 1e-3)
        return min(1.0, self.config.outage_stall_s / interval)

    def _predict(
        self,
        weight_sets: Sequence[Mapping[str, int]],
        usable: Mapping[str, CapacityEstimate],
        request: PolicyInput,
    ) -> list[float]:
        """Predicted aggregate of each weight set; a weighted path without a usable estimate
        counts as dead. Sets over the same paths are scored together, from the same draws."""
        accesses = sorted(set(weight_sets[0]) | set(usable))
        if any(sorted(set(w) | set(usable)) != accesses for w in weight_sets[1:]):
            return [self._predict([w], usable, request)[0] for w in weight_sets]
        w = np.array([[ws.get(a, 0) for a in accesses] for ws in weight_sets], dtype=np.float64)
        means = np.array([usable[a].capacity_mbps if a in usable else 0.0 for a in accesses])
        if not self._uncertainty_aware:
            return [aggregate_mbps(row, means.tolist()) for row in w.tolist()]
        stddevs = np.array([usable[a].stddev_mbps if a in usable else 0.0 for a in accesses])
        risk = {p.access: p.outage_probability for p in request.paths}
        scores = scores_mbps(
            w,
            means,
            stddevs,
            self.config.quantile,
            np.array([risk.get(a, 0.0) for a in accesses]),
            self._stall_fraction(request),
        )
        return [float(score) for score in scores]

    def _usable(self, estimate: CapacityEstimate | None, now_s: float) -> bool:
        return (
            estimate is not None
            and estimate.available
            and estimate.capacity_mbps > 0
            and estimate.age_s(now_s) <= self.config.stale_after_s
        )

    def _select(
        self, request: PolicyInput, candidates: list[PathView], capacity: Mapping[str, float]
    ) -> tuple[list[str], str]:
        mode = request.rule.mode
        names = [p.access for p in candidates]
        by_capacity = sorted(names, key=lambda a: -capacity[a])
        preferred = [a for a in request.rule.preferred if a in names]
        ordered = preferred + [a for a in by_capacity if a not in preferred]
        if mode is SteeringMode.ACTIVE_STANDBY:
            return ordered[:1], f"{mode}: {ordered[0]} active"
        if mode is SteeringMode.SMALLEST_DELAY:
            fastest = min(
                candidates,
                key=lambda p: (
                    p.rtt_ms if p.rtt_ms is not None else float("inf"),
                    -capacity[p.access],
                ),
            )
            return [fastest.access], f"{mode}: {fastest.access} has the lowest RTT"
        if mode is SteeringMode.REDUNDANT:
            return names, f"{mode}: every usable path"
        if mode is SteeringMode.PRIORITY_BASED and request.demand_mbps is not None:
            selected: list[str] = []
            room_mbps = 0.0
            for access in ordered:
                selected.append(access)
                room_mbps += capacity[access] * self.config.saturation_fraction
                if room_mbps >= request.demand_mbps:
                    break
            return selected, f"{mode}: {', '.join(selected)} carry the demand"
        return names, f"{mode}: weights by {self.name}"

    def _drop_negligible(self, selected: list[str], capacity: Mapping[str, float]) -> list[str]:
        largest = max((capacity[a] for a in selected), default=0.0)
        floor_mbps = largest * self.config.min_share_of_largest
        kept = [a for a in selected if capacity[a] > 0 and capacity[a] >= floor_mbps]
        return kept or selected[:1]


def _estimate(path: PathView) -> CapacityEstimate:
    assert path.estimate is not None  # guaranteed by WeightPolicy._usable
    return path.estimate


def _within_thresholds(paths: list[PathView], rule: SteeringRule) -> list[PathView]:
    """Paths inside the ATSSS RTT and loss thresholds, or all of them when none is."""
    limits = rule.thresholds

    def ok(path: PathView) -> bool:
        if limits.rtt_ms is not None and path.rtt_ms is not None and path.rtt_ms > limits.rtt_ms:
            return False
        return not (
            limits.loss_rate_permille is not None
            and path.loss_rate_permille is not None
            and path.loss_rate_permille > limits.loss_rate_permille
        )

    inside = [p for p in paths if ok(p)]
    return inside or paths


def _proportional(
    means: FloatArray,
    stddevs: FloatArray,
    max_weight: int,
    quantile: float,
    outage_probability: FloatArray,
    stall_fraction: float,
) -> tuple[int, ...]:
    return proportional_weights(means.tolist(), max_weight)


def _round_robin(
    means: FloatArray,
    stddevs: FloatArray,
    max_weight: int,
    quantile: float,
    outage_probability: FloatArray,
    stall_fraction: float,
) -> tuple[int, ...]:
    return round_robin_weights(means.tolist())


POLICY_NAMES = ("optimal", "proportional", "rr")


def make_policy(name: str, config: PolicyConfig | None = None) -> WeightPolicy:
    """The named policy. The baselines read point estimates and keep every path, as published."""
    config = config or PolicyConfig()
    if name == "optimal":
        return WeightPolicy(name, robust_weights, config, uncertainty_aware=True)
    if name == "proportional":
        return WeightPolicy(name, _proportional, _as_published(config), uncertainty_aware=False)
    if name == "rr":
        return WeightPolicy(name, _round_robin, _as_published(config), uncertainty_aware=False)
    raise ValueError(f"unknown policy {name!r}; expected one of {', '.join(POLICY_NAMES)}")


def _as_published(config: PolicyConfig) -> PolicyConfig:
    return PolicyConfig(
        max_weight=config.max_weight,
        min_share_of_largest=0.0,
        stale_after_s=config.stale_after_s,
        quantile=0.5,
        saturation_fraction=config.saturation_fraction,
        outage_stall_s=config.outage_stall_s,
    )
