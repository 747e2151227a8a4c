"""The small interfaces the control loop depends on; adapters elsewhere implement them.

KPI sources (E2 over RMR, the standalone E2 stream, the simulator), estimators (probes, KPIs, ML,
fusion), weight sinks (the agents' HTTP API, a recorder) and state stores (SDL, memory) are all
swappable without the control loop knowing which one it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from xapp.domain import (
    CapacityEstimate,
    Direction,
    KpiSample,
    Override,
    SubscriptionRecord,
    WeightSet,
)


class KpiSource(Protocol):
    """Delivers the KPI samples that arrived since the last poll."""

    def poll(self, now_s: float) -> Sequence[KpiSample]: ...


class CapacityEstimator(Protocol):
    """Turns KPI samples into per-path capacity beliefs; ``estimate`` has no side effects."""

    name: str

    def update(self, samples: Sequence[KpiSample]) -> None: ...

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None: ...


class WeightPushError(RuntimeError):
    """A sink could not apply a weight set; the previous weights stay in force."""


class WeightSink(Protocol):
    """Applies a weight set where it acts (the CPE's or the proxy's kernel, via its agent)."""

    def push(self, weight_set: WeightSet) -> None: ...


class StateStore(Protocol):
    """Where the xApp keeps what must survive a restart: weights in force and overrides."""

    def load_weights(self, cpe_id: str, direction: Direction) -> WeightSet | None: ...

    def save_weights(self, weight_set: WeightSet) -> None: ...

    def load_override(self, cpe_id: str, direction: Direction) -> Override | None: ...

    def save_override(self, override: Override) -> None: ...

    def delete_override(self, cpe_id: str, direction: Direction) -> None: ...


class SubscriptionStore(Protocol):
    """Where the E2 subscriptions live between restarts (SDL in a RIC, memory in tests)."""

    def save_subscription(self, record: SubscriptionRecord) -> None: ...

    def load_subscriptions(self) -> Sequence[SubscriptionRecord]: ...

    def delete_subscription(self, node: str) -> None: ...
