"""Which replica controls which CPE: leases in SDL, so that with several replicas each CPE is
pushed to by exactly one of them at a time, and a dead replica's CPEs are taken over.

Every replica announces itself (a membership entry it renews) and, once a period, for each CPE:
renews the lease it holds, or takes a lease no one holds or whose holder let it expire. The
CPEs are shared out by rendezvous hashing over the live replicas (``assigned_replica``): evenly,
the same on every replica, and stable (a CPE added or removed moves no other; a replica joining
or leaving moves only its share); a replica gives up (removes) the leases of CPEs now meant for
another live replica, which takes them at its next round. Every change of a lease is a
compare-and-set, so two replicas never hold one CPE; a replica acts on a CPE only while its
lease has at least a period to run.

A lease says since when its holder holds it: that moment (in ms) is the holder's owner epoch,
sent with every push as a fencing token. An agent that applied a set of a later owner refuses
an earlier owner's, so a replica that stalled past its lease (SIGSTOP, a long GC, a partition)
cannot overwrite its successor's weights with a step it was in the middle of. Like the leases'
expiries, epochs assume the replicas' clocks agree to well within a lease (3 periods).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.sequence import epoch_at
from xapp.ports import LeaseOp, LeaseStore

log = logging.getLogger(__name__)

LEASE = "lease/cpe/"
MEMBER = "lease/replica/"


@dataclass(frozen=True)
class Lease:
    owner: str
    expires_at_s: float
    since_s: float = 0.0  # when the holder took it: its owner epoch (kept when renewed)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "owner": self.owner,
                "expires_at_s": round(self.expires_at_s, 3),
                "since_s": round(self.since_s, 3),
            }
        ).encode()

    @property
    def epoch(self) -> int:
        return epoch_at(self.since_s)


def assigned_replica(cpe_id: str, members: Sequence[str]) -> str:
    """The replica meant to control a CPE: rendezvous hashing (each replica scores each CPE,
    the highest score wins). Every replica computes the same answer from the same members, and
    a CPE added or removed moves no other CPE; a replica joining or leaving moves only the CPEs
    it takes or gives (about 1/n of them). A stable hash, not Python's ``hash`` (salted per
    process: replicas would disagree)."""
    return max(members, key=lambda member: _score(member, cpe_id))


def _score(member: str, cpe_id: str) -> bytes:
    return hashlib.blake2b(f"{member}\x00{cpe_id}".encode(), digest_size=8).digest()


def _decode(raw: bytes | None) -> Lease | None:
    if raw is None:
        return None
    try:
        found = json.loads(raw)
        return Lease(
            str(found["owner"]), float(found["expires_at_s"]), float(found.get("since_s", 0.0))
        )
    except (ValueError, KeyError, TypeError):
        return Lease("", 0.0)  # unreadable: treated as expired, and replaced


class Ownership:
    def __init__(
        self,
        store: LeaseStore,
        replica_id: str,
        period_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.replica_id = replica_id
        self.lease_s = 3 * period_s
        self._period_s = period_s
        self._clock = clock
        self._round = threading.Lock()  # one round at a time; none after release()
        self._released = False
        self._held: dict[str, bytes] = {}  # CPE → the lease value we wrote
        self._leases: dict[str, Lease] = {}  # the same, read (owned() asks every step)
        # CPE → the replica meant for it, for the members it was worked out for
        self._assigned: dict[str, str] = {}
        self._assigned_for: list[str] = []
        # CPEs another replica held a live lease on at the last round
        self._elsewhere: frozenset[str] = frozenset()
        self._lock = threading.Lock()
        self._known_members: list[str] = [replica_id]

    def owned(self) -> set[str]:
        """The CPEs this replica may act on now: a lease with at least a period to run."""
        least = self._clock() + self._period_s
        with self._lock:  # the lease thread changes them while the loop asks
            leases = self._leases
        return {cpe for cpe, lease in leases.items() if lease.expires_at_s > least}

    def epoch(self, cpe_id: str) -> int:
        """This replica's owner epoch for the CPE (0: it does not hold it)."""
        with self._lock:
            lease = self._leases.get(cpe_id)
        return 0 if lease is None else lease.epoch

    def owned_elsewhere(self) -> frozenset[str]:
        """The CPEs another replica held a live lease on at the last round: those this one
        has lost (a CPE merely short of lease, with no one else holding it, is not lost: a
        busy replica renews late, and forgetting all it knew would make it busier still)."""
        with self._lock:
            return self._elsewhere

    def refresh(self, cpe_ids: Sequence[str]) -> set[str]:
        """One round: announce, renew, take, give up. Returns the CPEs owned now.

        Two round trips to the database whatever the number of CPEs: every lease read at once,
        then every change sent at once (each a compare-and-set of its own), so that a round
        over thousands of CPEs ends well within a lease."""
        with self._round:
            if self._released:
                return set()
            return self._refresh(cpe_ids)

    def _refresh(self, cpe_ids: Sequence[str]) -> set[str]:
        now = self._clock()
        members = self._members(now)
        ids = set(cpe_ids)
        wanted = {cpe for cpe in cpe_ids if self._assigned_to(cpe, members) == self.replica_id}
        taken_now = Lease(self.replica_id, now + self.lease_s, since_s=now).encode()
        with self._lock:
            held = dict(self._held)
            known = dict(self._leases)
        cpes = sorted(ids | set(held))
        raws = self._store.get_many([LEASE + cpe for cpe in cpes])
        ops: list[LeaseOp] = []
        meaning: list[tuple[str, str, str | None]] = []  # (what, CPE, previous owner)
        elsewhere = set()
        for cpe, raw in zip(cpes, raws, strict=True):
            key = LEASE + cpe
            # our own lease as we wrote it needs no reading (half the fleet, every round)
            current = known[cpe] if raw is not None and raw == held.get(cpe) else _decode(raw)
            if (
                current is not None
                and current.owner != self.replica_id
                and current.expires_at_s >= now
            ):
                elsewhere.add(cpe)
            if cpe not in ids or (cpe in held and cpe not in wanted):
                held.pop(cpe, None)
                if raw is not None and current is not None and current.owner == self.replica_id:
                    # Handed straight to the replica meant for it (which renews it as its own
                    # at its next round, under a newer epoch): the CPE is never without a lease.
                    ops.append(
                        ("remove", key, raw, None)
                        if cpe not in ids
                        else ("replace", key, raw, self._handed(cpe, members, now))
                    )
                    meaning.append(("gave", cpe, None))
                continue
            if current is not None and current.owner == self.replica_id and raw is not None:
                renewed = Lease(self.replica_id, now + self.lease_s, current.since_s).encode()
                ops.append(("replace", key, raw, renewed))
                # not known here yet: handed over to this replica by its previous holder
                meaning.append(("renewed" if cpe in held else "took", cpe, None))
                continue
            held.pop(cpe, None)
            if cpe not in wanted and not (current is not None and current.expires_at_s < now):
                continue  # another's, or meant for another who has not taken it yet
            if current is None:
                ops.append(("absent", key, None, taken_now))
                meaning.append(("took", cpe, None))
            elif current.expires_at_s < now and raw is not None:  # its holder is gone
                ops.append(("replace", key, raw, taken_now))
                meaning.append(("took", cpe, current.owner))
        taken, given = [], []
        for (what, cpe, previous), ok, (_, _, _, written) in zip(
            meaning, self._store.compare_and_set_many(ops), ops, strict=True
        ):
            if what == "gave":
                if ok:
                    given.append(cpe)
            elif ok and written is not None:
                held[cpe] = written
                if what == "took":
                    taken.append((cpe, previous))
            else:
                held.pop(cpe, None)
        leases = {cpe: _decode(raw) for cpe, raw in held.items()}
        with self._lock:
            self._held = held
            self._leases = {cpe: lease for cpe, lease in leases.items() if lease is not None}
            self._elsewhere = frozenset(elsewhere - set(held))
        self._log_given(given)
        self._log_taken(taken)
        return self.owned()

    def _handed(self, cpe_id: str, members: list[str], now: float) -> bytes:
        """The lease of a CPE handed to the replica meant for it: a full lease, from now."""
        heir = assigned_replica(cpe_id, members)
        return Lease(heir, now + self.lease_s, since_s=now).encode()

    def _assigned_to(self, cpe_id: str, members: list[str]) -> str:
        """``assigned_replica``, remembered while the members stay the same (a round over
        10,000 CPEs would otherwise hash each of them once per member, every period)."""
        if members != self._assigned_for:
            self._assigned, self._assigned_for = {}, list(members)
        found = self._assigned.get(cpe_id)
        if found is None:
            found = self._assigned[cpe_id] = assigned_replica(cpe_id, members)
        return found

    def _log_given(self, given: list[str]) -> None:
        if len(given) > 20:  # a replica joining takes half of this one's: one line
            log.info(
                "replica %s hands %d CPEs over (%s ... %s)",
                self.replica_id,
                len(given),
                given[0],
                given[-1],
            )
            return
        for cpe in given:
            log.info("replica %s hands %s over", self.replica_id, cpe)

    def _log_taken(self, taken: list[tuple[str, str | None]]) -> None:
        if len(taken) > 20:  # a start or a take-over of many: one line
            others = sorted({p for _, p in taken if p})
            log.info(
                "replica %s now controls %d more CPEs (%s ... %s)%s",
                self.replica_id,
                len(taken),
                taken[0][0],
                taken[-1][0],
                f", taken over from {', '.join(others)}" if others else "",
            )
            return
        for cpe, previous in taken:
            log.info(
                "replica %s now controls %s%s",
                self.replica_id,
                cpe,
                f" (taken over from {previous})" if previous else "",
            )

    def release(self) -> None:
        """At shutdown: hand every CPE over at once (one round trip each way), and leave. A
        round under way ends first, and none follows: it would take back what was handed."""
        with self._round:
            self._released = True
        with self._lock:
            held, self._held, self._leases = list(self._held), {}, {}
        raws = self._store.get_many([LEASE + cpe for cpe in held])
        now = self._clock()
        others = [m for m in self._known_members if m != self.replica_id]
        ops: list[LeaseOp] = [
            # to the replica meant for it now, as in a round; the last one leaves them free
            ("replace", LEASE + cpe, raw, self._handed(cpe, others, now))
            if others
            else ("remove", LEASE + cpe, raw, None)
            for cpe, raw in zip(held, raws, strict=True)
            if raw is not None
            and (lease := _decode(raw)) is not None
            and lease.owner == self.replica_id
        ]
        handed = sum(self._store.compare_and_set_many(ops))
        if handed:
            log.info("replica %s hands its %d CPEs over", self.replica_id, handed)
        member = self._store.get_raw(MEMBER + self.replica_id)
        if member is not None:
            self._store.remove_if_equal(MEMBER + self.replica_id, member)

    def _members(self, now: float) -> list[str]:
        """The live replicas (this one among them), in id order; renews our own entry."""
        key = MEMBER + self.replica_id
        mine = Lease(self.replica_id, now + self.lease_s).encode()
        old = self._store.get_raw(key)
        if old is None:
            self._store.set_if_absent(key, mine)
        else:
            self._store.replace_if(key, old, mine)
        live = {self.replica_id}
        for replica in self._member_ids():
            lease = _decode(self._store.get_raw(MEMBER + replica))
            if lease is not None and lease.expires_at_s >= now:
                live.add(replica)
        members = sorted(live)
        if members != self._known_members:
            log.info("replicas: %s", ", ".join(members))
            self._known_members = members
        return members

    def _member_ids(self) -> list[str]:
        return [key.removeprefix(MEMBER) for key in self._store.raw_keys(MEMBER)]
