"""Subscriptions through a submgr played over real HTTP; JSON checked against the submgr API."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from ricxappframe.subsclient import ApiClient

from core.domain import SubscriptionRecord
from kpm.codec import KpmPdu, codec_for
from kpm.versions import KpmVersion
from tests.fake_submgr import FakeSubmgr
from tests.servers import free_port, uvicorn_thread
from xapp.adapters.memory_store import MemoryStateStore
from xapp.adapters.sdl_store import SdlStateStore
from xapp.e2.config import E2NodeConfig, E2Settings
from xapp.e2.rest import create_app
from xapp.e2.subscriptions import Backoff, SubmgrClient, SubscriptionManager, plan_subscription
from xapp.ports import SubscriptionStore

API_SPEC = (
    Path(__file__).resolve().parents[2] / "shared" / "reference" / "osc" / "subscription-api.yaml"
)
NODES = (
    E2NodeConfig(
        node="gnb_001_001_00000001", access="nr", measurements=("DRB.UEThpDl", "RRU.PrbAvailDl")
    ),
    E2NodeConfig(node="wifi-ap-1", access="wifi", measurements=("WLAN.StaThpDl",), report="cell"),
)


def subsclient_validate(params: dict[str, Any]) -> None:
    """Deserialize into ricxappframe's submgr models; their setters reject what submgr would."""
    deserialize = ApiClient()._ApiClient__deserialize
    model = deserialize(params, "SubscriptionParams")
    assert model.meid == params["Meid"]
    for detail in deserialize(model.subscription_details, "list[SubscriptionDetail]"):
        for action in deserialize(detail.action_to_be_setup_list, "list[ActionToBeSetup]"):
            assert action.action_type == "report"
            assert action.subsequent_action.subsequent_action_type == "continue"


def openapi_validate(params: dict[str, Any]) -> None:
    spec = yaml.safe_load(API_SPEC.read_text())
    schema = {"$ref": "#/definitions/SubscriptionParams", "definitions": spec["definitions"]}
    jsonschema.validate(params, schema)


def test_subscription_params_satisfy_the_submgr_models() -> None:
    settings = E2Settings(nodes=NODES, client_host="127.0.0.1", http_port=8080, rmr_port=4560)
    for node in NODES:
        plan = plan_subscription(node, settings, xapp_event_instance_id=12)
        subsclient_validate(plan.params)
        openapi_validate(plan.params)
        detail = plan.params["SubscriptionDetails"][0]
        assert bytes(detail["EventTriggers"]) == plan.event_trigger
        assert bytes(detail["ActionToBeSetupList"][0]["ActionDefinition"]) == plan.action_definition
        action = codec_for(plan.version).decode(KpmPdu.ACTION, plan.action_definition)
        assert action["ric-Style-Type"] == (4 if node.report == "per-ue" else 1)
        trigger = codec_for(plan.version).decode(KpmPdu.TRIGGER, plan.event_trigger)
        assert trigger["eventDefinition-formats"][1]["reportingPeriod"] == node.report_period_ms


def test_validation_catches_what_submgr_would_refuse() -> None:
    settings = E2Settings(nodes=NODES)
    params = plan_subscription(NODES[0], settings, 1).params
    broken = {**params, "RANFunctionID": 5000}
    with pytest.raises(ValueError, match="4095"):
        subsclient_validate(broken)
    missing = {k: v for k, v in params.items() if k != "Meid"}
    with pytest.raises(ValueError, match="meid"):
        subsclient_validate(missing)
    with pytest.raises(jsonschema.ValidationError):
        openapi_validate(missing)


def test_unknown_measurement_in_configuration_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"'DRB\.Nope' is not in the catalogue"):
        E2NodeConfig(node="g", access="nr", measurements=("DRB.Nope",))
    with pytest.raises(ValueError, match="is a wifi measurement, not nr"):
        E2NodeConfig(node="g", access="nr", measurements=("WLAN.StaThpDl",))


@contextlib.contextmanager
def running(
    submgr: FakeSubmgr, store: SubscriptionStore | None = None, sleeps: list[float] | None = None
) -> Iterator[tuple[SubscriptionManager, FakeSubmgr]]:
    http_port = free_port()
    settings = E2Settings(nodes=NODES, client_host="127.0.0.1", http_port=http_port)
    with uvicorn_thread(submgr.app()) as submgr_port:
        client = SubmgrClient(f"http://127.0.0.1:{submgr_port}/ric/v1", timeout_s=5)
        manager = SubscriptionManager(
            settings,
            client,
            store or MemoryStateStore(),
            backoff=Backoff(first_s=0.01, cap_s=0.05, max_attempts=5),
            sleep=(sleeps.append if sleeps is not None else time.sleep),
        )
        with uvicorn_thread(create_app(manager), port=http_port):
            try:
                yield manager, submgr
            finally:
                client.close()


def wait_until(predicate: Any, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_notification_before_the_http_response_is_matched() -> None:
    with running(FakeSubmgr(script=["success", "success"])) as (manager, submgr):
        records = manager.subscribe_all()
        assert submgr.notifications_sent == 2
        assert {r.status for r in records.values()} == {"active"}
        # The nodes are subscribed side by side: which got which id is not fixed.
        assert {r.subscription_id for r in records.values()} == {"sub-101", "sub-102"}
        for body in submgr.requests:
            subsclient_validate(body)


def test_notification_after_the_http_response_is_matched() -> None:
    with running(FakeSubmgr(script=["success-late"])) as (manager, _):
        record = manager.subscribe("wifi-ap-1")
        assert record.subscription_id == "sub-101"
        assert wait_until(lambda: manager.records()["wifi-ap-1"].status == "active")


def test_e2_failure_in_the_notification_marks_the_subscription_failed() -> None:
    with running(FakeSubmgr(script=["failure"])) as (manager, _):
        record = manager.subscribe("gnb_001_001_00000001")
        assert record.status == "failed"
        assert "E2Node: RIC subscription failure: action-not-supported" in record.cause


def test_503_is_retried_with_backoff_until_the_node_is_connected() -> None:
    sleeps: list[float] = []
    with running(FakeSubmgr(script=["unavailable", "unavailable", "success"]), sleeps=sleeps) as (
        manager,
        submgr,
    ):
        record = manager.subscribe("gnb_001_001_00000001")
        assert record.status == "active"
        assert len(submgr.requests) == 3
        assert len(sleeps) == 2
        assert all(0 <= s <= 0.05 for s in sleeps)


def test_503_forever_gives_up_after_the_configured_attempts() -> None:
    with running(FakeSubmgr(script=["unavailable"] * 10), sleeps=[]) as (manager, submgr):
        record = manager.subscribe("gnb_001_001_00000001")
        assert record.status == "failed"
        assert "503" in record.cause
        assert len(submgr.requests) == 5


def test_refused_request_is_not_retried() -> None:
    with running(FakeSubmgr(script=["reject"])) as (manager, submgr):
        record = manager.subscribe("wifi-ap-1")
        assert record.status == "failed"
        assert "400" in record.cause
        assert len(submgr.requests) == 1


def test_reconnect_resubscribes_and_shutdown_deletes() -> None:
    with running(FakeSubmgr()) as (manager, submgr):
        manager.subscribe_all()
        first = manager.records()["gnb_001_001_00000001"].subscription_id
        other = manager.records()["wifi-ap-1"].subscription_id
        again = manager.node_reconnected("gnb_001_001_00000001")
        assert again.status == "active"
        assert again.subscription_id != first
        assert submgr.deleted == [first]
        manager.shutdown()
        assert sorted(submgr.deleted) == sorted(
            [str(first), str(other), str(again.subscription_id)]
        )
        assert manager.records() == {}


def test_restart_deletes_the_previous_lifes_subscriptions_from_sdl(redis_port: int) -> None:
    store = SdlStateStore()
    store.save_subscription(SubscriptionRecord("gnb_001_001_00000001", 3, "sub-old", "active"))
    with running(FakeSubmgr(), store=SdlStateStore()) as (manager, submgr):
        assert manager.recover() == ["sub-old"]
        assert submgr.deleted == ["sub-old"]
        manager.subscribe_all()
    stored = {r.node: r for r in store.load_subscriptions()}
    assert {r.status for r in stored.values()} == {"active"}
    assert {r.subscription_id for r in stored.values()} == {"sub-101", "sub-102"}


def test_bad_notification_body_gets_a_400_and_changes_nothing() -> None:
    import httpx

    with running(FakeSubmgr()) as (manager, _):
        manager.subscribe("wifi-ap-1")
        port = manager._settings.http_port
        url = f"http://127.0.0.1:{port}/ric/v1/subscriptions/response"
        assert httpx.post(url, content=b"{not json").status_code == 400
        assert httpx.post(url, json={"SubscriptionInstances": []}).status_code == 400
        assert httpx.post(url, json=[1, 2]).status_code == 400
        assert manager.records()["wifi-ap-1"].status == "active"
        assert httpx.get(f"http://127.0.0.1:{port}/ric/v1/health/alive").status_code == 200


def test_version_learned_from_oid_shapes_nothing_but_the_header() -> None:
    settings = E2Settings(nodes=NODES)
    v2 = plan_subscription(NODES[0], settings, 1, KpmVersion.V2_03)
    v3 = plan_subscription(NODES[0], settings, 1, KpmVersion.V3_00)
    assert v2.version != v3.version
    assert v2.action_definition == v3.action_definition


def test_a_node_without_e2_connection_keeps_no_other_node_waiting() -> None:
    """Before: subscribe_all retried the first node's 503 for ever and never got to the rest."""
    down, up = NODES[0].node, NODES[1].node
    submgr = FakeSubmgr(per_node={down: ["unavailable"], up: ["success"]})
    with running(submgr) as (manager, _):
        manager._backoff = Backoff(first_s=0.01, cap_s=0.05, max_attempts=None)
        manager._sleep = manager._stopping.wait
        done: list[str] = []
        worker = threading.Thread(
            target=manager.subscribe_all, args=(lambda r: done.append(r.node),)
        )
        worker.start()
        try:
            assert wait_until(
                lambda: (
                    manager.records().get(up, None) is not None
                    and manager.records()[up].status == "active"
                )
            )
            assert done == [up]
            # Still being asked for: "pending", or "failed" once three 503s in a row have come
            # (on a busy machine the backoff's short waits let that happen first); never given up.
            assert manager.records()[down].status in ("pending", "failed")
            assert manager.trying(down)
        finally:
            manager.shutdown()
            worker.join(5)
        assert not worker.is_alive()


def test_a_201_whose_body_is_not_json_fails_that_node_only() -> None:
    bad, good = NODES[0].node, NODES[1].node
    with running(FakeSubmgr(per_node={bad: ["not-json"], good: ["success"]})) as (manager, _):
        records = manager.subscribe_all()
    assert records[bad].status == "failed"
    assert "not JSON" in records[bad].cause
    assert records[good].status == "active"
