"""The RMR adapter's message handling, through the port it implements (no librmr here)."""

from __future__ import annotations

import re
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from core.domain import AccessIdentity, Cpe, KpiSample
from kpm import builders, e2ap
from kpm.codec import KpmPdu, codec_for
from kpm.ueid import gnb_du_ueid
from kpm.versions import KpmVersion
from xapp.e2 import rmr_adapter
from xapp.e2.config import E2NodeConfig
from xapp.e2.indications import IndicationProcessor
from xapp.e2.messages import (
    RIC_HEALTH_CHECK_REQ,
    RIC_HEALTH_CHECK_RESP,
    RIC_INDICATION,
    RIC_SUB_FAILURE,
    RIC_SUB_RESP,
    E2MessageHandler,
    SubscriptionOutcome,
)

V3 = KpmVersion.V3_00


class RecordingXapp:
    """Records what the adapter asks of RMRXapp: replies and freed buffers."""

    def __init__(self) -> None:
        self.replies: list[tuple[Any, bytes, int]] = []
        self.freed: list[Any] = []

    def rmr_rts(self, sbuf: Any, new_payload: bytes, new_mtype: int) -> bool:
        self.replies.append((sbuf, new_payload, new_mtype))
        return True

    def rmr_free(self, sbuf: Any) -> None:
        self.freed.append(sbuf)


def setup() -> tuple[
    rmr_adapter.RmrE2Adapter, list[KpiSample], list[SubscriptionOutcome], IndicationProcessor
]:
    processor = IndicationProcessor(
        [Cpe("cpe-1", {"nr": AccessIdentity("nr", e2_node_id="gnb", ue_id="gnb-du:7")})]
    )
    processor.set_node(E2NodeConfig(node="gnb", access="nr", measurements=("DRB.UEThpDl",)), V3)
    samples: list[KpiSample] = []
    outcomes: list[SubscriptionOutcome] = []
    handler = E2MessageHandler(processor, samples.extend, outcomes.append)
    return rmr_adapter.RmrE2Adapter(handler), samples, outcomes, processor


def summary(message_type: int, payload: bytes | None, meid: bytes = b"gnb") -> dict[str, Any]:
    return {"message type": message_type, "meid": meid, "payload": payload, "subscription id": 7}


def test_summary_keys_match_ricxappframe() -> None:
    spec = find_spec("ricxappframe")
    assert spec is not None
    assert spec.origin is not None
    # Read the constants from the source: importing the module needs librmr_si.so.
    source = (Path(spec.origin).parent / "rmr" / "rmr.py").read_text()
    constants = dict(re.findall(r'^(RMR_MS_\w+)\s*=\s*"([^"]+)"', source, re.MULTILINE))
    assert constants["RMR_MS_PAYLOAD"] == rmr_adapter.SUMMARY_PAYLOAD
    assert constants["RMR_MS_MSG_TYPE"] == rmr_adapter.SUMMARY_MESSAGE_TYPE
    assert constants["RMR_MS_MEID"] == rmr_adapter.SUMMARY_MEID
    assert constants["RMR_MS_SUB_ID"] == rmr_adapter.SUMMARY_SUBSCRIPTION_ID


def test_indication_feeds_the_pipeline_and_the_buffer_is_freed() -> None:
    adapter, samples, _, _ = setup()
    codec = codec_for(V3)
    message = builders.message_format3([(gnb_du_ueid(7), ["DRB.UEThpDl"], [[1190000]])], 1000)
    payload = e2ap.encode(
        e2ap.Indication(
            e2ap.RicRequestId(1, 7),
            2,
            1,
            codec.encode(KpmPdu.HEADER, builders.header(time.time(), V3)),
            codec.encode(KpmPdu.MESSAGE, message),
        )
    )
    xapp = RecordingXapp()
    adapter.on_rmr_message(xapp, summary(RIC_INDICATION, payload), "sbuf-1")
    assert [s.throughput_mbps for s in samples] == [1190.0]
    assert xapp.freed == ["sbuf-1"]
    assert xapp.replies == []


def test_subscription_outcomes_are_reported() -> None:
    adapter, _, outcomes, _ = setup()
    xapp = RecordingXapp()
    ok = e2ap.encode(e2ap.SubscriptionResponse(e2ap.RicRequestId(1, 7), 2, (1,)))
    refused = e2ap.encode(
        e2ap.SubscriptionFailure(e2ap.RicRequestId(1, 7), 2, ("ricRequest", "action-not-supported"))
    )
    adapter.on_rmr_message(xapp, summary(RIC_SUB_RESP, ok), 1)
    adapter.on_rmr_message(xapp, summary(RIC_SUB_FAILURE, refused), 2)
    assert [(o.node, o.admitted) for o in outcomes] == [("gnb", True), ("gnb", False)]
    assert "ricRequest/action-not-supported" in outcomes[1].detail
    assert xapp.freed == [1, 2]


def test_health_check_is_answered() -> None:
    adapter, _, _, _ = setup()
    xapp = RecordingXapp()
    adapter.on_rmr_message(xapp, summary(RIC_HEALTH_CHECK_REQ, b"ping"), "sbuf")
    assert xapp.replies == [("sbuf", b"OK\n", RIC_HEALTH_CHECK_RESP)]
    assert xapp.freed == ["sbuf"]


def test_bad_messages_are_counted_and_the_buffer_still_freed() -> None:
    adapter, samples, _, processor = setup()
    xapp = RecordingXapp()
    adapter.on_rmr_message(xapp, summary(RIC_INDICATION, b"\x00\x05garbage"), 1)
    adapter.on_rmr_message(xapp, summary(RIC_INDICATION, None), 2)
    adapter.on_rmr_message(xapp, summary(99999, b"x"), 3)
    adapter.on_rmr_message(xapp, summary(RIC_SUB_RESP, b"\xff"), 4)
    assert samples == []
    assert processor.rejected_count("e2ap-malformed") == 2
    assert processor.rejected_count("empty") == 1
    assert processor.rejected_count("unexpected-message") == 1
    assert xapp.freed == [1, 2, 3, 4]


def test_rmr_framework_is_not_imported_until_run() -> None:
    import sys

    assert "ricxappframe.xapp_frame" not in sys.modules
