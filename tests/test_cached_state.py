"""The loop's state in memory in front of SDL (a real redis-server through ricsdl): a fleet's
step reads its CPEs' weights in force and overrides at once (``states_of``), the same as
one by one."""

from core.domain import Direction, Override, SteeringMode, SteeringRule, WeightSet
from xapp.adapters.cached_state import CachedState
from xapp.adapters.memory_store import MemoryStateStore
from xapp.adapters.sdl_store import SdlStateStore
from xapp.ports import StatesOfMany

DL, UL = Direction.DOWNLINK, Direction.UPLINK
PRIORITY = SteeringRule(SteeringMode.PRIORITY_BASED, ("wifi",))


def _fleet(store: SdlStateStore | MemoryStateStore, cpes: int) -> list[tuple[str, Direction]]:
    """1 CPE in 3 without weights in force, 1 in 7 downlinks overridden; the keys."""
    for n in range(cpes):
        if n % 3:
            for d in Direction:
                weights = {"nr": n % 100, "wifi": 100, "lifi": 1}
                store.save_weights(
                    WeightSet(f"cpe-{n}", d, weights, SteeringMode.LOAD_BALANCING, n)
                )
        if n % 7 == 0:
            store.save_override(Override(f"cpe-{n}", DL, rule=PRIORITY, revision=n))
    return [(f"cpe-{n}", d) for n in range(cpes) for d in Direction]


def test_a_fleet_s_states_read_at_once_are_those_read_one_by_one(redis_port: int) -> None:
    store = SdlStateStore()
    keys = _fleet(store, 1000)
    cached = CachedState(store)
    assert isinstance(cached, StatesOfMany)
    # nothing in memory yet: each read from SDL, as load_weights and load_override read it
    weights, overrides = cached.states_of(keys)
    assert weights == [store.load_weights(*key) for key in keys]
    assert overrides == [store.load_override(*key) for key in keys]
    assert sum(w is not None for w in weights) == 2 * 666
    assert sum(o is not None for o in overrides) == 143
    store.close()


def test_states_once_read_are_answered_from_memory() -> None:
    """As ``load_weights``: what memory holds stands (this replica is the only writer of its
    CPEs' weights); a key never read is read from the store."""
    behind = MemoryStateStore()
    cached = CachedState(behind)
    known = WeightSet("cpe-1", DL, {"nr": 3, "wifi": 9}, SteeringMode.LOAD_BALANCING, 1)
    cached.save_weights(known)
    assert cached.load_override("cpe-1", DL) is None  # (read: none there)
    # written behind the cache's back, to tell where the answers come from
    behind.save_weights(WeightSet("cpe-1", DL, {"nr": 1}, SteeringMode.LOAD_BALANCING, 2))
    behind.save_override(Override("cpe-1", DL, rule=PRIORITY, revision=1))
    behind.save_weights(WeightSet("cpe-2", UL, {"wifi": 4}, SteeringMode.LOAD_BALANCING, 5))
    weights, overrides = cached.states_of([("cpe-1", DL), ("cpe-2", UL)])
    assert weights == [known, behind.load_weights("cpe-2", UL)]
    assert overrides == [None, None]
    # and now in memory: asked one by one, the same
    assert cached.load_weights("cpe-2", UL) == weights[1]


def test_the_memory_store_reads_states_at_once_as_one_by_one() -> None:
    store = MemoryStateStore()
    keys = _fleet(store, 1000)
    weights, overrides = store.states_of(keys)
    assert weights == [store.load_weights(*key) for key in keys]
    assert overrides == [store.load_override(*key) for key in keys]
