"""The SDL state store against a real redis-server through ricsdl."""

from core.domain import (
    Direction,
    Override,
    SteeringMode,
    SteeringRule,
    SteeringThresholds,
    SubscriptionRecord,
    WeightSet,
)
from xapp.adapters.sdl_store import SdlStateStore

DL = Direction.DOWNLINK


def test_state_survives_a_new_store_instance(redis_port: int) -> None:
    first = SdlStateStore()
    weights = WeightSet(
        "cpe-1", DL, {"nr": 28, "wifi": 99, "lifi": 1}, SteeringMode.LOAD_BALANCING, 7, "gain"
    )
    override = Override(
        "cpe-1",
        DL,
        rule=SteeringRule(SteeringMode.PRIORITY_BASED, ("wifi",), SteeringThresholds(40, 10)),
        revision=3,
    )
    first.save_weights(weights)
    first.save_override(override)
    first.save_subscription(SubscriptionRecord("gnb-1", 4, "sub-9", "active"))
    first.close()

    second = SdlStateStore()
    assert second.load_weights("cpe-1", DL) == weights
    assert second.load_weights("cpe-1", Direction.UPLINK) is None
    assert second.load_override("cpe-1", DL) == override
    assert second.load_subscriptions() == [SubscriptionRecord("gnb-1", 4, "sub-9", "active")]
    second.delete_override("cpe-1", DL)
    second.delete_subscription("gnb-1")
    assert second.load_override("cpe-1", DL) is None
    assert second.load_subscriptions() == []


def test_a_fleet_s_weights_are_saved_in_a_few_round_trips(redis_port: int) -> None:
    """2,500 sets (a fleet's first step) in three MSETs, each readable as saved."""
    import redis

    store = SdlStateStore()
    sets = [
        WeightSet(f"cpe-{n}", d, {"nr": n % 100, "wifi": 100}, SteeringMode.LOAD_BALANCING, n)
        for n in range(1250)
        for d in Direction
    ]
    client = redis.Redis(port=redis_port)
    client.config_resetstat()
    store.save_weights_many(sets)
    stats = client.info("commandstats")
    assert stats["cmdstat_mset"]["calls"] == 3
    assert "cmdstat_set" not in stats
    found = store.load_weights_many([(w.cpe_id, w.direction) for w in sets])
    assert [found[(w.cpe_id, w.direction)] for w in sets] == sets
    store.close()


def test_a_change_from_a_busy_client_is_not_refused_for_the_client_s_slowness(
    redis_port: int,
) -> None:
    """A change may run at most a window after it was sent, by Redis' clock as the client last
    read it. A client that takes long between reading that clock and sending (a large import
    written out on a busy process: 1.5 s here, more than the window) still gets its change
    taken; only a database that runs it late refuses it."""
    import time
    from typing import Any

    from xapp.adapters.redis_documents import WINDOW_MS, RedisDocuments

    class SlowToWrite(dict[str, Any]):
        def items(self) -> Any:  # json.dumps asks a dict subclass for its items
            time.sleep(1.5 * WINDOW_MS / 1000)
            return super().items()

    documents = RedisDocuments("busy-client-test", port=redis_port)
    version = documents.documents_version()
    after = documents.commit_documents(version, {"cpe/cpe-1": SlowToWrite(cpe_id="cpe-1")})
    assert after == version + 1
    assert documents.find_documents("cpe/") == {"cpe/cpe-1": {"cpe_id": "cpe-1"}}
    documents.close()
