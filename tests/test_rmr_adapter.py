"""The RMR adapter: its message handling, and its life over the RMR stand-in (ricxappframe's
rmr module's functions over loopback TCP: no librmr here)."""

from __future__ import annotations

import ast
import inspect
import logging
import re
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from bench.live_system import wait_until
from core.domain import AccessIdentity, Cpe, KpiSample
from kpm import builders, e2ap
from kpm.codec import KpmPdu, codec_for
from kpm.ueid import gnb_du_ueid
from kpm.versions import KpmVersion
from tests import rmr_standin
from tests.rmr_standin import RmrPeer
from xapp.e2 import rmr_adapter
from xapp.e2.config import E2NodeConfig
from xapp.e2.indications import IndicationProcessor
from xapp.e2.messages import (
    RIC_HEALTH_CHECK_REQ,
    RIC_HEALTH_CHECK_RESP,
    RIC_INDICATION,
    RIC_SUB_DEL_REQUIRED,
    RIC_SUB_FAILURE,
    RIC_SUB_RESP,
    E2MessageHandler,
    SubscriptionOutcome,
)

V3 = KpmVersion.V3_00


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


def indication_payload() -> bytes:
    codec = codec_for(V3)
    message = builders.message_format3([(gnb_du_ueid(7), ["DRB.UEThpDl"], [[1190000]])], 1000)
    return e2ap.encode(
        e2ap.Indication(
            e2ap.RicRequestId(1, 7),
            2,
            1,
            codec.encode(KpmPdu.HEADER, builders.header(time.time(), V3)),
            codec.encode(KpmPdu.MESSAGE, message),
        )
    )


def test_indication_feeds_the_pipeline() -> None:
    adapter, samples, _, _ = setup()
    assert adapter.handle(summary(RIC_INDICATION, indication_payload())) is None
    assert [s.throughput_mbps for s in samples] == [1190.0]


def test_subscription_outcomes_are_reported() -> None:
    adapter, _, outcomes, _ = setup()
    ok = e2ap.encode(e2ap.SubscriptionResponse(e2ap.RicRequestId(1, 7), 2, (1,)))
    refused = e2ap.encode(
        e2ap.SubscriptionFailure(e2ap.RicRequestId(1, 7), 2, ("ricRequest", "action-not-supported"))
    )
    adapter.handle(summary(RIC_SUB_RESP, ok))
    adapter.handle(summary(RIC_SUB_FAILURE, refused))
    adapter.handle(summary(RIC_SUB_DEL_REQUIRED, b"\x00"))
    assert [(o.node, o.admitted, o.lost) for o in outcomes] == [
        ("gnb", True, False),
        ("gnb", False, False),
        ("gnb", False, True),
    ]
    assert "ricRequest/action-not-supported" in outcomes[1].detail


def test_health_check_is_answered() -> None:
    adapter, _, _, _ = setup()
    reply = adapter.handle(summary(RIC_HEALTH_CHECK_REQ, b"ping"))
    assert reply is not None
    assert (reply.message_type, reply.payload) == (RIC_HEALTH_CHECK_RESP, b"OK\n")


def test_bad_messages_are_counted() -> None:
    adapter, samples, _, processor = setup()
    adapter.handle(summary(RIC_INDICATION, b"\x00\x05garbage"))
    adapter.handle(summary(RIC_INDICATION, None))
    adapter.handle(summary(99999, b"x"))
    adapter.handle(summary(RIC_SUB_RESP, b"\xff"))
    assert samples == []
    assert processor.rejected_count("e2ap-malformed") == 2
    assert processor.rejected_count("empty") == 1
    assert processor.rejected_count("unexpected-message") == 1


def test_the_rmr_library_is_not_imported_until_started() -> None:
    import sys

    assert "ricxappframe.rmr.rmr" not in sys.modules
    assert "ricxappframe.xapp_frame" not in sys.modules


# ------------------------------------------------------------------ over the stand-in's RMR


@pytest.fixture
def standin_rmr(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv(rmr_adapter.RMR_LIBRARY_VARIABLE, "tests.rmr_standin")
    seed = tmp_path / "routes.rt"
    monkeypatch.setenv("RMR_SEED_RT", str(seed))
    monkeypatch.delenv("RMR_RTG_SVC", raising=False)
    return seed


def listening_adapter(**options: Any) -> tuple[rmr_adapter.RmrE2Adapter, list[KpiSample], int]:
    """An adapter on RMR, on a port the stand-in's listener took itself."""
    adapter, samples, _, _ = setup()
    adapter = rmr_adapter.RmrE2Adapter(adapter._handler, rmr_port=0, **options)
    adapter.start()
    return adapter, samples, adapter._context.server.getsockname()[1]


def test_messages_arrive_over_rmr_and_health_checks_are_answered(standin_rmr: Path) -> None:
    adapter, samples, port = listening_adapter()
    peer = RmrPeer(port)
    try:
        peer.send(RIC_INDICATION, "gnb", indication_payload(), 7)
        peer.send(RIC_HEALTH_CHECK_REQ, "", b"ping")
        assert peer.receive() == (RIC_HEALTH_CHECK_RESP, b"OK\n")
        wait_until(lambda: len(samples) == 1, 5, "the indication's sample")
    finally:
        peer.close()
        adapter.stop()


def test_not_ready_without_a_route_table_says_what_is_missing(
    standin_rmr: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="xapp.e2.rmr_adapter")
    adapter, _, _ = listening_adapter(first_report_s=0.2, report_every_s=0.5)
    try:
        wait_until(lambda: "RMR not ready" in caplog.text, 5, "a line on the missing table")
        assert not adapter.ready()
        assert f"RMR_SEED_RT={standin_rmr} does not exist" in caplog.text
        assert "RMR_RTG_SVC not set" in caplog.text
        assert adapter.waiting_for() is not None
        standin_rmr.write_text(rmr_standin.route_table((12050, "127.0.0.1:4560")))
        wait_until(adapter.ready, 5, "readiness once the seed table exists")
        assert adapter.waiting_for() is None
    finally:
        adapter.stop()


def test_a_route_manager_s_table_makes_it_ready(standin_rmr: Path) -> None:
    adapter, _, port = listening_adapter()
    peer = RmrPeer(port)
    try:
        assert not adapter.ready()
        peer.send_route_table(rmr_standin.route_table((12050, "127.0.0.1:4560")))
        wait_until(adapter.ready, 5, "readiness once a table came")
    finally:
        peer.close()
        adapter.stop()


def test_stop_closes_rmr_within_one_receive_timeout(standin_rmr: Path) -> None:
    adapter, _, port = listening_adapter(receive_timeout_ms=200)
    peer = RmrPeer(port)
    started = time.monotonic()
    adapter.stop()
    took = time.monotonic() - started
    assert peer.closed_by_the_xapp(5), "the RMR stream stays open after stop"
    assert took < 2.0, f"stop took {took:.1f} s"
    peer.close()


def test_missing_route_table_names_each_source() -> None:
    text = rmr_adapter.missing_route_table({"RMR_RTG_SVC": "service-ricplt-rtmgr:4561"})
    assert "RMR_SEED_RT is not set" in text
    assert "RMR_RTG_SVC=service-ricplt-rtmgr:4561" in text


def test_the_stand_in_offers_what_the_adapter_calls_with_the_real_signatures() -> None:
    """The stand-in must be usable where the real module is: every function the adapter calls
    exists in ricxappframe's rmr module with the parameters the adapter passes."""
    spec = find_spec("ricxappframe")
    assert spec is not None
    assert spec.origin is not None
    source = (Path(spec.origin).parent / "rmr" / "rmr.py").read_text()
    real = {
        node.name: [a.arg for a in node.args.args]
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef)
    }
    adapter_source = Path(rmr_adapter.__file__).read_text()
    called = set(re.findall(r"\b(rmr_\w+|message_summary)\(", adapter_source)) - {
        "rmr_api",
        "rmr_library_available",
    }
    assert called >= {"rmr_init", "rmr_torcv_msg", "rmr_rts_msg", "rmr_free_msg", "rmr_close"}
    for name in called:
        assert name in real, f"ricxappframe's rmr module has no {name}"
        standin = inspect.signature(getattr(rmr_standin, name)).parameters
        for parameter in real[name]:
            assert parameter in standin, f"the stand-in's {name} lacks {parameter}"


# ------------------------------------------------------------------ the framework on the stand-in

FRAMEWORK_STOP = """
import json, sys, time
import tests.rmr_standin as standin
sys.modules["ricxappframe.rmr.rmr"] = standin  # librmr's Python face, over loopback TCP
from ricxappframe.xapp_frame import RMRXapp

xapp = RMRXapp(lambda *_: None, rmr_port=0, use_fake_sdl=True)
xapp.run(thread=True)
time.sleep(0.5)
started = time.monotonic()
xapp.stop()
print(json.dumps({"stop_s": time.monotonic() - started}))
"""


def test_the_framework_s_rmrxapp_on_the_stand_in_stops_as_measured_in_a_ric(
    tmp_path: Path,
) -> None:
    """The stand-in is faithful enough that ricxappframe's own RMRXapp, run on it, shows what
    the issue measured with RMR 4.9.4: a stop of more than 10 s (its deregistration, then a
    10 s sleep, then the receive loop's 5 s timeout) and a deregistration of its own with a
    null appInstanceName to an address built from PLT_NAMESPACE. The xApp does not use
    RMRXapp for that reason (the serve tests show its stop under 5 s, one deregistration)."""
    import http.server
    import json
    import os
    import subprocess
    import sys
    import threading

    seen: list[tuple[str, dict[str, Any]]] = []

    class Appmgr(http.server.BaseHTTPRequestHandler):  # reached as the HTTP proxy
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            seen.append((self.path, json.loads(self.rfile.read(length) or b"{}")))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Appmgr)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    seed = tmp_path / "routes.rt"
    seed.write_text(rmr_standin.route_table((12050, "127.0.0.1:4560")))
    env = {k: v for k, v in os.environ.items() if k.upper() not in ("NO_PROXY", "CONFIG_FILE")}
    env |= {
        "HTTP_PROXY": f"http://127.0.0.1:{server.server_address[1]}",
        "RMR_SEED_RT": str(seed),
        "PLT_NAMESPACE": "ricplt-test",
        "HOSTNAME": "atsss-xapp-0",
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    try:
        done = subprocess.run(
            [sys.executable, "-c", FRAMEWORK_STOP],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    stop_s = json.loads(done.stdout.strip().splitlines()[-1])["stop_s"]
    assert stop_s > 10.0, f"RMRXapp.stop() took {stop_s:.1f} s on the stand-in"
    assert "Cannot Read config file for xapp Registration" in done.stdout + done.stderr
    assert seen == [
        (
            "http://service-ricplt-test-appmgr-http.ricplt-test:8080/ric/v1/deregister",
            {"appName": "atsss-xapp-0", "appInstanceName": None},
        )
    ]
