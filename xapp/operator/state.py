"""The operator's side of the xApp's state: overrides and the audit log, kept in SDL.

A change is written to SDL first and only then takes effect and is acknowledged, so a change
acknowledged is one the store has: it survives an xApp restart (and a Redis restart where Redis
persists, as the RIC's database does). While the store does not answer, changes are refused
(``StoreUnavailableError``, a 503 for the API: nothing was changed, and the store refuses the
change if it runs it later) and reads serve what was last known.

Every replica serves the same overrides: each reads them again when the store's version of the
operator's documents moves (``refresh``, once a second), and a change is checked against the
overrides at the version it is written on (compare-and-set): of two conflicting overrides set
through two replicas at once, exactly one is stored, the other is refused as a conflict.

What is in force for each CPE and direction is written for the control loop as the store's
override (``StateStore.save_override``), which the loop reads at its next decision.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from core.domain import Cpe, Direction
from xapp.adapters.audit_log import MemoryAuditLog
from xapp.operator.overrides import InForce, OperatorOverride, compose, override_from_json
from xapp.ports import AuditLog, DocumentStore, StaleVersionError, StateStore

log = logging.getLogger(__name__)

OVERRIDES = "operator/override/"


class StoreUnavailableError(RuntimeError):
    """SDL did not answer; nothing was changed."""


# A change decided on overrides another replica changed meanwhile is decided again on the new
# ones; more rounds than this means the store is too busy to decide on.
COMMIT_ROUNDS = 5


class ConflictError(ValueError):
    def __init__(self, other: OperatorOverride) -> None:
        super().__init__(
            f"conflicts with override {other.override_id} ({other.kind} on "
            f"{'/'.join(d.value for d in other.directions)}, set by {other.set_by}: "
            f"{other.reason!r})"
        )
        self.other = other


class UnknownError(LookupError):
    """An unknown CPE, access or override; the message names it."""


class OperatorState:
    def __init__(
        self,
        store: StateStore,
        documents: DocumentStore,
        cpes: Callable[[], Sequence[Cpe]],
        clock: Callable[[], float] = time.time,
        audit_log: AuditLog | None = None,
    ) -> None:
        """``audit_log``: where changes are recorded (default: a bounded log in memory)."""
        self._store = store
        self._audit = audit_log if audit_log is not None else MemoryAuditLog(100_000, 90 * 86400)
        self._cpes = cpes
        self._clock = clock
        self._lock = threading.RLock()
        self._overrides: dict[str, OperatorOverride] = {}
        self._shared = SharedDocuments(documents, OVERRIDES)
        self._revision = 0
        self._in_force: dict[tuple[str, Direction], InForce] = {}
        # The CPEs and directions on an estimator the operator chose (a fleet's few), kept as
        # ``_in_force`` changes: the loop reads them all at once at every step.
        self._estimator_choices: dict[tuple[str, Direction], str] = {}

    # ------------------------------------------------------------------ loading
    def load(self) -> None:
        """What an earlier run, or another replica, left in SDL (at start)."""
        with self._lock:
            self._load()
            self._apply_all()

    def refresh(self) -> bool:
        """Read the overrides again if another replica changed the operator's documents since;
        the CPEs whose overrides changed are applied. True when something was read."""
        with self._lock:
            if not self._shared.moved():
                return False
            before = dict(self._overrides)
            self._load()
            changed = {
                o.cpe_id
                for key in set(before) | set(self._overrides)
                if before.get(key) != self._overrides.get(key)
                for o in (before.get(key), self._overrides.get(key))
                if o is not None
            }
            for cpe_id in sorted(changed):
                self._apply(cpe_id)
            return True

    def _load(self) -> None:
        overrides = {}
        for key, raw in self._shared.read().items():
            try:
                override = override_from_json(raw)
            except (KeyError, ValueError, TypeError) as error:
                log.error("override %s in SDL is not readable, skipped: %s", key, error)
                continue
            overrides[override.override_id] = override
        self._overrides = overrides

    # ------------------------------------------------------------------ reads
    def state_age_s(self) -> float:
        """How long ago SDL last confirmed the overrides held here (they are served from memory
        whether or not it answers since)."""
        return time.monotonic() - self._shared.in_step_at

    def overrides(self, cpe_id: str | None = None) -> list[OperatorOverride]:
        with self._lock:
            return sorted(
                (o for o in self._overrides.values() if cpe_id is None or o.cpe_id == cpe_id),
                key=lambda o: o.set_at_s,
            )

    def in_force(self, cpe_id: str, direction: Direction) -> InForce:
        with self._lock:
            return self._in_force.get((cpe_id, direction), InForce())

    def estimator_choice(self, cpe_id: str, direction: Direction) -> str | None:
        return self.in_force(cpe_id, direction).estimator

    def estimator_choices(self) -> dict[tuple[str, Direction], str]:
        """``estimator_choice`` of every CPE and direction that has one (a copy)."""
        with self._lock:
            return dict(self._estimator_choices)

    def audit(
        self, limit: int = 100, cpe_id: str | None = None, before: str | None = None
    ) -> list[dict[str, Any]]:
        """The newest entries first, each with its ``id``; ``before`` an id: the page after."""
        entries: list[dict[str, Any]] = self._audit.page(limit, before, cpe_id).entries
        return entries

    # ------------------------------------------------------------------ changes
    def add(self, override: OperatorOverride) -> OperatorOverride:
        """Check, store, then apply; raises UnknownError, ConflictError, StoreUnavailableError."""
        self._check_target(override)
        with self._lock:
            for _ in range(COMMIT_ROUNDS):
                now = self._clock()
                for other in self._overrides.values():
                    if other.active(now) and override.conflicts_with(other):
                        raise ConflictError(other)
                chosen = replace(override, override_id=uuid.uuid4().hex[:12], set_at_s=now)
                key = OVERRIDES + chosen.override_id
                if not self._commit({key: chosen.as_json()}, []):
                    continue  # another replica changed them: decided again on theirs
                self._overrides[chosen.override_id] = chosen
                self._record("set", chosen.set_by, chosen, None, chosen.as_json(), chosen.reason)
                self._apply(chosen.cpe_id)
                return chosen
            raise StoreUnavailableError("the overrides kept changing; try again")

    def remove(self, override_id: str, who: str, reason: str) -> OperatorOverride:
        with self._lock:
            for _ in range(COMMIT_ROUNDS):
                override = self._overrides.get(override_id)
                if override is None and self._shared.moved():
                    self._load()  # set through another replica a moment ago?
                    override = self._overrides.get(override_id)
                if override is None:
                    raise UnknownError(f"no override {override_id!r}")
                if not self._commit({}, [OVERRIDES + override_id]):
                    continue
                del self._overrides[override_id]
                self._record("deleted", who, override, override.as_json(), None, reason)
                self._apply(override.cpe_id)
                return override
            raise StoreUnavailableError("the overrides kept changing; try again")

    def expire(self) -> list[OperatorOverride]:
        """Remove the overrides whose time is up (called every second, on every replica: the
        first to store the removal records it)."""
        with self._lock:
            for _ in range(COMMIT_ROUNDS):
                now = self._clock()
                expired = [o for o in self._overrides.values() if not o.active(now)]
                if not expired:
                    return []
                keys = [OVERRIDES + o.override_id for o in expired]
                try:
                    if not self._commit({}, keys):
                        continue
                except StoreUnavailableError:
                    return []  # they no longer apply anyway; removed when SDL is back
                for override in expired:
                    del self._overrides[override.override_id]
                    self._record("expired", "xapp", override, override.as_json(), None, "expired")
                for cpe_id in {o.cpe_id for o in expired}:
                    self._apply(cpe_id)
                return expired
            return []

    def _commit(self, puts: Mapping[str, Mapping[str, Any]], deletes: Sequence[str]) -> bool:
        """Store the change on the overrides this replica knows; False (and the overrides read
        again) when another replica changed them first."""
        if self._shared.commit(puts, deletes):
            return True
        self._load()
        return False

    # ------------------------------------------------------------------ internals
    def _check_target(self, override: OperatorOverride, cpes: Sequence[Cpe] | None = None) -> None:
        cpe = next(
            (c for c in (self._cpes() if cpes is None else cpes) if c.cpe_id == override.cpe_id),
            None,
        )
        if cpe is None:
            raise UnknownError(f"cpe_id: no CPE {override.cpe_id!r}")
        named = set(override.excluded) | set(override.weights or {})
        if override.rule is not None:
            named |= set(override.rule.preferred)
        unknown = sorted(named - set(cpe.access_names))
        if unknown:
            raise UnknownError(
                f"access: {', '.join(unknown)} is not an access of {cpe.cpe_id} "
                f"({', '.join(cpe.access_names)})"
            )
        if override.weights is not None:
            missing = sorted(set(cpe.access_names) - set(override.weights))
            if missing:
                raise UnknownError(f"weights: no weight for {', '.join(missing)}")
        self._leaves_a_path(override, cpe)

    @staticmethod
    def _leaves_a_path(override: OperatorOverride, cpe: Cpe) -> None:
        """An override that leaves the CPE no access to send on would be ignored or stall it."""
        if override.kind == "exclude" and set(cpe.access_names) <= set(override.excluded):
            raise UnknownError(
                f"excluded: {', '.join(override.excluded)} leaves {cpe.cpe_id} no access to use"
            )
        if override.weights is not None and not any(override.weights.values()):
            raise UnknownError(f"weights: all zero leaves {cpe.cpe_id} no access to use")

    def check_cpes(self, cpes: Sequence[Cpe]) -> None:
        """CPEs about to change: every override in force on them must still fit (name only
        their accesses, leave them one). Raises UnknownError naming the override."""
        now = self._clock()
        with self._lock:
            overrides = [o for o in self._overrides.values() if o.active(now)]
        for cpe in cpes:
            for override in overrides:
                if override.cpe_id != cpe.cpe_id:
                    continue
                try:
                    self._check_target(override, [cpe])
                except UnknownError as error:
                    raise UnknownError(
                        f"cpe {cpe.cpe_id}: override {override.override_id} ({override.kind}) "
                        f"would no longer fit: {error}; delete it first"
                    ) from None

    def _apply_all(self) -> None:
        for cpe in self._cpes():
            self._apply(cpe.cpe_id)

    def _apply(self, cpe_id: str) -> None:
        self._revision += 1
        now = self._clock()
        for direction in Direction:
            in_force = compose(cpe_id, direction, self._overrides.values(), now, self._revision)
            self._in_force[(cpe_id, direction)] = in_force
            if in_force.estimator is None:
                self._estimator_choices.pop((cpe_id, direction), None)
            else:
                self._estimator_choices[(cpe_id, direction)] = in_force.estimator
            try:
                if in_force.control is None:
                    self._store.delete_override(cpe_id, direction)
                else:
                    self._store.save_override(in_force.control)
            except Exception as error:  # the operator's record is safe; the loop catches up
                log.warning(
                    "override for %s %s not written for the loop: %s",
                    cpe_id,
                    direction.value,
                    error,
                )

    def _record(
        self,
        action: str,
        who: str,
        override: OperatorOverride,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
        why: str,
    ) -> None:
        what = f"{override.kind} override {override.override_id}"
        self.record(action, who, what, override.cpe_id, before, after, why)

    def record(
        self,
        action: str,
        who: str,
        what: str,
        cpe_id: str | None,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
        why: str,
    ) -> None:
        """One entry of the audit log: who did what, when and why, with before and after."""
        entry = {
            "at_s": self._clock(),
            "who": who,
            "action": action,
            "what": what,
            "cpe_id": cpe_id,
            "why": why,
            "before": before,
            "after": after,
        }
        try:
            self._audit.append(entry)
        except Exception as error:
            log.error("audit entry not stored (%s): %s", error, entry)


class SharedDocuments:
    """The operator's documents under one prefix as this replica last read or wrote them, and
    the shared version they were at: read again when another replica moved the version, and a
    change stored only on the version it was decided on."""

    def __init__(self, documents: DocumentStore, prefix: str) -> None:
        self._documents = documents
        self.prefix = prefix
        self.version = 0
        self.in_step_at = time.monotonic()  # when SDL last confirmed the version

    def moved(self) -> bool:
        """Whether another replica changed the documents since they were read here."""
        try:
            version = self._documents.documents_version()
        except Exception as error:  # ricsdl and redis raise their own types
            raise StoreUnavailableError(f"SDL did not answer: {error}") from error
        if version != self.version:
            return True
        self.in_step_at = time.monotonic()
        return False

    def read(self) -> dict[str, dict[str, Any]]:
        """Every document under the prefix, by key (the version they are at is kept)."""
        try:
            self.version, found = self._documents.read_documents(self.prefix)
        except StaleVersionError as error:
            raise StoreUnavailableError(f"SDL is too busy to read: {error}") from error
        except Exception as error:  # ricsdl and redis raise their own types
            # SDL gone between the version and the read (a Redis restart): the caller's
            # "SDL did not answer", never an error type it does not expect.
            raise StoreUnavailableError(f"SDL did not answer: {error}") from error
        self.in_step_at = time.monotonic()
        return found

    def commit(self, puts: Mapping[str, Mapping[str, Any]], deletes: Sequence[str]) -> bool:
        """Store a change whole; False when another replica changed the documents first
        (nothing stored: read them again and decide again). StoreUnavailableError when SDL did
        not carry it out. A change is kept before it counts."""
        try:
            self.version = self._documents.commit_documents(self.version, puts, deletes)
        except StaleVersionError:
            return False
        except Exception as error:  # ricsdl and redis raise their own types
            raise StoreUnavailableError(f"SDL did not take the change: {error}") from error
        self.in_step_at = time.monotonic()
        return True
