"""Which replica controls which CPE: leases in SDL, so that with several replicas each CPE is
pushed to by exactly one of them at a time, and a dead replica's CPEs are taken over.

Every replica announces itself (a membership entry it renews) and, once a period, for each CPE:
renews the lease it holds, or takes a lease no one holds or whose holder let it expire. The
CPEs are shared out evenly: in CPE-id order, the i-th goes to the (i mod n)-th live replica in
replica-id order; a replica gives up (removes) the leases of CPEs now meant for another live
replica, which takes them at its next round. Every change of a lease is a compare-and-set, so two
replicas never hold one CPE; a replica acts on a CPE only while its lease has at least a period
to run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xapp.ports import LeaseStore

log = logging.getLogger(__name__)

LEASE = "lease/cpe/"
MEMBER = "lease/replica/"


@dataclass(frozen=True)
class Lease:
    owner: str
    expires_at_s: float

    def encode(self) -> bytes:
        return json.dumps(
            {"owner": self.owner, "expires_at_s": round(self.expires_at_s, 3)}
        ).encode()


def _decode(raw: bytes | None) -> Lease | None:
    if raw is None:
        return None
    try:
        found = json.loads(raw)
        return Lease(str(found["owner"]), float(found["expires_at_s"]))
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
        self._held: dict[str, bytes] = {}  # CPE → the lease value we wrote
        self._known_members: list[str] = [replica_id]

    def owned(self) -> set[str]:
        """The CPEs this replica may act on now: a lease with at least a period to run."""
        now = self._clock()
        return {
            cpe
            for cpe, raw in self._held.items()
            if (lease := _decode(raw)) is not None and lease.expires_at_s - now > self._period_s
        }

    def refresh(self, cpe_ids: Sequence[str]) -> set[str]:
        """One round: announce, renew, take, give up. Returns the CPEs owned now."""
        now = self._clock()
        members = self._members(now)
        wanted = {
            cpe
            for index, cpe in enumerate(sorted(cpe_ids))
            if members[index % len(members)] == self.replica_id
        }
        mine = Lease(self.replica_id, now + self.lease_s).encode()
        for cpe in sorted(set(cpe_ids) | set(self._held)):
            key = LEASE + cpe
            current_raw = self._store.get_raw(key)
            current = _decode(current_raw)
            if cpe not in cpe_ids or (cpe in self._held and cpe not in wanted):
                self._give_up(cpe, key, current_raw, current)
                continue
            if current is not None and current.owner == self.replica_id:
                if current_raw is not None and self._store.replace_if(key, current_raw, mine):
                    self._held[cpe] = mine
                else:
                    self._held.pop(cpe, None)
                continue
            self._held.pop(cpe, None)
            if cpe not in wanted and not (current is not None and current.expires_at_s < now):
                continue  # another's, or meant for another who has not taken it yet
            if current is None:
                taken = self._store.set_if_absent(key, mine)
            elif current.expires_at_s < now and current_raw is not None:
                taken = self._store.replace_if(key, current_raw, mine)  # its holder is gone
            else:
                taken = False
            if taken:
                self._held[cpe] = mine
                log.info(
                    "replica %s now controls %s%s",
                    self.replica_id,
                    cpe,
                    f" (taken over from {current.owner})" if current is not None else "",
                )
        return self.owned()

    def release(self) -> None:
        """At shutdown: hand every CPE over at once, and leave."""
        held = list(self._held)
        for cpe in held:
            key = LEASE + cpe
            raw = self._store.get_raw(key)
            self._give_up(cpe, key, raw, _decode(raw), quiet=True)
        if held:
            log.info("replica %s hands its %d CPEs over", self.replica_id, len(held))
        member = self._store.get_raw(MEMBER + self.replica_id)
        if member is not None:
            self._store.remove_if_equal(MEMBER + self.replica_id, member)

    def _give_up(
        self, cpe: str, key: str, raw: bytes | None, current: Lease | None, quiet: bool = False
    ) -> None:
        self._held.pop(cpe, None)
        if raw is not None and current is not None and current.owner == self.replica_id:
            self._store.remove_if_equal(key, raw)
            (log.debug if quiet else log.info)("replica %s hands %s over", self.replica_id, cpe)

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
