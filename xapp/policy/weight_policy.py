"""From capacity estimates to integer WRR weights for one CPE and direction.

A ``WeightPolicy`` first decides which paths may carry traffic (fresh, available, within the
ATSSS thresholds, chosen by the steering mode, not negligibly small), then weighs them with a
weighing rule: for the ``optimal`` policy, the weights whose conservative quantile of predicted
aggregate is highest given the estimates' uncertainty (``xapp.policy.robust``); for the
baselines, the published rules on the point estimates. It also predicts what the current
weights would carry under the same beliefs, so hysteresis can compare like with like.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from core.domain import (
    CapacityEstimate,
    Direction,
    SteeringMode,
    SteeringRule,
    normal_quantile,
)
from core.fluid import aggregate_mbps
from core.rowwise import row_any, row_max
from xapp.policy.baselines import proportional_weights, round_robin_weights
from xapp.policy.robust import (
    reach_bound,
    robust_weights,
    robust_weights_many,
    scores_many,
)

FloatArray = npt.NDArray[np.float64]
# (point estimates, standard deviations, max weight, quantile, each path's probability of going
# dark within the period, the share of the period a weighted path going dark stalls) → weights
WeighingRule = Callable[[FloatArray, FloatArray, int, float, FloatArray, float], npt.ArrayLike]
# The same for (CPEs × paths) beliefs and a stall fraction per CPE → (CPEs × paths) weights.
ManyWeighingRule = Callable[
    [FloatArray, FloatArray, int, float, FloatArray, FloatArray], npt.NDArray[np.int64]
]


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
class BalancingRows:
    """Load-balancing questions over the same accesses (in this order), one row each: what the
    balancing lane reads of a ``PolicyInput``, as arrays. A fleet's loop puts its usual
    questions this way at once, without an input object per CPE and a view per path.

    Per row and access: whether the estimate is of an available path with capacity > 0
    (``measured``; then its capacity, σ and time, else zeros), its outage probability, and the
    weight in force (``has_current`` per row: whether any are); per row: the time of the
    question, the interval to the next decision and the accesses the operator took out."""

    accesses: tuple[str, ...]
    now_s: npt.NDArray[np.float64]
    measured: npt.NDArray[np.bool_]
    capacity: npt.NDArray[np.float64]
    stddev: npt.NDArray[np.float64]
    measured_at_s: npt.NDArray[np.float64]
    risk: npt.NDArray[np.float64]
    decision_interval_s: npt.NDArray[np.float64]
    current: npt.NDArray[np.int64]
    has_current: npt.NDArray[np.bool_]
    excluded: Sequence[frozenset[str]]


@dataclass(frozen=True)
class RowAnswers:
    """The policy's answers to ``BalancingRows``, as arrays: per row and access the weight and
    whether the path is usable; per row what the weights are predicted to carry and what the
    weights in force would (0 where none are). A row with no usable path has no answer."""

    weights: npt.NDArray[np.int64]
    predicted: npt.NDArray[np.float64]  # (rows, 2): the proposal's, the weights in force's
    usable: npt.NDArray[np.bool_]
    # The rows asked to be spared whose weights were not worked out (``answer_rows``): their
    # weights and predictions are those in force. None: every row was worked out.
    spared: npt.NDArray[np.bool_] | None = None
    # Of those, the rows spared because no weights could gain what a push needed: at most
    # the relative gain any could have been predicted (NaN elsewhere). None: as ``spared``.
    within: npt.NDArray[np.float64] | None = None

    @property
    def answered(self) -> npt.NDArray[np.bool_]:
        return row_any(self.usable)


class RowProposals:
    """The ``Proposal`` of any row of answers, made when asked for (a fleet's loop asks for
    the rows whose weights may move): the usable sets, one object per distinct set (the
    proposals keep them a step), and the reasons, one per distinct set (a fleet's rows share
    a few)."""

    def __init__(self, policy: WeightPolicy, questions: BalancingRows, answers: RowAnswers):
        self._name = policy.name
        self.questions = questions
        self.answers = answers
        # The answers as plain numbers, once (read row by row, numpy's rows cost more).
        self._weights: list[list[int]] = answers.weights.tolist()
        self._predicted: list[list[float]] = answers.predicted.tolist()
        self._has_current: list[bool] = questions.has_current.tolist()
        self._usable: list[tuple[bool, ...]] = list(map(tuple, answers.usable.tolist()))
        self._usable_sets: dict[tuple[bool, ...], frozenset[str]] = {}
        self._reasons: dict[tuple[bool, ...], str] = {}

    def usable_sets(self) -> list[frozenset[str]]:
        """``usable_set`` of every row, in order (each distinct set made once, the rows'
        looked up in C)."""
        for mask in set(self._usable) - self._usable_sets.keys():
            self._set_of(mask)
        return list(map(self._usable_sets.__getitem__, self._usable))

    def usable_set(self, row: int) -> frozenset[str]:
        """The row's usable paths, as a set."""
        return self._set_of(self._usable[row])

    def _set_of(self, mask: tuple[bool, ...]) -> frozenset[str]:
        found = self._usable_sets.get(mask)
        if found is None:
            accesses = self.questions.accesses
            found = self._usable_sets[mask] = frozenset(
                a for a, u in zip(accesses, mask, strict=True) if u
            )
        return found

    def proposal(self, row: int) -> Proposal | None:
        """The row's proposal (None: no usable path)."""
        if not any(self._usable[row]):
            return None
        predicted = self._predicted[row]
        return Proposal(
            weights=self.weights(row),
            predicted_mbps=predicted[0],
            current_predicted_mbps=predicted[1] if self._has_current[row] else None,
            usable=self.usable_set(row),
            reason=self.reason(row),
        )

    def weights(self, row: int) -> dict[str, int]:
        """The row's proposed weights, by access."""
        return dict(zip(self.questions.accesses, self._weights[row], strict=True))

    def weight_rows(self, rows: Sequence[int]) -> list[list[int]]:
        """The proposed weights of these rows, each in the accesses' order."""
        return list(map(self._weights.__getitem__, rows))

    def reason(self, row: int) -> str:
        """The row's proposal's reason (a row with a usable path)."""
        mask = self._usable[row]
        accesses, excluded = self.questions.accesses, self.questions.excluded[row]
        reason = None if excluded else self._reasons.get(mask)
        if reason is None:
            usable_set = self.usable_set(row)
            mode = SteeringMode.LOAD_BALANCING  # (the lane's)
            standby = sorted(a for a in accesses if a not in usable_set and a not in excluded)
            reason = f"{mode}: weights by {self._name}"
            reason += f"; no usable estimate for {', '.join(standby)}" if standby else ""
            if excluded:
                shown = sorted(excluded & set(accesses))
                reason += f"; excluded by the operator: {', '.join(shown)}" if shown else ""
            else:
                self._reasons[mask] = reason
        return reason


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
        self,
        name: str,
        weigh: WeighingRule,
        config: PolicyConfig,
        *,
        uncertainty_aware: bool,
        weigh_many: ManyWeighingRule | None = None,
    ) -> None:
        """``weigh_many``: the rule for many CPEs at once (rows of beliefs, a stall fraction
        per row), giving exactly what ``weigh`` gives row by row."""
        self.name = name
        self._weigh = weigh
        self._weigh_many = weigh_many
        self.config = config
        self._uncertainty_aware = uncertainty_aware

    def propose(self, request: PolicyInput) -> Proposal | None:
        """Weights for the request's paths, or None when no path has a usable estimate."""
        return self.propose_many([request])[0]

    def propose_many(self, requests: Sequence[PolicyInput]) -> list[Proposal | None]:
        """``propose`` for many CPEs and directions at once. Load-balancing questions (a
        fleet's usual) go through the balancing lane, worked out in arrays from end to end;
        the others are planned one by one, then weighed and predicted in a few array
        operations for all of them (a fleet's step decided one CPE at a time spent most of its
        time handing the GIL back and forth between numpy's small calls and the E2 reader)."""
        out: list[Proposal | None] = [None] * len(requests)
        balancing: dict[tuple[str, ...], list[int]] = {}
        others: list[int] = []
        for index, request in enumerate(requests):
            if self._in_balancing_lane(request):
                key = tuple(p.access for p in request.paths)
                balancing.setdefault(key, []).append(index)
            else:
                others.append(index)
        for accesses, indexes in balancing.items():
            if len(set(accesses)) < len(accesses):  # an access named twice: planned
                others += indexes
                continue
            chosen = [requests[i] for i in indexes]
            for index, proposal in zip(
                indexes, self._propose_balancing(accesses, chosen), strict=True
            ):
                out[index] = proposal
        if others:
            others.sort()
            for index, proposal in zip(
                others, self._propose_planned([requests[i] for i in others]), strict=True
            ):
                out[index] = proposal
        return out

    def _propose_planned(self, requests: Sequence[PolicyInput]) -> list[Proposal | None]:
        """``propose_many`` for any requests, planned one by one (every steering mode)."""
        plans = [self._plan(request) for request in requests]
        planned = [plan for plan in plans if plan is not None]
        self._weigh_all([plan for plan in planned if plan.weighed])
        self._predict_all(planned)
        return [plan.proposal() if plan is not None else None for plan in plans]

    def _in_balancing_lane(self, request: PolicyInput) -> bool:
        return self.answers_in_rows(
            request.rule, request.current, tuple(p.access for p in request.paths)
        )

    def answers_in_rows(
        self, rule: SteeringRule, current: Mapping[str, int] | None, accesses: Sequence[str]
    ) -> bool:
        """Whether a question with this rule and these weights in force over these accesses is
        one the balancing lane answers (``propose_rows``): load balancing without ATSSS
        thresholds, weighed by a rule for many at once, with the weights in force (if any)
        over exactly its paths. A fleet's usual question."""
        if not self.answers_rule_in_rows(rule):
            return False
        if current is None:
            return True
        return len(current) == len(accesses) and all(a in current for a in accesses)

    def answers_rule_in_rows(self, rule: SteeringRule) -> bool:
        """``answers_in_rows``, as far as the rule tells (a fleet's CPEs share a few rules:
        its step asks once for each)."""
        if rule.mode is not SteeringMode.LOAD_BALANCING or not self._uncertainty_aware:
            return False
        if self._weigh_many is None:
            return False
        limits = rule.thresholds
        return limits.rtt_ms is None and limits.loss_rate_permille is None

    def _propose_balancing(
        self, accesses: tuple[str, ...], requests: Sequence[PolicyInput]
    ) -> list[Proposal | None]:
        """``_propose_planned`` for requests in the balancing lane over these accesses (in this
        order), put as rows (``propose_rows``)."""
        return self.propose_rows(balancing_rows(accesses, requests))

    def propose_rows(self, questions: BalancingRows) -> list[Proposal | None]:
        """``_propose_planned`` for load-balancing questions put as rows (each one that
        ``answers_in_rows``), worked out as (rows × paths) arrays: the same usable paths,
        selection, weights, predictions and reasons (tests/test_policy_equivalence.py holds
        the two together). A fleet's step spent most of the policy's time planning one
        request at a time in dictionaries."""
        answers = self.answer_rows(questions)
        made = RowProposals(self, questions, answers)
        return [made.proposal(row) for row in range(len(questions.now_s))]

    def usable_rows(self, questions: BalancingRows) -> npt.NDArray[np.bool_]:
        """Per row and access, whether the path is usable: available, capacity > 0 and fresh
        (``CapacityEstimate.age_s`` ≤ ``stale_after_s``)."""
        age_s = np.maximum(0.0, questions.now_s[:, None] - questions.measured_at_s)
        return np.asarray(questions.measured & (age_s <= self.config.stale_after_s), dtype=bool)

    def answer_rows(
        self, questions: BalancingRows, needed: npt.NDArray[np.float64] | None = None
    ) -> RowAnswers:
        """``propose_rows``'s answers as arrays: a fleet's loop reads most of them as numbers
        (most weights stay as they are) and makes the proposals it acts on
        (``RowProposals``).

        ``needed``: per row, the predicted relative gain new weights would need to be pushed
        now (the loop's hysteresis and push budget): infinite where none could go (a budget
        spent), NaN where the row is not to be spared (something that cannot wait). A row is
        spared when the weights in force carry something and no weights could be predicted
        to gain that much over them (``reach_bound``): its weights are not worked out, the
        policy's dearest part, and the weights in force stand for it
        (``RowAnswers.spared``; ``RowAnswers.within``: at most what it could have gained).
        At 100 ms reports, two pushes a second leave most budgets spent or nearly so between
        pushes, and most rows could not gain what a push would need."""
        accesses = questions.accesses
        rows, paths = len(questions.now_s), len(accesses)
        config = self.config
        usable = self.usable_rows(questions)
        capacity = np.where(usable, questions.capacity, 0.0)
        stddev = np.where(usable, questions.stddev, 0.0)
        risk = questions.risk
        current, has_current = questions.current, questions.has_current
        # _stall_fraction per row
        stall = np.minimum(
            1.0, config.outage_stall_s / np.maximum(questions.decision_interval_s, 1e-3)
        )
        # Each usable path's conservative capacity (CapacityEstimate.quantile_mbps); the
        # selection is every usable path, less the negligible ones (_drop_negligible).
        z = normal_quantile(config.quantile)
        conservative = np.where(stddev == 0.0, capacity, np.maximum(0.0, capacity + z * stddev))
        largest = row_max(np.where(usable, conservative, 0.0), initial=0.0)
        floor = largest * config.min_share_of_largest
        selected = usable & (conservative > 0) & (conservative >= floor[:, None])
        # None kept: the first usable path alone.
        empty = ~row_any(selected) & row_any(usable)
        selected[empty, np.argmax(usable[empty], axis=1)] = True
        # Predictions over the accesses in sorted order (the draws follow the path's place).
        order = sorted(range(paths), key=lambda i: accesses[i])
        spared = within = None
        asked, carried = np.zeros(0, dtype=np.intp), np.zeros(0)  # (rows asked to be spared)
        if needed is not None:
            spared = np.zeros(rows, dtype=bool)
            within = np.full(rows, math.nan)
            asked = np.flatnonzero(~np.isnan(needed) & has_current & row_any(usable))
            if len(asked):
                take = asked[:, None]
                carried = scores_many(
                    current[take, order][:, None, :],
                    capacity[take, order],
                    stddev[take, order],
                    config.quantile,
                    risk[take, order],
                    stall[asked],
                )[:, 0]
                gain_needed = needed[asked]
                spent = np.isinf(gain_needed) & (carried > 0)
                # The others whose gain no weights could reach (the bound, for those only).
                bounded = np.flatnonzero(np.isfinite(gain_needed) & (carried > 0))
                at_most = np.full(len(asked), math.inf)
                if len(bounded):
                    rows_of = asked[bounded][:, None]
                    means, stddevs = capacity[rows_of, order], stddev[rows_of, order]
                    reach = reach_bound(
                        means, stddevs, config.quantile, risk[rows_of, order], stall[rows_of[:, 0]]
                    )
                    at_most[bounded] = reach / carried[bounded] - 1
                out_of_reach = at_most < gain_needed
                spared[asked[spent | out_of_reach]] = True
                within[asked[out_of_reach]] = at_most[out_of_reach]
            selected &= ~spared[:, None]
        weights = np.zeros((rows, paths), dtype=np.int64)
        weigh_many = self._weigh_many
        assert weigh_many is not None  # (the lane's condition)
        counts = selected.sum(axis=1)
        for count in np.unique(counts[counts > 0]).tolist():
            members = np.flatnonzero(counts == count)
            # The selected columns of each row, in the request's order.
            columns = np.argsort(~selected[members], axis=1, kind="stable")[:, :count]
            take = members[:, None]
            chosen = weigh_many(
                capacity[take, columns],
                stddev[take, columns],
                config.max_weight,
                config.quantile,
                risk[take, columns],
                stall[members],
            )
            weights[take, columns] = chosen
        # The proposal and the weights in force in one row, as _predict_all does; the weights
        # in force of a row asked to be spared were predicted already (the same number).
        planned = np.flatnonzero(row_any(usable) & (True if spared is None else ~spared))
        predicted = np.zeros((rows, 2))
        known = np.zeros(rows, dtype=bool)
        if len(asked):
            known[asked] = True
            predicted[asked, 1] = carried
        for sets in (1, 2):
            members = planned[has_current[planned] == (sets == 2)]
            if sets == 2:
                predicted_before = members[known[members]]
                if len(predicted_before):
                    take = predicted_before[:, None]
                    predicted[predicted_before, 0] = scores_many(
                        weights[take, order][:, None, :],
                        capacity[take, order],
                        stddev[take, order],
                        config.quantile,
                        risk[take, order],
                        stall[predicted_before],
                    )[:, 0]
                members = members[~known[members]]
            if not len(members):
                continue
            take = members[:, None]
            stacked = [weights[take, order]] + ([current[take, order]] if sets == 2 else [])
            predicted[members, :sets] = scores_many(
                np.stack(stacked, axis=1),
                capacity[take, order],
                stddev[take, order],
                config.quantile,
                risk[take, order],
                stall[members],
            )
        if spared is not None and spared.any():
            weights[spared] = current[spared]
            predicted[spared, 0] = predicted[spared, 1]
        return RowAnswers(weights, predicted, usable, spared, within)

    def within_reach(self, request: PolicyInput, carried_mbps: float | None) -> float | None:
        """At most the relative gain any weights over the request's paths could be predicted
        over weights in force predicted to carry ``carried_mbps``: ``answer_rows``' bound, the
        same number for the same question put as a row. None where there is none (a policy
        that scores point estimates, weights in force that carry nothing, an access named
        twice)."""
        if not self._uncertainty_aware or carried_mbps is None or not carried_mbps > 0:
            return None
        by_access = {p.access: p for p in request.paths}
        if len(by_access) < len(request.paths):
            return None
        now_s, stale_after_s = request.now_s, self.config.stale_after_s
        capacity, stddev, risk = [], [], []
        for access in sorted(by_access):  # (the order predictions are made in)
            view = by_access[access]
            e = view.estimate
            usable = (
                e is not None
                and e.available
                and e.capacity_mbps > 0
                and e.age_s(now_s) <= stale_after_s
            )
            capacity.append(e.capacity_mbps if usable and e is not None else 0.0)
            stddev.append(e.stddev_mbps if usable and e is not None else 0.0)
            risk.append(view.outage_probability)
        reach = reach_bound(
            np.array([capacity]),
            np.array([stddev]),
            self.config.quantile,
            np.array([risk]),
            self._stall_fraction(request),
        )
        return float(reach[0] / carried_mbps - 1)

    def _plan(self, request: PolicyInput) -> _Plan | None:
        """Which paths carry traffic and why; the weights of those weighed come later."""
        now_s, stale_after_s = request.now_s, self.config.stale_after_s
        usable = {
            p.access: e
            for p in request.paths
            if (e := p.estimate) is not None
            and e.available
            and e.capacity_mbps > 0
            and e.age_s(now_s) <= stale_after_s
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
        weighed = request.rule.mode not in (
            SteeringMode.ACTIVE_STANDBY,
            SteeringMode.SMALLEST_DELAY,
            SteeringMode.REDUNDANT,
        )
        if not weighed:
            weights.update(dict.fromkeys(selected, 1))
        standby = sorted(
            p.access
            for p in request.paths
            if p.access not in usable and p.access not in request.excluded
        )
        excluded = sorted(request.excluded & {p.access for p in request.paths})
        reason = why + (f"; no usable estimate for {', '.join(standby)}" if standby else "")
        reason += f"; excluded by the operator: {', '.join(excluded)}" if excluded else ""
        risk = {p.access: p.outage_probability for p in request.paths}
        return _Plan(
            request, usable, selected, weights, weighed, reason, risk, self._stall_fraction(request)
        )

    def _weigh_all(self, plans: Sequence[_Plan]) -> None:
        """The weighing rule over each plan's selected paths; with a rule for many at once,
        one call per number of paths."""
        if self._weigh_many is None:
            for plan in plans:
                chosen = self._weigh(
                    *plan.beliefs(plan.selected),
                    self.config.max_weight,
                    self.config.quantile,
                    np.array([plan.risk[a] for a in plan.selected]),
                    plan.stall_fraction,
                )
                plan.weigh(np.asarray(chosen))
            return
        for group in _by_size(plans, lambda plan: len(plan.selected)):
            beliefs = [plan.belief_lists(plan.selected) for plan in group]
            chosen = self._weigh_many(
                np.array([means for means, _ in beliefs]),
                np.array([stddevs for _, stddevs in beliefs]),
                self.config.max_weight,
                self.config.quantile,
                np.array([[plan.risk[a] for a in plan.selected] for plan in group]),
                np.array([plan.stall_fraction for plan in group]),
            )
            for plan, row in zip(group, chosen, strict=True):
                plan.weigh(row)

    def _predict_all(self, plans: Sequence[_Plan]) -> None:
        """Predicted aggregate of each plan's weights and of the weights in force (a weighted
        path without a usable estimate counts as dead), one array call per number of paths;
        a plan's two sets over the same paths share a row (the same beliefs, drawn once)."""
        # (plan, which of its sets, the paths they are over, the sets)
        jobs: list[tuple[_Plan, tuple[int, ...], list[str], list[Mapping[str, int]]]] = []
        for plan in plans:
            sets: list[Mapping[str, int]] = [plan.weights]
            if plan.request.current is not None:
                sets.append(plan.request.current)
            over = [sorted(set(weights) | set(plan.usable)) for weights in sets]
            if len(sets) == 2 and over[0] == over[1]:
                jobs.append((plan, (0, 1), over[0], sets))
            else:
                jobs += [(plan, (i,), over[i], [sets[i]]) for i in range(len(sets))]
        if not self._uncertainty_aware:
            for plan, indexes, accesses, weight_sets in jobs:
                means, _ = plan.beliefs(accesses)
                for index, weights in zip(indexes, weight_sets, strict=True):
                    row = [float(weights.get(a, 0)) for a in accesses]
                    plan.predicted[index] = aggregate_mbps(row, means.tolist())
            return
        for group in _by_size(jobs, lambda job: (len(job[2]), len(job[1]))):
            beliefs = [plan.belief_lists(accesses) for plan, _, accesses, _ in group]
            scores = scores_many(
                np.array(
                    [
                        [[w.get(a, 0) for a in accesses] for w in sets]
                        for _, _, accesses, sets in group
                    ]
                ),
                np.array([means for means, _ in beliefs]),
                np.array([stddevs for _, stddevs in beliefs]),
                self.config.quantile,
                np.array(
                    [[plan.risk.get(a, 0.0) for a in accesses] for plan, _, accesses, _ in group]
                ),
                np.array([plan.stall_fraction for plan, *_ in group]),
            )
            for (plan, indexes, _, _), row in zip(group, scores.tolist(), strict=True):
                for index, score in zip(indexes, row, strict=True):
                    plan.predicted[index] = score

    def _stall_fraction(self, request: PolicyInput) -> float:
        interval = max(request.decision_interval_s, 1e-3)
        return min(1.0, self.config.outage_stall_s / interval)

    def _select(
        self, request: PolicyInput, candidates: list[PathView], capacity: Mapping[str, float]
    ) -> tuple[list[str], str]:
        mode = request.rule.mode
        names = [p.access for p in candidates]
        if mode is SteeringMode.LOAD_BALANCING:  # a fleet's usual mode: no order needed
            return names, f"{mode}: weights by {self.name}"
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


@dataclass
class _Plan:
    """One request on its way to a proposal: the paths chosen, then weighed, then predicted."""

    request: PolicyInput
    usable: dict[str, CapacityEstimate]
    selected: list[str]
    weights: dict[str, int]
    weighed: bool  # whether the weighing rule sets the selected paths' weights
    reason: str
    risk: dict[str, float]
    stall_fraction: float
    predicted: list[float] = field(default_factory=lambda: [0.0, 0.0])

    def beliefs(self, accesses: Sequence[str]) -> tuple[FloatArray, FloatArray]:
        """Means and standard deviations of these accesses (0 for one without an estimate)."""
        means, stddevs = self.belief_lists(accesses)
        return np.array(means), np.array(stddevs)

    def belief_lists(self, accesses: Sequence[str]) -> tuple[list[float], list[float]]:
        """``beliefs`` as lists: a batch of plans stacks lists into one array far sooner than
        it stacks one small array per plan."""
        known = [self.usable.get(a) for a in accesses]
        return (
            [e.capacity_mbps if e is not None else 0.0 for e in known],
            [e.stddev_mbps if e is not None else 0.0 for e in known],
        )

    def weigh(self, chosen: npt.NDArray[Any]) -> None:
        self.weights.update(zip(self.selected, (int(w) for w in chosen), strict=True))

    def proposal(self) -> Proposal:
        return Proposal(
            weights=self.weights,
            predicted_mbps=self.predicted[0],
            current_predicted_mbps=self.predicted[1] if self.request.current is not None else None,
            usable=frozenset(self.usable),
            reason=self.reason,
        )


Item = TypeVar("Item")


def _by_size(items: Sequence[Item], size: Callable[[Item], Hashable]) -> list[list[Item]]:
    """The items grouped by a size (the arrays of one group stack), in first-seen order."""
    groups: dict[Hashable, list[Item]] = {}
    for item in items:
        groups.setdefault(size(item), []).append(item)
    return list(groups.values())


def _within_thresholds(paths: list[PathView], rule: SteeringRule) -> list[PathView]:
    """Paths inside the ATSSS RTT and loss thresholds, or all of them when none is."""
    limits = rule.thresholds
    if limits.rtt_ms is None and limits.loss_rate_permille is None:
        return paths

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


def balancing_rows(accesses: tuple[str, ...], requests: Sequence[PolicyInput]) -> BalancingRows:
    """Load-balancing requests over these accesses (in this order) put as rows."""
    rows, paths = len(requests), len(accesses)
    measured = np.zeros((rows, paths), dtype=bool)
    capacity = np.zeros((rows, paths))
    stddev = np.zeros((rows, paths))
    measured_at_s = np.zeros((rows, paths))
    risk = np.empty((rows, paths))
    current = np.zeros((rows, paths), dtype=np.int64)
    has_current = np.zeros(rows, dtype=bool)
    for row, request in enumerate(requests):
        for column, view in enumerate(request.paths):
            e = view.estimate
            risk[row, column] = view.outage_probability
            if e is not None and e.available and e.capacity_mbps > 0:
                measured[row, column] = True
                capacity[row, column] = e.capacity_mbps
                stddev[row, column] = e.stddev_mbps
                measured_at_s[row, column] = e.measured_at_s
        if request.current is not None:
            has_current[row] = True
            current[row] = [request.current[a] for a in accesses]
    return BalancingRows(
        accesses,
        np.array([r.now_s for r in requests], dtype=np.float64),
        measured,
        capacity,
        stddev,
        measured_at_s,
        risk,
        np.array([r.decision_interval_s for r in requests], dtype=np.float64),
        current,
        has_current,
        [r.excluded for r in requests],
    )


def make_policy(name: str, config: PolicyConfig | None = None) -> WeightPolicy:
    """The named policy. The baselines read point estimates and keep every path, as published."""
    config = config or PolicyConfig()
    if name == "optimal":
        return WeightPolicy(
            name, robust_weights, config, uncertainty_aware=True, weigh_many=robust_weights_many
        )
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
