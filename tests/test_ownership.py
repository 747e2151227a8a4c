"""Leases between replicas: the CPEs are shared out, never held twice, and taken over from a
replica that stops renewing. With the in-memory store and a clock of our own, and once with a
real Redis through SDL."""

from __future__ import annotations

from tests.servers import redis_server
from xapp.adapters.memory_store import MemoryStateStore
from xapp.adapters.redis_leases import RedisLeaseStore
from xapp.ownership import Ownership, assigned_replica
from xapp.ports import LeaseStore

CPES = [f"cpe-{n}" for n in range(6)]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def replicas(store: LeaseStore, clock: Clock) -> tuple[Ownership, Ownership]:
    return Ownership(store, "a", 1.0, clock), Ownership(store, "b", 1.0, clock)


def rounds(clock: Clock, *owners: Ownership, count: int = 3) -> list[set[str]]:
    held: list[set[str]] = []
    for _ in range(count):
        held = [owner.refresh(CPES) for owner in owners]
        for one, other in ((0, 1), (1, 0)):
            if len(held) > max(one, other):
                assert not held[one] & held[other], f"held twice: {held}"
        clock.now += 1.0
    return held


def meant(members: list[str], cpes: list[str] = CPES) -> tuple[set[str], ...]:
    """Each replica's share as the assignment has it."""
    return tuple({c for c in cpes if assigned_replica(c, members) == m} for m in members)


def test_the_assignment_is_even_stable_and_the_same_everywhere() -> None:
    """Rendezvous hashing: with 1,000 CPEs each of 2 or 3 replicas gets its share (within
    10 %); a CPE added or removed moves no other (before: CPE-list order, so one CPE added
    moved about half of them); a replica joining takes only from the others its own share."""
    fleet = [f"cpe-{n:04d}" for n in range(1000)]
    for members in (["a", "b"], ["a", "b", "c"]):
        shares = meant(members, fleet)
        assert sum(len(s) for s in shares) == len(fleet)
        for share in shares:
            assert abs(len(share) - len(fleet) / len(members)) < 0.1 * len(fleet) / len(members)
    before = {c: assigned_replica(c, ["a", "b"]) for c in fleet}
    grown = {c: assigned_replica(c, ["a", "b"]) for c in [*fleet, "cpe-0500a", "cpe-zz"]}
    assert all(grown[c] == before[c] for c in fleet)
    joined = {c: assigned_replica(c, ["a", "b", "c"]) for c in fleet}
    moved = [c for c in fleet if joined[c] != before[c]]
    assert all(joined[c] == "c" for c in moved)  # only to the newcomer
    assert assigned_replica("cpe-0001", ["b", "a"]) == assigned_replica("cpe-0001", ["a", "b"])


def check_split_and_takeover(store: LeaseStore) -> None:
    clock = Clock()
    a, b = replicas(store, clock)
    a_held, b_held = rounds(clock, a, b, count=4)
    assert a_held | b_held == set(CPES)
    assert (a_held, b_held) == meant(["a", "b"]), (a_held, b_held)
    # a dies: it renews nothing; once its leases run out, b takes them all over
    (b_held,) = rounds(clock, b, count=5)
    assert b_held == set(CPES)
    assert a.owned() == set(), "a dead replica's leases have run out"


def test_replicas_share_the_cpes_and_take_over_from_a_dead_one() -> None:
    check_split_and_takeover(MemoryStateStore())


def test_a_replica_that_stops_hands_its_cpes_over_at_once() -> None:
    store, clock = MemoryStateStore(), Clock()
    a, b = replicas(store, clock)
    rounds(clock, a, b, count=3)
    a.release()
    (b_held,) = rounds(clock, b, count=1)
    assert b_held == set(CPES), "released leases are taken at the next round"


def test_a_new_replica_gets_its_share_without_overlap() -> None:
    store, clock = MemoryStateStore(), Clock()
    a, b = replicas(store, clock)
    (a_held,) = rounds(clock, a, count=2)
    assert a_held == set(CPES)
    a_held, b_held = rounds(clock, a, b, count=4)
    assert (a_held, b_held) == meant(["a", "b"])


def test_the_same_with_a_real_redis() -> None:
    with redis_server() as port:
        store = RedisLeaseStore("lease-test", "127.0.0.1", port)
        check_split_and_takeover(store)
        store.close()


def test_a_replica_short_of_lease_has_lost_its_cpes_only_to_another() -> None:
    """A busy replica renews late: it may not act on CPEs whose lease is short, but it has not
    lost them (it keeps what it knows of them) unless another replica holds them."""
    store, clock = MemoryStateStore(), Clock()
    a = Ownership(store, "a", 1.0, clock)
    rounds(clock, a, count=2)
    clock.now += 2.5  # no renewal for 2.5 periods: under a period of lease left
    assert a.owned() == set()
    assert a.owned_elsewhere() == frozenset()
    b = Ownership(store, "b", 1.0, clock)
    a_held, b_held = rounds(clock, a, b, count=4)
    assert b_held == meant(["a", "b"])[1]
    assert b_held
    assert a.owned_elsewhere() == b_held
    assert not a.owned_elsewhere() & a_held


def test_each_new_holder_of_a_cpe_has_a_later_owner_epoch_and_keeps_it_while_it_renews() -> None:
    """The owner epoch is the fencing token agents order holders by: kept through renewals,
    higher for whoever takes the CPE next (after an expiry or a hand-over), 0 where not held."""
    store, clock = MemoryStateStore(), Clock()
    a = Ownership(store, "a", 1.0, clock)
    rounds(clock, a, count=1)
    first = {cpe: a.epoch(cpe) for cpe in CPES}
    assert all(epoch > 0 for epoch in first.values())
    rounds(clock, a, count=3)
    assert {cpe: a.epoch(cpe) for cpe in CPES} == first  # renewed, not taken again
    clock.now += 5  # a stalls past its leases; b takes every CPE over
    b = Ownership(store, "b", 1.0, clock)
    rounds(clock, b, count=1)
    assert all(b.epoch(cpe) > first[cpe] for cpe in CPES)
    assert b.epoch("cpe-unknown") == 0
    taken = {cpe: b.epoch(cpe) for cpe in CPES}
    # a comes back: the CPEs meant for it are handed back, each under a newer epoch still
    a_held, _ = rounds(clock, a, b, count=4)
    assert a_held == meant(["a", "b"])[0]
    assert all(a.epoch(cpe) > taken[cpe] for cpe in a_held)


def test_no_round_after_release_takes_back_what_was_handed_over() -> None:
    """At shutdown the lease thread may still be in a round: once released, a replica takes
    nothing again (seen at 10,000 CPEs: it handed 4,968 over, then took 2,385 back)."""
    store, clock = MemoryStateStore(), Clock()
    a = Ownership(store, "a", 1.0, clock)
    rounds(clock, a, count=2)
    a.release()
    assert a.refresh(CPES) == set()
    assert a.owned() == set()
    assert all(store.get_raw(f"lease/cpe/{cpe}") is None for cpe in CPES)


def test_a_cpe_handed_over_is_never_without_a_lease() -> None:
    """A replica joining gets its share handed straight to it (a lease in its name, a newer
    epoch): at no moment between the rounds is a CPE without a live lease."""
    store, clock = MemoryStateStore(), Clock()
    a = Ownership(store, "a", 1.0, clock)
    rounds(clock, a, count=2)
    b = Ownership(store, "b", 1.0, clock)
    before = {cpe: a.epoch(cpe) for cpe in CPES}
    for _ in range(4):
        for owner in (b, a):
            owner.refresh(CPES)
            leases = [store.get_raw(f"lease/cpe/{cpe}") for cpe in CPES]
            assert all(raw is not None for raw in leases), "a CPE without a lease"
        clock.now += 1.0
    assert b.owned() == meant(["a", "b"])[1]
    assert all(b.epoch(cpe) > before[cpe] for cpe in b.owned())
