"""CPEs added, changed and removed at run time, on top of the configuration file, kept in SDL.

Each entry is a CPE as the configuration writes one (``core.deployment.CpeConfig``), or a
removal of a CPE the file has. The CPEs in force are the file's with the entries applied, and
must make a valid configuration as a whole (identities unique, nodes known): a change that would
not is refused, naming why, and nothing is stored. Entries outlive restarts and reloads of the
file; an entry for a CPE the file since gained replaces the file's.

A change is stored whole (an import of 3,000 CPEs: all or none) before memory takes it, and only
on the entries it was decided on: every replica reads the entries again when another changed
them (``refresh``), so all control the same CPEs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from core.deployment import CpeConfig, Deployment, DeploymentError, parse_deployment
from xapp.operator.state import (
    COMMIT_ROUNDS,
    OperatorState,
    SharedDocuments,
    StoreUnavailableError,
    UnknownError,
)
from xapp.ports import DocumentStore

CPES = "operator/cpe/"

log = logging.getLogger(__name__)


class CpeRefusedError(ValueError):
    """A CPE that fits the configuration but cannot be taken as it is (its agent cannot be set
    up, an override in force would no longer fit); the message says why, nothing is stored."""


class CpeRegistry:
    def __init__(self, documents: DocumentStore, audit: OperatorState) -> None:
        self._audit = audit
        self._lock = threading.Lock()
        # cpe id → {"cpe": the CPE as the configuration writes it} or {"removed": True}
        self._entries: dict[str, dict[str, Any]] = {}
        self._shared = SharedDocuments(documents, CPES)

    def load(self) -> None:
        with self._lock:
            self._load()

    def refresh(self) -> bool:
        """Read the entries again if another replica changed the operator's documents since;
        True when the entries changed."""
        with self._lock:
            if not self._shared.moved():
                return False
            before = self._entries
            self._load()
            return self._entries != before

    def _load(self) -> None:
        found = self._shared.read()
        self._entries = {key.removeprefix(CPES): value for key, value in found.items()}

    def entries(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._entries)

    def apply(
        self, base: Deployment, check: Callable[[Deployment, Sequence[str]], None] | None = None
    ) -> Deployment:
        """The file's deployment with the registry's entries applied. With ``check`` (at
        start), an entry that no longer fits or that ``check`` refuses (its agent cannot be set
        up) is left out with an error in the log, never a crash: it stays in SDL, to be
        replaced or removed through the API."""
        with self._lock:
            if check is None:
                return _applied(base, self._entries)
            entries = dict(self._entries)
            for cpe_id, entry in sorted(entries.items()):
                if "cpe" not in entry:
                    continue
                try:
                    check(_applied(base, {cpe_id: entry}), [cpe_id])
                except (DeploymentError, ValueError) as error:
                    log.error("run-time CPE %s left out: %s", cpe_id, error)
                    del entries[cpe_id]
            try:
                return _applied(base, entries)
            except DeploymentError:
                pass
            # They do not fit together: take them one by one, additions before removals (a
            # removal alone may leave no CPE), leaving out each that does not fit.
            kept: dict[str, dict[str, Any]] = {}
            for cpe_id, entry in sorted(entries.items(), key=lambda e: ("cpe" not in e[1], e[0])):
                try:
                    _applied(base, {**kept, cpe_id: entry})
                except DeploymentError as error:
                    log.error("run-time CPE %s left out: %s", cpe_id, error)
                    continue
                kept[cpe_id] = entry
            return _applied(base, kept)

    def put(
        self,
        base: Deployment,
        cpes: Sequence[CpeConfig],
        who: str,
        why: str,
        check: Callable[[Deployment, Sequence[str]], None] | None = None,
    ) -> Deployment:
        """Add or replace CPEs, all or none; returns the deployment now in force. ``check``
        sees the result before anything is stored and may refuse it (raises)."""
        with self._lock:
            for _ in range(COMMIT_ROUNDS):
                entries = dict(self._entries)
                for cpe in cpes:
                    entries[cpe.id] = {"cpe": cpe.model_dump(mode="json", exclude_defaults=True)}
                result = _applied(base, entries)  # raises DeploymentError when it does not fit
                if check is not None:
                    check(result, [c.id for c in cpes])
                before = {c.id: c for c in self.apply_unlocked(base).cpes}
                # every CPE of the request in one change: stored whole, or not at all
                if not self._commit({CPES + cpe.id: entries[cpe.id] for cpe in cpes}, []):
                    continue  # another replica changed the entries: decided again on theirs
                self._entries = entries
                for cpe in cpes:
                    old = before.get(cpe.id)
                    self._audit.record(
                        "cpe changed" if old else "cpe added",
                        who,
                        f"cpe {cpe.id}",
                        cpe.id,
                        None if old is None else old.model_dump(mode="json", exclude_defaults=True),
                        entries[cpe.id]["cpe"],
                        why,
                    )
                return result
            raise StoreUnavailableError("the CPEs kept changing; try again")

    def remove(self, base: Deployment, cpe_id: str, who: str, why: str) -> Deployment:
        with self._lock:
            for _ in range(COMMIT_ROUNDS):
                current = {c.id: c for c in _applied(base, self._entries).cpes}
                if cpe_id not in current:
                    raise UnknownError(f"cpe_id: no CPE {cpe_id!r}")
                entries = dict(self._entries)
                in_file = any(c.id == cpe_id for c in base.cpes)
                if in_file:
                    entries[cpe_id] = {"removed": True}
                else:
                    entries.pop(cpe_id, None)
                result = _applied(base, entries)
                stored = (
                    self._commit({CPES + cpe_id: entries[cpe_id]}, [])
                    if in_file
                    else self._commit({}, [CPES + cpe_id])
                )
                if not stored:
                    continue
                self._entries = entries
                self._audit.record(
                    "cpe removed",
                    who,
                    f"cpe {cpe_id}",
                    cpe_id,
                    current[cpe_id].model_dump(mode="json", exclude_defaults=True),
                    None,
                    why,
                )
                return result
            raise StoreUnavailableError("the CPEs kept changing; try again")

    def apply_unlocked(self, base: Deployment) -> Deployment:
        return _applied(base, self._entries)

    def _commit(self, puts: Mapping[str, Mapping[str, Any]], deletes: Sequence[str]) -> bool:
        """Store the change on the entries this replica knows; False (and the entries read
        again) when another replica changed them first."""
        if self._shared.commit(puts, deletes):
            return True
        self._load()
        return False


def _applied(base: Deployment, entries: Mapping[str, Mapping[str, Any]]) -> Deployment:
    cpes: dict[str, Any] = {
        c.id: c.model_dump(mode="json", exclude_defaults=True) for c in base.cpes
    }
    for cpe_id, entry in entries.items():
        if entry.get("removed"):
            cpes.pop(cpe_id, None)
        elif "cpe" in entry:
            cpes[cpe_id] = dict(entry["cpe"])
    document = base.model_dump(mode="json", exclude_defaults=True)
    document["cpes"] = list(cpes.values())
    try:
        return parse_deployment(document, "the CPEs in force")
    except DeploymentError as error:
        raise DeploymentError(str(error).removeprefix("the CPEs in force: ")) from None
