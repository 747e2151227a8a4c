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

from collections.abc import Mapping
from dataclasses import dataclass, replace

from core.domain import CapacityEstimate, Direction


@dataclass(frozen=True)
class ExplorationConfig:
    step: float = 0.25  # each raise asks for this much more than the path carried
    # A measurement below (1 - shortfall) × the raised value means the path could not keep up;
    # above the control delay's share of a period, which the old weights still carry.
    shortfall: float = 0.15
    pause_s: float = 10.0
    floor_share: float = 0.02  # of the other paths' sum, for a path held at weight 0

    def __post_init__(self) -> None:
        if not 0 < self.step <= 4:
            raise ValueError(f"exploration step must be in (0, 4], got {self.step}")
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


@dataclass
class ExplorationStats:
    raises: int = 0  # decisions that showed the policy a raised value
    overshoots: int = 0  # raises the path could not keep up with (each cost ≤ one period's step)


Key = tuple[str, str, Direction]

# A raise that integer weights cannot express yet compounds, up to this multiple of what the
# path carried; the first weight step it reaches is the smallest change the WRR can make.
MAX_RAISE = 2.0


class Exploration:
    def __init__(self, config: ExplorationConfig | None = None) -> None:
        self.config = config or ExplorationConfig()
        self._raised: dict[Key, _Raise] = {}
        self._paused_until_s: dict[Key, float] = {}
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
        out: dict[str, CapacityEstimate | None] = {}
        for access, estimate in estimates.items():
            key = (cpe_id, access, direction)
            if estimate is None or not estimate.available or not estimate.lower_bound:
                self._raised.pop(key, None)
                out[access] = estimate
                continue
            out[access] = self._view(
                key, estimate, shares.get(access, 0.0), paced_by_measured, others_mbps, now_s
            )
        return out

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
        if raised is not None:
            if bound.measured_at_s <= raised.decided_at_s:
                return replace(face_value, capacity_mbps=raised.planned_mbps)  # not judged yet
            del self._raised[key]
            reached = share > raised.share * (1 + 1e-9)
            if paced_by_measured is None and reached:
                asked = raised.carried_mbps * share / raised.share if raised.share > 0 else 0.0
                paced_by_measured = carried >= (1 - self.config.shortfall) * asked
            if reached and not paced_by_measured:
                self.stats.overshoots += 1  # it could not keep up: it carried its capacity
                self._paused_until_s[key] = now_s + self.config.pause_s
                return face_value
            if not reached:
                # The raise did not reach the path (too small a change for integer weights, or
                # not worth a push): ask for more, up to MAX_RAISE of what it carried.
                base = max(raised.carried_mbps, self._floor(others_mbps))
                planned = raised.planned_mbps * (1 + self.config.step)
                if planned <= MAX_RAISE * base:
                    self._raised[key] = replace(raised, planned_mbps=planned, decided_at_s=now_s)
                    return replace(face_value, capacity_mbps=planned)
                self._paused_until_s[key] = now_s + self.config.pause_s
                return face_value
        elif paced_by_measured is False:
            return face_value  # it set the pace itself: its bound is its capacity
        if now_s < self._paused_until_s.get(key, -1.0):
            return face_value
        start = carried if carried > 0 else self._floor(others_mbps)
        if start <= 0:
            return face_value
        planned = start * (1 + self.config.step)
        self._raised[key] = _Raise(planned, now_s, carried, share)
        self.stats.raises += 1
        return replace(face_value, capacity_mbps=planned)

    def _floor(self, others_mbps: float) -> float:
        return self.config.floor_share * max(others_mbps, 0.0)
