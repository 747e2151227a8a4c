"""Leases between replicas: the CPEs are shared out, never held twice, and taken over from a
replica that stops renewing. With the in-memory store and a clock of our own, and once with a
real Redis through SDL."""

from __future__ import annotations

from tests.servers import redis_server
from xapp.adapters.memory_store import MemoryStateStore
from xapp.adapters.redis_leases import RedisLeaseStore
from xapp.ownership import Ownership
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


def check_split_and_takeover(store: LeaseStore) -> None:
    clock = Clock()
    a, b = replicas(store, clock)
    a_held, b_held = rounds(clock, a, b, count=4)
    assert a_held | b_held == set(CPES)
    assert len(a_held) == len(b_held) == 3, (a_held, b_held)
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
    assert len(a_held) == len(b_held) == 3


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
    assert len(b_held) == 3
    assert a.owned_elsewhere() == b_held
    assert not a.owned_elsewhere() & a_held
