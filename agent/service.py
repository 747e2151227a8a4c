"""Apply weight updates safely: validate, write, read back, roll back, persist, reapply.

The only path from a request to the kernel. A request that fails validation changes nothing;
a write the kernel refuses, or that reads back different, is rolled back to the previous state;
the last good state is kept in a file and written again when the agent starts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from ipaddress import IPv4Address
from typing import Any, cast

from agent.backends.base import Backend, BackendError, PathWeight
from agent.config import AgentConfig
from core.domain import Direction
from core.sequence import SPACE, in_space, is_after, next_after

log = logging.getLogger(__name__)

MAX_WEIGHT = 255


class UpdateRejectedError(ValueError):
    """A request that cannot be applied as asked; ``status`` is the HTTP status it maps to."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class ApplyFailedError(RuntimeError):
    """The kernel refused the write or read back something else; the previous state is back."""


@dataclass(frozen=True)
class WeightUpdate:
    cpe_id: str
    direction: Direction
    weights: Mapping[str, int]
    sequence: int
    requested_by: str = "xapp"
    # The sender's owner epoch (a fencing token): when the xApp replica controlling the CPE
    # took it over. A set from an earlier owner is refused once a later owner's was applied,
    # so a replica that stalled past its lease cannot overwrite its successor's weights.
    epoch: int = 0


@dataclass(frozen=True)
class LocalAction:
    """Something the agent did on its own (a carrier lost or back), numbered in its order."""

    sequence: int
    access: str
    event: str
    result: str
    at_s: float
    carrier_up: bool


@dataclass(frozen=True)
class AppliedWeights:
    cpe_id: str
    direction: str
    weights: dict[str, int]
    sequence: int
    requested_by: str
    applied_at_s: float
    epoch: int = 0


# Owner epochs are milliseconds of the wall clock when a replica took a CPE over: 2^53 (JSON's
# exact integers) is far beyond any of them.
MAX_EPOCH = 2**53


def _not_following(update: WeightUpdate | AppliedWeights, current: AppliedWeights) -> str | None:
    """Why ``update`` may not replace ``current`` (None: it may). A later owner (a higher
    epoch) replaces whatever the earlier one set; an earlier owner's set is refused (fenced);
    within one owner the sequence must move on."""
    if update.epoch > current.epoch:
        return None
    if update.epoch < current.epoch:
        return (
            f"owner epoch {update.epoch} is older than {current.epoch}, the one in force: "
            "another xApp replica has taken this CPE over"
        )
    if is_after(update.sequence, current.sequence):
        return None
    return (
        f"sequence {update.sequence} is not after {current.sequence}, the one in force"
        f" (numbers wrap at {SPACE}: the next is {next_after(current.sequence)})"
    )


def _replays(update: WeightUpdate, current: AppliedWeights) -> bool:
    """``update`` is the set in force, sent again: the xApp repeats a set whose answer it lost
    (its call timed out after the agent had taken it). Answered with what is in force, as a
    PUT of the same thing is, rather than refused as not after itself."""
    return (
        update.epoch == current.epoch
        and update.sequence == current.sequence
        and update.direction.value == current.direction
        and dict(update.weights) == current.weights
    )


# What became of one set of a batch: applied, or why not.
Outcome = AppliedWeights | UpdateRejectedError | ApplyFailedError


class WeightService:
    def __init__(
        self,
        config: AgentConfig,
        backend: Backend,
        is_local_address: Callable[[IPv4Address], bool] = lambda address: True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.backend = backend
        self._is_local = is_local_address
        self._clock = clock
        self._lock = threading.Lock()
        # Group commit of the state file: changes counted under _lock, written under its own.
        self._persist_lock = threading.Lock()
        self._changes = 0
        self._persisted = 0
        self._applied: dict[str, AppliedWeights] = {}
        # Accesses whose carrier is lost, and those back whose weight waits for the xApp.
        self._carrier_down: set[str] = set()
        self._awaiting_xapp: set[str] = set()
        self.local_actions: list[LocalAction] = []  # the newest last, at most 100
        self._local_sequence = 0
        self._new_action = threading.Condition(self._lock)
        # Called (from the carrier thread) after each local action: wakes held long polls.
        self.on_action: list[Callable[[], None]] = []

    @property
    def directions(self) -> frozenset[Direction]:
        """What this agent's kernel steers: its own sending, and the peer's where the lever
        signals to it (mainline's backup flag goes to the proxy as MP_PRIO, and the proxy has
        no lever of its own there)."""
        if self.backend.steers_peer:
            return frozenset(Direction)
        return frozenset({self.config.direction})

    def applied(self, cpe_id: str) -> AppliedWeights | None:
        with self._lock:
            return self._applied.get(cpe_id)

    def applied_page(
        self, direction: Direction, after: str, limit: int
    ) -> tuple[list[AppliedWeights], bool]:
        """The direction's sets in force of the CPEs after ``after`` in the order of their ids,
        at most ``limit``, and whether more follow (a restarted xApp learns a fleet's in
        pages)."""
        with self._lock:
            ids = sorted(
                c for c, a in self._applied.items() if c > after and a.direction == direction.value
            )
            return [self._applied[c] for c in ids[:limit]], len(ids) > limit

    def validate(self, update: WeightUpdate) -> list[PathWeight]:
        if update.direction not in self.directions:
            raise UpdateRejectedError(
                f"this agent is the {self.config.role}'s and applies {self.config.direction.value} "
                f"weights, not {update.direction.value}"
            )
        try:
            addresses = self.config.cpe_addresses(update.cpe_id)
        except KeyError as error:
            raise UpdateRejectedError(str(error.args[0]), 404) from error
        if not update.weights:
            raise UpdateRejectedError("weights: at least one access is needed")
        paths = []
        for access, weight in update.weights.items():
            if access not in addresses:
                known = ", ".join(sorted(addresses))
                raise UpdateRejectedError(
                    f"weights.{access}: unknown access (this agent knows {known})"
                )
            if (
                isinstance(weight, bool)
                or not isinstance(weight, int)
                or not 0 <= weight <= MAX_WEIGHT
            ):
                raise UpdateRejectedError(
                    f"weights.{access}: {weight!r} is not an integer in 0..{MAX_WEIGHT}"
                )
            address = addresses[access]
            if self.config.role == "cpe" and not self._is_local(address):
                raise UpdateRejectedError(
                    f"weights.{access}: {address} is not an address of this host"
                )
            paths.append(PathWeight(update.cpe_id, access, address, weight))
        if all(p.weight == 0 for p in paths):
            raise UpdateRejectedError("weights: at least one access needs a weight above 0")
        if not in_space(update.sequence):
            raise UpdateRejectedError(f"sequence: {update.sequence} is not in 0..{SPACE - 1}")
        return paths

    def apply(self, update: WeightUpdate) -> AppliedWeights:
        (outcome,) = self.apply_many([update])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def apply_many(self, updates: Sequence[WeightUpdate]) -> list[Outcome]:
        """Several CPEs' sets, each accepted or refused on its own as ``apply`` would, written
        to the kernel and the state file once for all of them: a proxy serving a thousand CPEs
        takes them in batches, not one whole-table write per CPE. A kernel write or state file
        that fails refuses every set it carried, and the previous weights stay in force."""
        outcomes: list[Outcome | None] = [None] * len(updates)
        checked: list[tuple[int, WeightUpdate]] = []
        for index, update in enumerate(updates):
            try:
                self.validate(update)
            except UpdateRejectedError as error:
                outcomes[index] = error
                continue
            checked.append((index, update))
        with self._lock:
            chosen = self._choose(checked, outcomes)
            if chosen:
                previous = self._kernel_paths()
                # A new set from the xApp ends any wait for it after a carrier came back.
                awaiting, self._awaiting_xapp = self._awaiting_xapp, set()
                rules = self._within_rule_limit(chosen, outcomes)
                if not chosen:  # every set refused: nothing new from the xApp after all
                    self._awaiting_xapp = awaiting
            if chosen:
                try:
                    self._write_checked(rules, previous)
                except ApplyFailedError as error:
                    for index, _ in chosen.values():
                        outcomes[index] = error
                    chosen = {}
            before = dict(self._applied)
            for cpe_id, (_, applied) in chosen.items():
                self._applied[cpe_id] = applied
            self._changes += bool(chosen)
            change = self._changes
        if chosen:
            try:
                self._persist_through(change)
            except OSError as error:
                failed = self._undo(chosen, before, error)
                for index, _ in chosen.values():
                    outcomes[index] = failed
                chosen = {}
        for index, applied in chosen.values():
            outcomes[index] = applied
            log.info(
                "applied %s weights %s for %s (sequence %d, owner epoch %d) as asked by %s",
                applied.direction,
                applied.weights,
                applied.cpe_id,
                applied.sequence,
                applied.epoch,
                applied.requested_by,
            )
        return [cast(Outcome, outcome) for outcome in outcomes]

    def _choose(
        self, checked: list[tuple[int, WeightUpdate]], outcomes: list[Outcome | None]
    ) -> dict[str, tuple[int, AppliedWeights]]:
        """The sets that follow the one in force for their CPE (under the lock); of two for
        one CPE in a batch, the later sequence wins and the other is refused as overtaken."""
        chosen: dict[str, tuple[int, AppliedWeights]] = {}
        for index, update in checked:
            earlier = chosen.get(update.cpe_id)
            current = earlier[1] if earlier is not None else self._applied.get(update.cpe_id)
            if earlier is None and current is not None and _replays(update, current):
                outcomes[index] = current  # in force already: nothing to write
                continue
            refusal = None if current is None else _not_following(update, current)
            if refusal is not None:
                outcomes[index] = UpdateRejectedError(refusal, 409)
                continue
            if earlier is not None:
                outcomes[earlier[0]] = UpdateRejectedError(
                    f"sequence {earlier[1].sequence} was overtaken by {update.sequence} for"
                    f" {update.cpe_id} in the same batch",
                    409,
                )
            chosen[update.cpe_id] = (
                index,
                AppliedWeights(
                    update.cpe_id,
                    update.direction.value,
                    dict(update.weights),
                    update.sequence,
                    update.requested_by,
                    self._clock(),
                    update.epoch,
                ),
            )
        return chosen

    def _within_rule_limit(
        self, chosen: dict[str, tuple[int, AppliedWeights]], outcomes: list[Outcome | None]
    ) -> list[PathWeight]:
        """Every rule the kernel will hold (under the lock); sets that would take it past
        ``max_rules`` are refused, in the batch's order, and left out of ``chosen``."""
        rules = [
            p
            for cpe_id, applied in self._applied.items()
            if cpe_id not in chosen
            for p in self._effective(self._paths(applied))
        ]
        for cpe_id, (index, applied) in list(chosen.items()):
            paths = self._effective(self._paths(applied))
            if len(rules) + len(paths) > self.config.max_rules:
                outcomes[index] = UpdateRejectedError(
                    f"more than {self.config.max_rules} rules on this agent"
                )
                del chosen[cpe_id]
                kept = self._applied.get(cpe_id)  # its set in force stays in the kernel
                if kept is not None:
                    rules += self._effective(self._paths(kept))
                continue
            rules += paths
        return rules

    def _undo(
        self,
        chosen: dict[str, tuple[int, AppliedWeights]],
        before: dict[str, AppliedWeights],
        error: OSError,
    ) -> ApplyFailedError:
        """Applied but not remembered would come back older after a restart: undo what this
        batch applied, unless a later set for the CPE has replaced it meanwhile (that one
        answers for itself)."""
        with self._lock:
            for cpe_id, (_, applied) in chosen.items():
                if self._applied.get(cpe_id) is not applied:
                    continue
                if cpe_id in before:
                    self._applied[cpe_id] = before[cpe_id]
                else:
                    del self._applied[cpe_id]
            undone = [p for a in self._applied.values() for p in self._effective(self._paths(a))]
            self._write_checked(undone, self._kernel_paths())
        return ApplyFailedError(
            f"cannot save the state file {self.config.state_file}: "
            f"{error.strerror or error}; the previous weights are back in force"
        )

    def restore(self) -> list[AppliedWeights]:
        """Write the last good state again (agent or host restart).

        Each entry is checked as a request would be: the file may be older than the
        configuration (a CPE or access since removed), or edited by hand. What does not pass is
        skipped, with its reason in the log; the agent starts either way.
        """
        path = self.config.state_file
        if not path.exists():
            return []
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            log.error("state file %s unreadable, starting without weights: %s", path, error)
            return []
        entries = raw.get("applied") if isinstance(raw, dict) else None
        if not isinstance(entries, list):
            log.error("state file %s has no list of applied weights; starting without", path)
            return []
        restored = []
        for index, item in enumerate(entries):
            try:
                restored.append(self._checked_entry(item))
            except (UpdateRejectedError, ValueError, TypeError) as error:
                log.error("state file %s: entry %d skipped: %s", path, index, error)
        newest: dict[str, AppliedWeights] = {}  # a file with two entries for a CPE: the later
        for entry in restored:
            kept = newest.get(entry.cpe_id)
            if kept is None or _not_following(entry, kept) is None:
                newest[entry.cpe_id] = entry
            if kept is not None:
                log.error(
                    "state file %s: two entries for %s; kept sequence %d",
                    path,
                    entry.cpe_id,
                    newest[entry.cpe_id].sequence,
                )
        restored = list(newest.values())
        with self._lock:
            paths = [p for a in restored for p in self._paths(a)]
            self._write_checked(paths, [])
            self._applied = {a.cpe_id: a for a in restored}
        log.info("reapplied the last good weights of %d CPEs from %s", len(restored), path)
        return restored

    def _checked_entry(self, item: object) -> AppliedWeights:
        if not isinstance(item, dict):
            raise TypeError("not an object")
        expected = {"cpe_id", "direction", "weights", "sequence", "requested_by", "applied_at_s"}
        # ``epoch``: absent from the files agents wrote before owner epochs (read as 0)
        if not expected <= set(item) <= expected | {"epoch"}:
            raise ValueError(f"fields {sorted(item)} instead of {sorted(expected)}")
        epoch = item.get("epoch", 0)
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch <= MAX_EPOCH:
            raise TypeError(f"epoch {epoch!r} is not an integer in 0..{MAX_EPOCH}")
        cpe_id, weights, sequence = item["cpe_id"], item["weights"], item["sequence"]
        if not isinstance(cpe_id, str) or not isinstance(weights, dict):
            raise TypeError("cpe_id must be a string and weights an object")
        if isinstance(sequence, bool) or not isinstance(sequence, int):
            raise TypeError(f"sequence {sequence!r} is not an integer")
        at_s = item["applied_at_s"]
        if isinstance(at_s, bool) or not isinstance(at_s, int | float):
            raise TypeError(f"applied_at_s {at_s!r} is not a number")
        update = WeightUpdate(cpe_id, Direction(item["direction"]), weights, sequence)
        self.validate(update)
        return AppliedWeights(
            cpe_id,
            update.direction.value,
            dict(weights),
            sequence,
            str(item["requested_by"]),
            float(at_s),
            epoch,
        )

    def set_carrier(self, access: str, up: bool) -> LocalAction | None:
        """The agent's own reaction to an access losing or regaining carrier.

        Lost: every path on it goes to weight 0 (standby) at once, so the scheduler stops
        waiting on a dead subflow, unless that would leave a CPE with no path at all. Back: the
        xApp's weights apply again, or (``carrier_return: wait``) the path waits for the xApp's
        next set. The xApp's sets stay as they were: the local action is shown beside them
        (`effective`, `local_actions`) and sequenced on its own.
        """
        with self._lock:
            if up == (access not in self._carrier_down):
                return None
            previous = self._kernel_paths()
            if up:
                self._carrier_down.discard(access)
                if self.config.carrier_return == "wait":
                    self._awaiting_xapp.add(access)
            else:
                self._carrier_down.add(access)
            self._backend_carrier(access, up)
            self._write_checked(self._kernel_paths(), previous)
            self._local_sequence += 1
            action = LocalAction(
                self._local_sequence,
                access,
                "carrier back" if up else "carrier lost",
                "waits for the xApp"
                if up and access in self._awaiting_xapp
                else ("the xApp's weight again" if up else "weight 0 (standby)"),
                self._clock(),
                up,
            )
            self.local_actions = [*self.local_actions[-99:], action]
            self._new_action.notify_all()
        for wake in self.on_action:
            wake()
        log.warning("%s on %s: %s", action.event, access, action.result)
        return action

    def actions_since(self, sequence: int) -> tuple[int, list[LocalAction]]:
        """As ``actions_after`` without waiting, and without the lock (a kernel write may hold
        it): an event loop may call it. The list is replaced whole, never changed in place."""
        latest, kept = self._local_sequence, self.local_actions
        if sequence > latest:
            sequence = 0
        return latest, [a for a in kept if a.sequence > sequence]

    def actions_after(self, sequence: int, wait_s: float) -> tuple[int, list[LocalAction]]:
        """The local actions numbered above ``sequence`` (waiting up to ``wait_s`` for one),
        and the latest number. A ``sequence`` above the latest is from an earlier run of the
        agent: then every action kept is new to the asker."""
        deadline = time.monotonic() + wait_s
        with self._new_action:
            if sequence > self._local_sequence:
                sequence = 0
            while self._local_sequence <= sequence:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._new_action.wait(left)
            return self._local_sequence, [a for a in self.local_actions if a.sequence > sequence]

    def _backend_carrier(self, access: str, up: bool) -> None:
        """A backend that can do more than weight 0 for a dead link (mainline takes the
        endpoint out, so the kernel moves what was in flight there at once) is told."""
        hook = getattr(self.backend, "set_carrier", None)
        if hook is None or self.config.role != "cpe" or access not in self.config.accesses:
            return
        # Whether the path carries once back (its weight after the agent's own reactions):
        # the backend then adds its endpoint with that priority from the start.
        carries = up and any(p.weight > 0 for p in self._kernel_paths() if p.access == access)
        try:
            entry = self.config.accesses[access]
            hook(entry.address, entry.interface, up, carries)
        except BackendError as error:  # the weight 0 below still applies
            log.error("carrier %s on %s: %s", "back" if up else "lost", access, error)

    def effective(self, cpe_id: str) -> dict[str, int] | None:
        """What the kernel holds for a CPE after the agent's own reactions."""
        with self._lock:
            applied = self._applied.get(cpe_id)
            if applied is None:
                return None
            return {p.access: p.weight for p in self._effective(self._paths(applied))}

    @property
    def carrier_down(self) -> list[str]:
        with self._lock:
            return sorted(self._carrier_down)

    def _effective(self, paths: list[PathWeight]) -> list[PathWeight]:
        held = self._carrier_down | self._awaiting_xapp
        masked = [replace(p, weight=0) if p.access in held else p for p in paths]
        return masked if any(p.weight > 0 for p in masked) else paths

    def _kernel_paths(self) -> list[PathWeight]:
        return [p for a in self._applied.values() for p in self._effective(self._paths(a))]

    def _paths(self, applied: AppliedWeights) -> list[PathWeight]:
        addresses = self.config.cpe_addresses(applied.cpe_id)
        return [PathWeight(applied.cpe_id, a, addresses[a], w) for a, w in applied.weights.items()]

    def _write_checked(self, paths: list[PathWeight], previous: list[PathWeight]) -> None:
        try:
            self.backend.write(paths)
            held = self.backend.read(paths)
            wanted = {(p.cpe_id, p.access): p.weight for p in paths}
            if dict(held) != wanted:
                raise BackendError(f"the kernel reads back {dict(held)} instead of {wanted}")
        except BackendError as error:
            log.error("write failed, rolling back: %s", error)
            try:
                self.backend.write(previous)
            except BackendError as rollback_error:
                log.critical("rollback failed too: %s", rollback_error)
                raise ApplyFailedError(
                    f"{error}; rollback failed as well: {rollback_error}"
                ) from error
            raise ApplyFailedError(f"{error}; the previous weights are back in force") from error

    def _persist_through(self, change: int) -> None:
        """The state file holds change ``change`` or a later one when this returns (group
        commit: sets that arrive while the file is being written are saved together by the next
        write, one fsync for all of them, so a proxy serving a thousand CPEs is not held to one
        file write per set)."""
        with self._persist_lock:
            if self._persisted >= change:
                return
            with self._lock:
                entries = [asdict(a) for a in self._applied.values()]
                upto = self._changes
            self._persist(entries)
            self._persisted = upto

    def _persist(self, entries: list[dict[str, Any]]) -> None:
        path = self.config.state_file
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        text = json.dumps({"applied": entries}, indent=1)
        try:
            with open(temporary, "w") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
