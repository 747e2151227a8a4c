"""Operator overrides: what an operator can impose on the xApp's decisions for one CPE.

Five kinds, each for one direction or both, each with a reason, who set it, when, and an
optional expiry:

- ``weights``: fixed weights, pushed as they are;
- ``exclude``: accesses the policy must not use (weight 0);
- ``steering``: a steering mode (3GPP TS 24.193 names) with its thresholds in 3GPP units (RTT in
  ms, packet loss rate in per mille) and the preferred or priority order of accesses;
- ``estimator``: which capacity estimator answers for the CPE;
- ``freeze``: no automatic updates; the weights in force stay.

Two overrides conflict when they would both decide the same thing for the same CPE and
direction: two of one kind, or fixed weights next to anything else that shapes the weights
(exclude, steering, freeze). A conflicting request is refused, naming the override in the way.
What is in force for a CPE and direction is composed into one ``core.domain.Override``, the form
the control loop reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from core.domain import Direction, Override, SteeringMode, SteeringRule, SteeringThresholds

Kind = Literal["weights", "exclude", "steering", "estimator", "freeze"]
KINDS: tuple[Kind, ...] = ("weights", "exclude", "steering", "estimator", "freeze")
# Kinds that shape the weights themselves: fixed weights leave no room for any of them.
SHAPING: frozenset[str] = frozenset({"exclude", "steering", "freeze"})


@dataclass(frozen=True)
class OperatorOverride:
    override_id: str
    cpe_id: str
    directions: tuple[Direction, ...]
    kind: Kind
    reason: str
    set_by: str
    set_at_s: float
    expires_at_s: float | None = None
    weights: Mapping[str, int] | None = None
    excluded: tuple[str, ...] = ()
    rule: SteeringRule | None = None
    estimator: str | None = None

    def active(self, now_s: float) -> bool:
        return self.expires_at_s is None or now_s < self.expires_at_s

    def conflicts_with(self, other: OperatorOverride) -> bool:
        if other.cpe_id != self.cpe_id or not set(other.directions) & set(self.directions):
            return False
        if other.kind == self.kind:
            return True
        pair = {self.kind, other.kind}
        return "weights" in pair and bool(pair & SHAPING)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.override_id,
            "cpe_id": self.cpe_id,
            "directions": [d.value for d in self.directions],
            "kind": self.kind,
            "reason": self.reason,
            "set_by": self.set_by,
            "set_at_s": self.set_at_s,
            "expires_at_s": self.expires_at_s,
            "weights": None if self.weights is None else dict(self.weights),
            "excluded": list(self.excluded),
            "steering": None if self.rule is None else rule_json(self.rule),
            "estimator": self.estimator,
        }


def rule_json(rule: SteeringRule) -> dict[str, Any]:
    return {
        "mode": rule.mode.value,
        "preferred": list(rule.preferred),
        "rtt_ms": rule.thresholds.rtt_ms,
        "loss_rate_permille": rule.thresholds.loss_rate_permille,
    }


def override_from_json(raw: Mapping[str, Any]) -> OperatorOverride:
    steering = raw.get("steering")
    rule = None
    if steering is not None:
        rule = SteeringRule(
            SteeringMode(steering["mode"]),
            tuple(steering.get("preferred", ())),
            SteeringThresholds(steering.get("rtt_ms"), steering.get("loss_rate_permille")),
        )
    weights = raw.get("weights")
    return OperatorOverride(
        override_id=str(raw["id"]),
        cpe_id=str(raw["cpe_id"]),
        directions=tuple(Direction(d) for d in raw["directions"]),
        kind=raw["kind"],
        reason=str(raw["reason"]),
        set_by=str(raw["set_by"]),
        set_at_s=float(raw["set_at_s"]),
        expires_at_s=None if raw.get("expires_at_s") is None else float(raw["expires_at_s"]),
        weights=None if weights is None else {str(k): int(v) for k, v in weights.items()},
        excluded=tuple(raw.get("excluded", ())),
        rule=rule,
        estimator=raw.get("estimator"),
    )


@dataclass(frozen=True)
class InForce:
    """What the operator imposes on one CPE and direction right now."""

    control: Override | None = None  # for the control loop; None: nothing
    estimator: str | None = None
    overrides: tuple[OperatorOverride, ...] = field(default_factory=tuple)


def compose(
    cpe_id: str,
    direction: Direction,
    overrides: Iterable[OperatorOverride],
    now_s: float,
    revision: int,
) -> InForce:
    """The overrides of one CPE and direction that are in force, as the loop reads them."""
    mine = tuple(
        o
        for o in sorted(overrides, key=lambda o: o.set_at_s)
        if o.cpe_id == cpe_id and direction in o.directions and o.active(now_s)
    )
    weights = rule = None
    excluded: set[str] = set()
    frozen = False
    estimator = None
    who = []
    for override in mine:
        who.append(override.set_by)
        if override.kind == "weights":
            weights = override.weights
        elif override.kind == "exclude":
            excluded.update(override.excluded)
        elif override.kind == "steering":
            rule = override.rule
        elif override.kind == "freeze":
            frozen = True
        elif override.kind == "estimator":
            estimator = override.estimator
    control = None
    if weights is not None or rule is not None or excluded or frozen:
        control = Override(
            cpe_id,
            direction,
            weights=weights,
            rule=rule,
            excluded=frozenset(excluded),
            frozen=frozen,
            revision=revision,
            requested_by=", ".join(dict.fromkeys(who)),
        )
    return InForce(control, estimator, mine)
