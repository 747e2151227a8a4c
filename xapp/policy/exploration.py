"""Exploration: a path known only from below gets a growing share until it shows its capacity.

An estimate flagged ``lower_bound`` is what the path carried while the weights held it back (its
node reports no resource KPIs that would say how much more it could take). Weighting such a
path by its bound keeps it exactly there, and an uncertainty-aware policy hedging on the bound's
spread weights it lower still, period after period: the trap. Exploration breaks it from the
policy's side. Each decision it shows the policy a raised value, the bound times ``1 + step``,
taken at face value, and looks at the next measurement:

- the path carried (nearly) what the raise asked of it: it had headroom, raise again from there
  (the share grows geometrically);
- it fell short: the path is at its capacity (in a WRR round the path that cannot keep up sets
  everyone's pace, so it carried its capacity), and exploring pauses for ``pause_s``. Meanwhile
  the bound is taken at face value, never hedged below itself.

The cost is bounded: a raise that overshoots makes the explored path the round's bottleneck
for one period, losing at most ``step / (1 + step)`` of that period's aggregate, and that
happens at most once per ``pause_s`` per path. ``stats`` counts raises and overshoots.
A path that carried nothing although it was weighted is not explored: that is a dead path, not
a held-back one. One that carried nothing because it had weight 0 starts from ``floor_share``
of what the other paths carry.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from core.domain import CapacityEstimate, Direction


@dataclass(frozen=True)
class ExplorationConfig:
    step: float = 0.25  # the first raise asks for this much more than the path carried
    # Each raise the path kept up with doubles the next one's step, up to this (slow start):
    # a path far below its capacity gets there in a few periods, while one at its capacity is
    # only ever asked for `step` more after a pause.
    max_step: float = 1.0
    # A measurement below (1 - shortfall) × the raised value means the path could not keep up;
    # above the control delay's share of a period, which the old weights still carry.
    shortfall: float = 0.15
    pause_s: float = 10.0
    floor_share: float = 0.02  # of the other paths' sum, for a path held at weight 0
    # how long what a path showed it could carry stays a guide to where it restarts
    memory_s: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.step <= 4:
            raise ValueError(f"exploration step must be in (0, 4], got {self.step}")
        if not self.step <= self.max_step <= 4:
            raise ValueError(
                f"exploration max_step must be in [step, 4], got {self.max_step} (step {self.step})"
            )
        if not 0 < self.shortfall < 1:
            raise ValueError(f"exploration shortfall must be in (0, 1), got {self.shortfall}")
        if self.pause_s < 0:
            raise ValueError(f"exploration pause_s must be ≥ 0, got {self.pause_s}")
        if not 0 < self.floor_share < 1:
            raise ValueError(f"exploration floor_share must be in (0, 1), got {self.floor_share}")


@dataclass
class _Raise:
    planned_mbps: float
    decided_at_s: float
    carried_mbps: float  # what the path carried before the raise
    share: float  # its share of the round then
    step: float  # this raise's step


@dataclass
class ExplorationStats:
    raises: int = 0  # decisions that showed the policy a raised value
    overshoots: int = 0  # raises the path could not keep up with (each cost ≤ one period's step)


Key = tuple[str, str, Direction]

# A raise that integer weights cannot express yet compounds, up to this multiple of what the
# path carried (more for a path with a small share: up to the round's rate).
MAX_RAISE = 2.0
# A path back at weight 0 restarts from this fraction of what it last showed (hedged: it may
# have come back weaker); slow start takes it from there.
RESTART_FRACTION = 0.5


class Exploration:
    def __init__(self, config: ExplorationConfig | None = None) -> None:
        self.config = config or ExplorationConfig()
        self._raised: dict[Key, _Raise] = {}
        self._paused_until_s: dict[Key, float] = {}
        self._last_turn_s: dict[Key, float] = {}
        # what each path last showed it could carry (it set the round's pace), and when
        self._shown: dict[Key, tuple[float, float]] = {}
        self.stats = ExplorationStats()

    def views(
        self,
        cpe_id: str,
        direction: Direction,
        estimates: Mapping[str, CapacityEstimate | None],
        carried_mbps: Mapping[str, float | None],
        current_weights: Mapping[str, int] | None,
        now_s: float,
    ) -> dict[str, CapacityEstimate | None]:
        """The estimates the policy should decide on: lower bounds raised or at face value,
        the rest unchanged. ``carried_mbps``: what each path carried in the last period."""
        if not any(e is not None and e.available and e.lower_bound for e in estimates.values()):
            self.end_raises(cpe_id, direction, estimates)
            return dict(estimates)
        weights = current_weights or {}
        total = sum(weights.values())
        shares = {a: w / total for a, w in weights.items()} if total else {}
        measured = [
            (e, carried_mbps.get(a))
            for a, e in estimates.items()
            if e is not None and e.available and not e.lower_bound and weights.get(a, 0) > 0
        ]
        # In a WRR round the path that cannot keep up sets everyone's pace. Was it one of the
        # measured paths (then the bounded ones were held back), or none of them?
        paced_by_measured: bool | None = None
        if measured and all(c is not None and e.capacity_mbps > 0 for e, c in measured):
            busiest = max((c or 0.0) / e.capacity_mbps for e, c in measured)
            paced_by_measured = busiest >= 1 - self.config.shortfall
        others_mbps = sum(e.capacity_mbps for e, _ in measured)
        out: dict[str, CapacityEstimate | None] = dict(estimates)
        bounded: dict[str, CapacityEstimate] = {}
        for access, estimate in estimates.items():
            if estimate is None or not estimate.available or not estimate.lower_bound:
                self._raised.pop((cpe_id, access, direction), None)
            else:
                bounded[access] = estimate
                out[access] = replace(estimate, stddev_mbps=0.0)  # face value
        if not bounded:
            return out
        # One experiment at a time: with two paths raised at once, a shortfall could not be
        # told apart. The one under way goes on; otherwise the one explored longest ago.
        under_way = [a for a in bounded if (cpe_id, a, direction) in self._raised]
        explored = (
            under_way[0]
            if under_way
            else min(
                bounded, key=lambda a: self._last_turn_s.get((cpe_id, a, direction), -math.inf)
            )
        )
        key = (cpe_id, explored, direction)
        self._last_turn_s[key] = now_s
        out[explored] = self._view(
            key, bounded[explored], shares.get(explored, 0.0), paced_by_measured, others_mbps, now_s
        )
        return out

    def end_raises(self, cpe_id: str, direction: Direction, accesses: Iterable[str]) -> None:
        """``end_raises_many`` for one CPE and direction."""
        self.end_raises_many([(cpe_id, direction)], accesses)

    def end_raises_many(
        self, questions: Iterable[tuple[str, Direction]], accesses: Iterable[str]
    ) -> None:
        """``views`` for questions with no bound to explore (a fleet's usual, asked of every
        CPE at every step, put together over the same accesses), whose estimates it passes
        unchanged: each of these (CPE, direction)'s paths' raise under way, if any, ends.
        ``questions`` is not read when no raise is under way."""
        raised = self._raised
        if raised:
            over = tuple(accesses)
            for cpe_id, direction in questions:
                for access in over:
                    raised.pop((cpe_id, access, direction), None)

    def _view(
        self,
        key: Key,
        bound: CapacityEstimate,
        share: float,
        paced_by_measured: bool | None,
        others_mbps: float,
        now_s: float,
    ) -> CapacityEstimate:
        face_value = replace(bound, stddev_mbps=0.0)
        carried = bound.capacity_mbps
        if carried <= 0 and share > 0:
            self._raised.pop(key, None)
            return face_value  # weighted and carrying nothing: dead, not held back
        raised = self._raised.get(key)
        step = self.config.step
        if raised is not None:
            if bound.measured_at_s <= raised.decided_at_s:
                return replace(face_value, capacity_mbps=raised.planned_mbps)  # not judged yet
            del self._raised[key]
            reached = share > raised.share * (1 + 1e-9)
            if reached and not self._kept_up(raised, carried, share, paced_by_measured):
                self.stats.overshoots += 1  # it could not keep up: it carried its capacity
                self._shown[key] = (carried, now_s)
                self._paused_until_s[key] = now_s + self.config.pause_s
                return face_value
            if not reached:
                # The raise did not reach the path (too small a change for integer weights, or
                # not worth a push): ask for more until it does. The first weight step it
                # reaches is the smallest change the WRR can make; it stops at twice what the
                # path carried or the whole round's rate, whichever is more.
                base = max(raised.carried_mbps, self._floor(others_mbps))
                round_mbps = raised.carried_mbps / raised.share if raised.share > 0 else 0.0
                planned = raised.planned_mbps * (1 + raised.step)
                if planned <= max(MAX_RAISE * base, round_mbps):
                    self._raised[key] = replace(raised, planned_mbps=planned, decided_at_s=now_s)
                    return replace(face_value, capacity_mbps=planned)
                self._paused_until_s[key] = now_s + self.config.pause_s
                return face_value
            step = min(2 * raised.step, self.config.max_step)  # it kept up: grow faster
        elif paced_by_measured is False or share >= 1.0:
            # it set the pace itself (or carried alone): its bound is its capacity
            if carried > 0:
                self._shown[key] = (carried, now_s)
            return face_value
        if now_s < self._paused_until_s.get(key, -1.0):
            return face_value
        start = carried if carried > 0 else self._restart_mbps(key, others_mbps, now_s)
        if start <= 0:
            return face_value
        planned = start * (1 + step)
        self._raised[key] = _Raise(planned, now_s, carried, share, step)
        self.stats.raises += 1
        return replace(face_value, capacity_mbps=planned)

    def _kept_up(
        self, raised: _Raise, carried: float, share: float, paced_by_measured: bool | None
    ) -> bool:
        """Did the path carry what its grown share asked? A measured path that set the pace says
        so; without one (no measured path weighted, or one without a throughput), compare what
        it carried with what the share asked."""
        if paced_by_measured is not None:
            return paced_by_measured
        if raised.share <= 0:
            return True  # there was no share to scale: nothing says it fell short
        asked = raised.carried_mbps * share / raised.share
        return carried >= (1 - self.config.shortfall) * asked

    def _restart_mbps(self, key: Key, others_mbps: float, now_s: float) -> float:
        """Where a path held at weight 0 starts: half of what it last showed it could carry, if
        that was recent (a path back from an outage), else a small share of the others."""
        shown = self._shown.get(key)
        floor = self._floor(others_mbps)
        if shown is None or now_s - shown[1] > self.config.memory_s:
            return floor
        return max(floor, RESTART_FRACTION * shown[0])

    def _floor(self, others_mbps: float) -> float:
        return self.config.floor_share * max(others_mbps, 0.0)
