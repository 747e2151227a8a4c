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
