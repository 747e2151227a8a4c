"""The small interfaces the control loop depends on; adapters elsewhere implement them.

KPI sources (E2 over RMR, the standalone E2 stream, the simulator), estimators (probes, KPIs, ML,
fusion), weight sinks (the agents' HTTP API, a recorder) and state stores (SDL, memory) are all
swappable without the control loop knowing which one it has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from core.domain import (
    CapacityEstimate,
    Direction,
    KpiSample,
    Override,
    ProbeOutcome,
    ProbeRecord,
    ProbeRequest,
    SaturatedPeriod,
    SubscriptionRecord,
    WeightSet,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from core.slots import Places, Slots
    from xapp.estimators.said import EstimateRows


class KpiSource(Protocol):
    """Delivers the KPI samples that arrived since the last poll."""

    def poll(self, now_s: float) -> Sequence[KpiSample]: ...


class CapacityEstimator(Protocol):
    """Turns KPI samples into per-path capacity beliefs; ``estimate`` has no side effects."""

    name: str

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None: ...

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None: ...


# An estimate as five plain numbers: (0 said nothing, 1 an estimate, 2 only a lower bound;
# capacity, σ, measured at, 1 available or 0 not). A fleet's step reads every source's word on
# thousands of paths several times; as numbers it goes into arrays at once.
Said = tuple[float, float, float, float, float]


@runtime_checkable
class SaysMany(Protocol):
    """An estimator that gives its estimates of many paths as numbers (``Said``), what
    ``estimate`` gives one by one: kept so as they are made, not converted at each reading."""

    def said_many(self, paths: Sequence[tuple[str, str, Direction]]) -> list[Said]: ...


@runtime_checkable
class SaysAsTable(Protocol):
    """An estimator that keeps its estimates as a table and gives many paths' as one array
    (paths, 5), a ``Said``'s fields per row: fusion reads a fleet's without a tuple per path."""

    def said_rows(
        self, paths: Sequence[tuple[str, str, Direction]] | Places[tuple[str, str, Direction]]
    ) -> npt.NDArray[np.float64]: ...


@runtime_checkable
class ManyEstimates(Protocol):
    """An estimator that answers for many paths at once what ``estimate`` answers one by one
    (a fleet's step asks for thousands)."""

    def estimate_many(
        self, paths: Sequence[tuple[str, str, Direction]], now_s: float
    ) -> list[CapacityEstimate | None]: ...


@runtime_checkable
class EstimatesAsRows(Protocol):
    """An estimator that answers ``estimate_many`` as columns of numbers (``EstimateRows``):
    a fleet's step puts them into its questions without an estimate object per path."""

    def estimate_rows(
        self,
        paths: Sequence[tuple[str, str, Direction]] | Places[tuple[str, str, Direction]],
        now_s: float,
    ) -> EstimateRows:
        """``Places``: the paths with their places in the estimator's ``path_slots`` (a
        ``PlacesPaths`` estimator), which the caller has."""


@runtime_checkable
class PlacesPaths(Protocol):
    """An estimator that keeps its paths' state in columns by their places (``path_slots``):
    the control loop keeps its own by the same places, and a step's paths are looked up once
    for both."""

    path_slots: Slots[tuple[str, str, Direction]]


@runtime_checkable
class CarrierAware(Protocol):
    """An estimator that wants the agents' word on carrier (to hold its probes meanwhile)."""

    def carrier_changed(self, cpe_id: str, access: str, up: bool, now_s: float) -> None: ...


class Prober(Protocol):
    """Runs active probes somewhere (the agents, or the evaluator's simulated paths).

    ``start`` must not block for the probe's duration; results come back through ``collect``.
    """

    def start(self, request: ProbeRequest, now_s: float) -> None: ...

    def collect(self, now_s: float) -> Sequence[ProbeOutcome]: ...


class ProbeRecordStore(Protocol):
    """Where probe results are kept with the KPIs of their moment, for retraining the models."""

    def append_probe_record(self, record: ProbeRecord) -> None: ...

    def load_probe_records(self) -> Sequence[ProbeRecord]: ...


class SaturatedPeriodStore(Protocol):
    """Where periods in which a path was saturated are kept, for retraining the models: a few
    slots per path, so what is kept stays bounded; ``slot`` says which one a period replaces.
    Written in batches (one round trip for a step's periods, whatever the fleet's size)."""

    def put_saturated_periods(self, periods: Sequence[tuple[SaturatedPeriod, int]]) -> None: ...

    def load_saturated_periods(self) -> Sequence[SaturatedPeriod]: ...


class WeightPushError(RuntimeError):
    """A sink could not apply a weight set; the previous weights stay in force.

    ``held`` is what the agent holds when the sink could find out after an uncertain outcome
    (a refused sequence, a lost answer, a server error): the loop continues from it rather than
    reusing a sequence the agent has already seen.
    """

    def __init__(self, message: str, held: WeightSet | None = None) -> None:
        super().__init__(message)
        self.held = held


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


@runtime_checkable
class StatesOfMany(Protocol):
    """A StateStore that reads many CPEs' and directions' weights in force and overrides at
    once, what ``load_weights`` and ``load_override`` read one by one: a fleet's step reads
    thousands of each, and a call and a lock each cost more than the look-up."""

    def states_of(
        self, keys: Sequence[tuple[str, Direction]]
    ) -> tuple[list[WeightSet | None], list[Override | None]]: ...


class SubscriptionStore(Protocol):
    """Where the E2 subscriptions live between restarts (SDL in a RIC, memory in tests)."""

    def save_subscription(self, record: SubscriptionRecord) -> None: ...

    def load_subscriptions(self) -> Sequence[SubscriptionRecord]: ...

    def delete_subscription(self, node: str) -> None: ...


class StaleVersionError(RuntimeError):
    """The documents changed since the version a change was based on (another replica wrote):
    nothing was written; read them again and decide again."""


class DocumentStore(Protocol):
    """JSON documents under keys (the operator's overrides and CPE registry), shared by every
    replica: one version number counts the changes, and a change is written whole, and only if
    the documents are still at the version it was decided on (compare-and-set)."""

    def find_documents(self, prefix: str) -> dict[str, dict[str, Any]]: ...

    def documents_version(self) -> int:
        """How many changes were committed (0: none yet)."""
        ...

    def read_documents(self, prefix: str) -> tuple[int, dict[str, dict[str, Any]]]:
        """The documents under ``prefix`` and the version they are at, read consistently."""
        ...

    def commit_documents(
        self,
        expected_version: int,
        puts: Mapping[str, Mapping[str, Any]],
        deletes: Sequence[str] = (),
    ) -> int:
        """Write ``puts`` and remove ``deletes`` all together, if the version is still
        ``expected_version`` (else StaleVersionError, nothing written); the new version."""
        ...


class AuditLog(Protocol):
    """The operator's audit log: appended to, read newest first a page at a time, bounded."""

    def append(self, entry: Mapping[str, Any]) -> None: ...

    def page(self, limit: int, before: str | None = None, cpe_id: str | None = None) -> Any: ...


class LeaseStore(Protocol):
    """Atomic compare-and-set on raw values: what leases between replicas are built on."""

    def get_raw(self, key: str) -> bytes | None: ...

    def set_if_absent(self, key: str, value: bytes) -> bool: ...

    def replace_if(self, key: str, old: bytes, new: bytes) -> bool: ...

    def remove_if_equal(self, key: str, old: bytes) -> bool: ...

    def raw_keys(self, prefix: str) -> list[str]: ...

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """Several values in one round trip (None for a key not there)."""
        ...

    def compare_and_set_many(self, ops: Sequence[LeaseOp]) -> list[bool]:
        """Several compare-and-sets in one round trip, each atomic on its own; whether each
        took. An op is (kind, key, old, new): ``absent`` sets ``new`` if the key is not there,
        ``replace`` sets ``new`` if the value is ``old``, ``remove`` removes it if it is."""
        ...


LeaseOp = tuple[str, str, bytes | None, bytes | None]


def apply_lease_op(store: LeaseStore, op: LeaseOp) -> bool:
    """One op of ``compare_and_set_many`` through the single-key calls (a store without a
    batch of its own)."""
    kind, key, old, new = op
    if kind == "absent" and new is not None:
        return store.set_if_absent(key, new)
    if kind == "replace" and old is not None and new is not None:
        return store.replace_if(key, old, new)
    if kind == "remove" and old is not None:
        return store.remove_if_equal(key, old)
    raise ValueError(f"not a lease op: {op!r}")


class XappStore(
    StateStore, SubscriptionStore, ProbeRecordStore, SaturatedPeriodStore, DocumentStore, Protocol
):
    """Everything the running xApp keeps: SDL in a RIC, memory when there is none."""
