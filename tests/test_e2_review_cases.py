"""Input a later E2SM-KPM version could send, and subscription races (found in review)."""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any

import asn1tools

from core.domain import AccessIdentity, Cpe
from kpm import builders, e2ap
from kpm.codec import ASN1_DIR, KpmPdu, codec_for
from kpm.ueid import gnb_du_ueid
from kpm.versions import KpmVersion
from xapp.adapters.memory_store import MemoryStateStore
from xapp.e2.config import E2NodeConfig, E2Settings
from xapp.e2.indications import IndicationProcessor
from xapp.e2.stream import StandaloneE2Termination
from xapp.e2.subscriptions import Backoff, SubscriptionManager

V3 = KpmVersion.V3_00


@functools.cache
def future_codec(tmp: str) -> Any:
    """Our v3.00 schema plus extension alternatives a later version might add."""
    kpm = (ASN1_DIR / "e2sm_kpm_v03_00.asn").read_text()
    kpm = kpm.replace(
        "    noValue    NULL,\n    ...\n",
        "    noValue    NULL,\n    ...,\n    futureValue    INTEGER\n",
    )
    common = (ASN1_DIR / "e2sm_common.asn").read_text()
    common = common.replace(
        "    eNB-UEID          UEID-ENB,\n    ...\n",
        "    eNB-UEID          UEID-ENB,\n    ...,\n    futureUE          INTEGER\n",
    )
    assert "futureValue" in kpm
    assert "futureUE" in common
    folder = Path(tmp)
    (folder / "kpm.asn").write_text(kpm)
    (folder / "common.asn").write_text(common)
    return asn1tools.compile_files([str(folder / "kpm.asn"), str(folder / "common.asn")], "per")


def processor() -> IndicationProcessor:
    cpes = [
        Cpe("cpe-1", {"nr": AccessIdentity("nr", e2_node_id="gnb", ue_id="gnb-du:7")}),
        Cpe("cpe-2", {"nr": AccessIdentity("nr", e2_node_id="gnb", ue_id="gnb-du:8")}),
    ]
    p = IndicationProcessor(cpes)
    p.set_node(
        E2NodeConfig(node="gnb", access="nr", measurements=("DRB.UEThpDl", "RRU.PrbAvailDl")), V3
    )
    return p


def pdu(message: bytes) -> bytes:
    header = codec_for(V3).encode(KpmPdu.HEADER, builders.header(1.7e9, V3))
    return e2ap.encode(e2ap.Indication(e2ap.RicRequestId(1, 1), 2, 1, header, message))


def test_unknown_record_value_kind_skips_that_period(tmp_path: Path) -> None:
    message = builders.message_format3([(gnb_du_ueid(7), ["DRB.UEThpDl"], [[5000], [6000]])], 1000)
    message["indicationMessage-formats"][1]["ueMeasReportList"][0]["measReport"]["measData"][0][
        "measRecord"
    ] = [("futureValue", 5)]
    data = future_codec(str(tmp_path)).encode("E2SM-KPM-IndicationMessage", message)
    p = processor()
    samples = p.handle_payload("gnb", pdu(data))
    assert [s.throughput_mbps for s in samples] == [6.0]
    assert p.rejected_count("record-value") == 1


def test_unidentified_ue_is_never_taken_for_the_cell(tmp_path: Path) -> None:
    message = builders.message_format3(
        [
            (("futureUE", 3), ["RRU.PrbAvailDl"], [[99]]),
            (gnb_du_ueid(7), ["DRB.UEThpDl"], [[1000]]),
        ],
        1000,
    )
    data = future_codec(str(tmp_path)).encode("E2SM-KPM-IndicationMessage", message)
    p = processor()
    samples = p.handle_payload("gnb", pdu(data))
    assert [(s.cpe_id, dict(s.measurements)) for s in samples] == [("cpe-1", {"DRB.UEThpDl": 1.0})]
    assert p.rejected_count("unknown-ue") == 1


def test_incomplete_period_is_skipped() -> None:
    message = builders.message_format3([(gnb_du_ueid(7), ["DRB.UEThpDl"], [[5000], [6000]])], 1000)
    items = message["indicationMessage-formats"][1]["ueMeasReportList"][0]["measReport"]["measData"]
    items[0]["incompleteFlag"] = "true"
    p = processor()
    samples = p.handle_payload("gnb", pdu(codec_for(V3).encode(KpmPdu.MESSAGE, message)))
    assert [s.throughput_mbps for s in samples] == [6.0]
    assert p.rejected_count("record-incomplete") == 1


class ScriptedClient:
    """A submgr client whose answers the test controls (for races no HTTP timing reproduces)."""

    def __init__(self) -> None:
        self.ids = iter(f"sub-{n}" for n in range(1, 100))
        self.deleted: list[str] = []
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def subscribe(self, params: dict[str, Any]) -> str:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(5)
        return next(self.ids)

    def delete(self, subscription_id: str) -> None:
        self.deleted.append(subscription_id)


SETTINGS = E2Settings(nodes=(E2NodeConfig(node="gnb", access="nr", measurements=("DRB.UEThpDl",)),))


def test_stale_notification_does_not_take_over_a_live_subscription() -> None:
    client = ScriptedClient()
    manager = SubscriptionManager(SETTINGS, client, MemoryStateStore(), Backoff())  # type: ignore[arg-type]
    record = manager.subscribe("gnb")
    stale = {
        "SubscriptionId": "sub-old",
        "SubscriptionInstances": [
            {
                "XappEventInstanceId": record.xapp_event_instance_id,
                "E2EventInstanceId": 1,
                "ErrorCause": "x",
            }
        ],
    }
    assert manager.handle_notification(stale) is None
    assert manager.records()["gnb"].subscription_id == "sub-1"
    assert manager.records()["gnb"].status == "pending"
    for _ in range(manager.MAX_EARLY_NOTIFICATIONS + 10):
        manager.handle_notification({"SubscriptionId": f"junk-{_}", "SubscriptionInstances": []})
    assert len(manager._early) == manager.MAX_EARLY_NOTIFICATIONS


def test_shutdown_while_the_post_is_in_flight_deletes_what_it_returns() -> None:
    client = ScriptedClient()
    client.gate = threading.Event()
    manager = SubscriptionManager(SETTINGS, client, MemoryStateStore(), Backoff())  # type: ignore[arg-type]
    worker = threading.Thread(target=manager.subscribe, args=("gnb",))
    worker.start()
    assert client.entered.wait(5)
    manager.shutdown()
    client.gate.set()
    worker.join(5)
    assert client.deleted == ["sub-1"]
    assert manager.records() == {}


def test_recover_keeps_records_it_could_not_delete() -> None:
    from core.domain import SubscriptionRecord
    from xapp.e2.subscriptions import SubmgrUnavailableError

    class Down(ScriptedClient):
        def delete(self, subscription_id: str) -> None:
            raise SubmgrUnavailableError("down")

    store = MemoryStateStore()
    store.save_subscription(SubscriptionRecord("gnb", 1, "sub-old", "active"))
    manager = SubscriptionManager(SETTINGS, Down(), store)  # type: ignore[arg-type]
    assert manager.recover() == []
    assert [r.subscription_id for r in store.load_subscriptions()] == ["sub-old"]


def test_wrongly_typed_notification_is_refused() -> None:
    import pytest

    manager = SubscriptionManager(SETTINGS, ScriptedClient(), MemoryStateStore())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="SubscriptionInstances"):
        manager.handle_notification({"SubscriptionId": "a", "SubscriptionInstances": [1]})
    with pytest.raises(ValueError, match="SubscriptionId"):
        manager.handle_notification({"SubscriptionId": ["a"], "SubscriptionInstances": []})


def test_termination_stops_without_having_started() -> None:
    termination = StandaloneE2Termination(SETTINGS, processor(), lambda s: None, MemoryStateStore())
    done = threading.Event()

    def stop() -> None:
        termination.stop()
        done.set()

    threading.Thread(target=stop, daemon=True).start()
    assert done.wait(5)
