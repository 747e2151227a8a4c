"""When a proposal is worth pushing: every push costs a round trip to the agents and a
reconfiguration of the kernel scheduler, so small predicted gains are not pushed."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from functools import cache, cached_property
from itertools import repeat
from operator import attrgetter, is_
from typing import NamedTuple

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class PushDecision:
    push: bool
    reason: str
    # For a push: whether it is for a gain alone (which the push limit may hold back), or for
    # something that cannot wait (first weights, an override, a mode, a path lost or back).
    for_gain: bool = False
    gain: float = 0.0  # the predicted relative gain of a push for a gain


# Two a second: a one-second period never reaches it (one decision a period); at 100 ms reports
# on a real NR trace (raca-driving, the measured 12 ms control delay) it halves the pushes for
# 0.0055 of efficiency (0.9359 with 1,963 pushes in 450 s, 0.9304 with 887; docs/estimators.md).
DEFAULT_MAX_PUSHES_PER_S = 2.0
# The budget holds this many seconds of pushes at the limit's rate: a burst of changes (a path
# lost and back, a handover) is followed at once, and the threshold follows the long-run rate
# (on raca-driving at 2 a second: 0.912 with 2 s, 0.926 with 5 s, 0.928 with 20 s and 60 s).
BUDGET_SPAN_S = 20.0


# A push for a gain needs a whole token (less a rounding's worth: refills add tenths).
LAST_TOKEN = 1.0 - 1e-9


@dataclass
class PushBudget:
    """The pushes one CPE and direction may still make: a bucket of tokens filled at the limit's
    rate, one spent per push. A push for a gain needs a larger predicted gain the emptier the
    bucket is: ``min_gain`` when full, ``min_gain × size / tokens`` below that, none under one
    token. A hard interval between pushes would hold back a large gain as readily as a small
    one; with a threshold that rises as the budget is spent the pushes kept are the ones worth
    most (on raca-driving at 100 ms reports, 2 pushes a second: 0.928, where a fixed 0.5 s
    interval between pushes gave 0.898).

    The limit holds on average over any span, every push counted: the bucket starts empty (a
    full one let 20 s of pushes more through: 2.06 a second on raca-driving at a limit of 2),
    and a push that cannot wait goes all the same, borrowing from the pushes for a gain after
    it (the tokens go below zero). Until it has had time to fill, the threshold reads what is
    left against what the bucket has earned so far, not against a full one: a young budget
    would otherwise hold back every small gain of a CPE's first seconds."""

    rate_per_s: float
    tokens: float
    at_s: float
    started_s: float = 0.0

    @classmethod
    def empty(cls, rate_per_s: float, now_s: float) -> PushBudget:
        return cls(rate_per_s, 0.0, now_s, started_s=now_s)

    @staticmethod
    def size_for(rate_per_s: float) -> float:
        return max(1.0, rate_per_s * BUDGET_SPAN_S)

    @property
    def size(self) -> float:
        return self.size_for(self.rate_per_s)

    def refill(self, now_s: float) -> None:
        self.tokens = self.tokens_at(now_s)
        self.at_s = max(self.at_s, now_s)

    def tokens_at(self, now_s: float) -> float:
        """What a refill to ``now_s`` would leave in the bucket (nothing changes)."""
        elapsed = max(0.0, now_s - self.at_s)
        return min(self.size, self.tokens + elapsed * self.rate_per_s)

    def spent_at(self, now_s: float) -> bool:
        """Whether no push for a gain could go at ``now_s`` (``gain_needed`` would be None
        after a refill), nothing changed: a loop need not work out such a push at all."""
        return self.tokens_at(now_s) < LAST_TOKEN

    def as_row(self) -> tuple[float, float, float, float, float]:
        """The budget as the numbers ``needed_many`` reads."""
        return (self.tokens, self.at_s, self.rate_per_s, self.size, self.started_s)

    @staticmethod
    def rows_of(budgets: Sequence[PushBudget | None]) -> npt.NDArray[np.float64]:
        """``as_row`` of each budget, NaN for None, as one table: a fleet's step at 1 s
        periods changes thousands of budgets, and a row made by each was 1-2 µs of Python;
        here their fields are read in C and the size worked out for all at once (``size_for``:
        the same product, and the same larger of it and 1)."""
        rows = np.full((len(budgets), 5), math.nan)
        given = list(budgets)
        places = None
        if any(map(is_, given, repeat(None))):  # (a refund of a key without a budget: few)
            places = [i for i, budget in enumerate(given) if budget is not None]
            given = [given[i] for i in places]
        if not given:
            return rows
        state = np.array(list(map(_BUDGET_STATE, given)), dtype=np.float64).reshape(-1, 4)
        spread = state[:, 2] * BUDGET_SPAN_S
        made = np.column_stack(
            [
                state[:, 0],
                state[:, 1],
                state[:, 2],
                np.where(spread > 1.0, spread, 1.0),
                state[:, 3],
            ]
        )
        if places is None:
            rows[:] = made
        else:
            rows[places] = made
        return rows

    def needed_at(self, now_s: float, min_gain: float) -> float:
        """The predicted gain a push for a gain needs at ``now_s``, the hysteresis's
        ``min_gain`` included (infinite: none can go): what ``admit`` holds one to after a
        refill, nothing changed."""
        tokens = self.tokens_at(now_s)
        if tokens < LAST_TOKEN:
            return math.inf
        at_s = max(self.at_s, now_s)  # (the refill's)
        earned = min(self.size, max(1.0, (at_s - self.started_s) * self.rate_per_s))
        return max(min_gain, min_gain * earned / tokens)

    @staticmethod
    def needed_many(
        rows: npt.NDArray[np.float64], now_s: float, min_gain: float
    ) -> npt.NDArray[np.float64]:
        """``needed_at(now_s, min_gain)`` of the budgets given as rows (``as_row``; NaN: no
        budget): the same IEEE operations in the same order, for a fleet's step at once."""
        elapsed = np.maximum(0.0, now_s - rows[:, 1])
        tokens = np.minimum(rows[:, 3], rows[:, 0] + elapsed * rows[:, 2])
        at_s = np.maximum(rows[:, 1], now_s)
        earned = np.minimum(rows[:, 3], np.maximum(1.0, (at_s - rows[:, 4]) * rows[:, 2]))
        with np.errstate(divide="ignore", invalid="ignore"):
            needed = np.maximum(min_gain, min_gain * earned / tokens)
        return np.asarray(np.where(tokens < LAST_TOKEN, math.inf, needed), dtype=np.float64)

    @property
    def earned(self) -> float:
        """What the bucket holds when nothing has been spent since it started (as of the last
        refill): its size once it has had time to fill."""
        return min(self.size, max(1.0, (self.at_s - self.started_s) * self.rate_per_s))

    def gain_needed(self, min_gain: float) -> float | None:
        """The predicted gain a push for a gain needs now (None: the budget is spent)."""
        if self.tokens < LAST_TOKEN:
            return None
        return min_gain * self.earned / self.tokens

    def admit(self, decision: PushDecision, min_gain: float, now_s: float) -> PushDecision:
        """The hysteresis's decision as the budget lets it be: a push for a gain below what the
        budget needs now is held back; every push that goes is spent, those that cannot wait
        too (though never held back: they may leave the budget in debt)."""
        if not decision.push:
            return decision
        self.refill(now_s)
        if decision.for_gain:
            refusal = self.refusal(decision.gain, min_gain)
            if refusal is not None:
                return PushDecision(False, f"{decision.reason}, {refusal}")
        self.spend()
        return decision

    @staticmethod
    def judged_many(
        budgets: Sequence[PushBudget], now_s: float, gains: Sequence[float], min_gain: float
    ) -> list[str | None]:
        """``refill(now_s)`` then ``refusal(gain, min_gain)`` of each budget with its gain (the
        budgets distinct), worked out for all at once: each budget refilled as its ``refill``
        leaves it, and the same answers, from the same IEEE operations on the same numbers
        (Python's ``min`` and ``max`` of two as comparisons). A fleet's step at 1 s periods
        judges thousands of pushes for a gain; a dozen small Python calls each, before."""
        if not budgets:
            return []
        state = np.array(list(map(_BUDGET_STATE, budgets)), dtype=np.float64).reshape(-1, 4)
        tokens, at_s, rate, started = state[:, 0], state[:, 1], state[:, 2], state[:, 3]
        spread = rate * BUDGET_SPAN_S
        size = np.where(spread > 1.0, spread, 1.0)  # size_for
        # refill: tokens_at(now_s), then the later of the two times
        elapsed = now_s - at_s
        elapsed = np.where(elapsed > 0.0, elapsed, 0.0)
        filled = tokens + elapsed * rate
        tokens = np.where(filled < size, filled, size)
        at_s = np.where(now_s > at_s, now_s, at_s)
        for budget, left, at in zip(budgets, tokens.tolist(), at_s.tolist(), strict=True):
            budget.tokens, budget.at_s = left, at
        # refusal: gain_needed (earned over what is left), None where spent
        since = (at_s - started) * rate
        earned = np.where(since > 1.0, since, 1.0)
        earned = np.where(earned < size, earned, size)
        spent = tokens < LAST_TOKEN
        with np.errstate(divide="ignore", invalid="ignore"):
            needed = np.where(spent, math.nan, min_gain * earned / np.where(spent, 1.0, tokens))
        goes = ~spent & ~(np.asarray(gains, dtype=np.float64) < needed)
        refusals: list[str | None] = [None] * len(budgets)
        for row in np.flatnonzero(~goes).tolist():
            budget = budgets[row]
            refusals[row] = (
                budget.spent_reason
                if spent[row]
                else f"held back: {needed[row]:.1%} needed "
                f"(at most {budget.rate_per_s:g} pushes a second)"
            )
        return refusals

    def refusal(self, gain: float, min_gain: float) -> str | None:
        """Why a push for this predicted gain is held back, as of the last refill (None: it
        goes). Nothing changes: a fleet's step reads it for the rows whose gain the budget
        holds back (xapp/control_loop.py), then ``admit`` gives the others the same answer."""
        needed = self.gain_needed(min_gain)
        if needed is not None and not gain < needed:
            return None
        if needed is None:
            return self.spent_reason
        return f"held back: {needed:.1%} needed (at most {self.rate_per_s:g} pushes a second)"

    @property
    def spent_reason(self) -> str:
        """Why a push for a gain is held back while the budget is spent."""
        return _spent_reason(self.rate_per_s)

    @staticmethod
    def spent_reason_for(rate_per_s: float) -> str:
        """``spent_reason`` of a budget of this rate."""
        return _spent_reason(rate_per_s)

    def spend(self) -> None:
        self.tokens -= 1.0  # below zero after a push that could not wait: repaid by refills

    def refund(self) -> None:
        """A push that never reached its agent (withdrawn, failed) costs nothing."""
        self.tokens = min(self.size, self.tokens + 1.0)


_GAIN_REASON = "predicted gain {:.1%}"
_GAIN_AND_PROPOSAL_REASON = (_GAIN_REASON + ": {}").format
_OUT_OF_REACH = "held back: at most {:.1%} to gain, {:.1%} needed"


@cache
def _spent_reason(rate_per_s: float) -> str:
    """(one string for every budget of a rate: a fleet's step words it for most of its CPEs
    at 100 ms reports)"""
    return f"held back: the push budget is spent (at most {rate_per_s:g} pushes a second)"


# The fields ``as_row`` reads of a budget, but its size (worked out from the rate).
_BUDGET_STATE = attrgetter("tokens", "at_s", "rate_per_s", "started_s")


@dataclass(frozen=True)
class Hysteresis:
    """Push when the predicted relative gain reaches ``min_gain``; or when a path appeared (it has
    a usable estimate again) or was lost while weighted (it would stall the round); or when the
    steering mode or an operator override changed. The predictions come from the policy, made
    under the same beliefs, so estimate noise alone rarely looks like a gain. A path that the
    policy merely moves between standby and a small weight is a gain question, not a path
    change, so noise on a marginal path does not cause pushes.

    A WRR weight change costs the connection nothing (no subflow is opened or closed), so the
    threshold only has to keep estimate noise from causing pushes, which the policy's
    conservative quantile already damps: 1 % (on paper-dynamic, 2 % gave 0.948 efficiency with
    39 pushes in 250 s, 1 % 0.950 with 55, 0.5 % 0.951 with 75)."""

    min_gain: float = 0.01
    # At most this many pushes a second per CPE and direction, on average, every push counted
    # (None: no limit; see PushBudget). Each push is an HTTP request at an agent and, on the
    # mainline lever, an MP_PRIO per changed subflow: at 100 ms reports a path's estimate moves
    # every period and the pushes follow it (4.4 a second per CPE and direction on a real NR
    # trace without a limit). Pushes that cannot wait are never held back.
    max_pushes_per_s: float | None = DEFAULT_MAX_PUSHES_PER_S

    def __post_init__(self) -> None:
        if self.min_gain < 0:
            raise ValueError(f"min_gain must be ≥ 0, got {self.min_gain}")
        if self.max_pushes_per_s is not None and not self.max_pushes_per_s > 0:
            raise ValueError(f"max_pushes_per_s must be > 0, got {self.max_pushes_per_s}")

    def decide(
        self,
        current: Mapping[str, int] | None,
        proposed: Mapping[str, int],
        *,
        predicted_mbps: float = 0.0,
        current_predicted_mbps: float | None = None,
        appeared: Set[str] = frozenset(),
        lost: Set[str] = frozenset(),
        mode_changed: bool = False,
        override_changed: bool = False,
    ) -> PushDecision:
        if current is None:
            return PushDecision(True, "first weights for this CPE")
        if current == proposed:  # (Mappings compare by their items)
            return PushDecision(False, "unchanged")
        if override_changed:
            return PushDecision(True, "operator override changed")
        if mode_changed:
            return PushDecision(True, "steering mode changed")
        weighted_lost = sorted(a for a in lost if current.get(a, 0) > 0)
        if weighted_lost:
            return PushDecision(True, f"weighted path lost ({', '.join(weighted_lost)})")
        newly_weighted = sorted(a for a in appeared if proposed.get(a, 0) > 0)
        if newly_weighted:
            return PushDecision(True, f"path appeared ({', '.join(newly_weighted)})")
        before = current_predicted_mbps
        if before is None or before <= 0:
            return PushDecision(
                predicted_mbps > 0, "current weights are predicted to carry nothing"
            )
        gain = predicted_mbps / before - 1
        if gain >= self.min_gain:
            return PushDecision(True, self.gain_reason(gain), for_gain=True, gain=gain)
        return PushDecision(False, self.too_small(gain))

    @staticmethod
    def gain_reason(gain: float) -> str:
        """The reason of a push for a gain."""
        return _GAIN_REASON.format(gain)

    @staticmethod
    def gain_reasons(gains: Iterable[float], proposed_for: Iterable[str]) -> list[str]:
        """A push for a gain's reason with its proposal's, for each gain and proposal reason
        (worded in C: a fleet's step at 1 s periods pushes thousands)."""
        return list(map(_GAIN_AND_PROPOSAL_REASON, gains, proposed_for))

    def too_small(self, gain: float) -> str:
        """The reason a gain below the threshold is not pushed."""
        return f"{self.gain_reason(gain)} {self._below}"

    def too_small_many(self, gains: Iterable[float]) -> list[str]:
        """``too_small`` of each gain, worded in C (a fleet's held rows, every step)."""
        return list(map(self._too_small_format, gains))

    @staticmethod
    def out_of_reach(at_most: float, needed: float) -> str:
        """Why new weights are not worked out when no weights could gain what a push needs
        (``WeightPolicy.answer_rows``' bound)."""
        return _OUT_OF_REACH.format(at_most, needed)

    @staticmethod
    def out_of_reach_many(at_most: Iterable[float], needed: Iterable[float]) -> list[str]:
        """``out_of_reach`` of each pair, worded in C (at 100 ms reports, most of a fleet's
        rows are held back so, with new figures every step)."""
        return list(map(_OUT_OF_REACH.format, at_most, needed))

    @cached_property
    def _below(self) -> str:
        # (worded once: a fleet's step gives this reason to most of its CPEs)
        return f"below {self.min_gain:.1%}"

    @cached_property
    def _too_small_format(self) -> Callable[[float], str]:
        # (``too_small``'s words with the threshold in, braces in them kept as they are)
        below = self._below.replace("{", "{{").replace("}", "}}")
        return f"{_GAIN_REASON} {below}".format

    def held_many(
        self,
        current: npt.NDArray[np.int64],
        proposed: npt.NDArray[np.int64],
        predicted_mbps: npt.NDArray[np.float64],
        current_predicted_mbps: npt.NDArray[np.float64],
        cannot_wait: npt.NDArray[np.bool_],
    ) -> HeldRows:
        """``decide`` for many rows with weights in force over the same paths (columns), as
        arrays. ``cannot_wait``: rows with an override or mode changed, a weighted path lost
        or a path appeared that the proposal weights (``decide`` pushes those unless
        unchanged)."""
        unchanged = (current == proposed).all(axis=1)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            gain = predicted_mbps / current_predicted_mbps - 1
        waits = ~cannot_wait & (current_predicted_mbps > 0)
        small = waits & (gain < self.min_gain)
        for_gain = waits & ~unchanged & (gain >= self.min_gain)
        return HeldRows(unchanged | small, unchanged, gain, for_gain)


class HeldRows(NamedTuple):
    """``Hysteresis.held_many``'s answer, per row. A row neither held nor pushed for a gain
    alone is decided by ``decide`` (a push that cannot wait, or a reason of its own)."""

    held: npt.NDArray[np.bool_]  # the weights stay (decide: no push)
    unchanged: npt.NDArray[np.bool_]  # of those, the rows proposing the weights in force
    gain: npt.NDArray[np.float64]  # the predicted relative gain of each row
    # decide pushes for the gain alone (``PushDecision.for_gain``): the push limit may hold it
    for_gain: npt.NDArray[np.bool_]
