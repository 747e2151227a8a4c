"""The standalone E2 transport: a node and the xApp exchanging real E2AP over loopback TCP."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator, Sequence

import pytest

from core.domain import AccessIdentity, Cpe, Direction, KpiSample, SubscriptionRecord
from core.e2_framing import MAX_FRAME_BYTES, FramingError, recv_frame, send_frame
from core.e2_naming import e2_node_name
from e2sim.node_client import E2NodeClient
from kpm import builders
from kpm.ueid import gnb_du_ueid
from kpm.versions import STANDARD_VERSIONS, KpmVersion
from xapp.adapters.memory_store import MemoryStateStore
from xapp.e2.config import E2NodeConfig, E2Settings
from xapp.e2.indications import IndicationProcessor
from xapp.e2.stream import StandaloneE2Termination, StreamLimits

NODE = e2_node_name(b"\x00\xf1\x10", 1)
NAMES = ("DRB.UEThpDl", "DRB.UEThpUl")


class Collected:
    def __init__(self) -> None:
        self.samples: list[KpiSample] = []
        self._changed = threading.Condition()

    def add(self, samples: Sequence[KpiSample]) -> None:
        with self._changed:
            self.samples.extend(samples)
            self._changed.notify_all()

    def wait(self, count: int, timeout_s: float = 10.0) -> list[KpiSample]:
        with self._changed:
            self._changed.wait_for(lambda: len(self.samples) >= count, timeout_s)
            return list(self.samples)


Running = tuple[StandaloneE2Termination, Collected, IndicationProcessor, MemoryStateStore]


@pytest.fixture
def termination() -> Iterator[Running]:
    settings = E2Settings(nodes=(E2NodeConfig(node=NODE, access="nr", measurements=NAMES),))
    cpes = [Cpe("cpe-1", {"nr": AccessIdentity("nr", e2_node_id=NODE, ue_id="gnb-du:7")})]
    processor = IndicationProcessor(cpes)
    collected = Collected()
    store = MemoryStateStore()
    server = StandaloneE2Termination(settings, processor, collected.add, store)
    server.start()
    yield server, collected, processor, store
    server.stop()


def report(throughput_kbps: int) -> dict[str, object]:
    return builders.message_format3(
        [(gnb_du_ueid(7), list(NAMES), [[throughput_kbps, 1000]])], 1000
    )


# A FlexRIC node announces the standard OID; it cannot read our first subscription, in the
# standard layout, and the second one in its own layout settles it.
@pytest.mark.parametrize(
    "version", [*STANDARD_VERSIONS, KpmVersion.FLEXRIC_V2_03, KpmVersion.FLEXRIC_V3_00]
)
def test_node_is_subscribed_and_its_indications_become_samples(
    termination: Running, version: KpmVersion
) -> None:
    server, collected, processor, store = termination
    node = E2NodeClient(server.address, 1, NAMES, version=version)
    node.connect()
    try:
        assert server.wait_for(lambda r: NODE in r and r[NODE].status == "active", 10)
        with node._changed:  # the node answers before it records its subscription
            node._changed.wait_for(lambda: node.subscription is not None, 5)
        active = node.subscription
        assert active is not None
        assert active.measurements == NAMES
        assert active.style == 4
        assert active.reporting_period_ms == 1000
        flexric = version in (KpmVersion.FLEXRIC_V2_03, KpmVersion.FLEXRIC_V3_00)
        assert len(node.refusals) == (1 if flexric else 0)
        assert store.load_subscriptions()[0].status == "active"
        assert processor.node_version(NODE) == version
        node.send_indication(builders.header(time.time(), version), report(342000))
        samples = collected.wait(2)
        downlink = next(s for s in samples if s.direction == Direction.DOWNLINK)
        assert downlink.cpe_id == "cpe-1"
        assert downlink.throughput_mbps == pytest.approx(342.0)
    finally:
        node.close()


def test_unknown_oid_falls_back_to_detection(termination: Running) -> None:
    server, collected, processor, _ = termination
    node = E2NodeClient(server.address, 1, NAMES, version=KpmVersion.V2_03, oid="1.2.3.4")
    node.connect()
    try:
        assert node.wait_subscribed() is not None
        # Without a known OID, the layout is the first its RAN function description fits.
        assert processor.node_version(NODE) == KpmVersion.V3_00
        node.send_indication(builders.header(time.time(), KpmVersion.V2_03), report(1000))
        assert collected.wait(1)[0].throughput_mbps == pytest.approx(1.0)
    finally:
        node.close()


def test_node_refusing_a_measurement_fails_the_subscription_with_its_cause(
    termination: Running, caplog: pytest.LogCaptureFixture
) -> None:
    server, _, _, _ = termination
    node = E2NodeClient(server.address, 1, ["DRB.UEThpDl"])  # does not offer DRB.UEThpUl
    with caplog.at_level(logging.WARNING):
        node.connect()
        assert node.wait_subscribed(5) is None
    assert "does not offer DRB.UEThpUl in report style 4" in caplog.text
    try:
        assert node.wait_subscribed(5) is None
        assert node.refusals == [("ricRequest", "action-not-supported")]
        assert server.wait_for(lambda r: r[NODE].status == "failed", 5)
        assert "ricRequest/action-not-supported" in server.records()[NODE].cause
    finally:
        node.close()


def test_reconnected_node_is_subscribed_again_and_garbage_does_not_break_the_stream(
    termination: Running,
) -> None:
    server, collected, processor, _ = termination
    first = E2NodeClient(server.address, 1, NAMES)
    first.connect()
    assert first.wait_subscribed() is not None
    first.close()
    assert server.wait_for(lambda r: r[NODE].status == "disconnected", 5)
    second = E2NodeClient(server.address, 1, NAMES)
    second.connect()
    try:
        active = second.wait_subscribed()
        assert active is not None
        assert active.request_id.instance_id == 2
        second.send_raw(b"\x00\x01garbage")
        second.send_indication(builders.header(time.time(), KpmVersion.V3_00), report(5000))
        assert collected.wait(1)[0].throughput_mbps == pytest.approx(5.0)
        assert processor.rejected_count("e2ap-malformed") == 1
    finally:
        second.close()


def test_stop_deletes_the_subscriptions(termination: Running) -> None:
    server, _, _, store = termination
    node = E2NodeClient(server.address, 1, NAMES)
    node.connect()
    try:
        assert node.wait_subscribed() is not None
        assert server.wait_for(lambda r: r[NODE].status == "active", 5)
        server.stop()
        assert node.wait_unsubscribed(5)
        assert store.load_subscriptions() == []
    finally:
        node.close()


class StoreDown(MemoryStateStore):
    """SDL while Redis restarts: every write of a subscription record fails."""

    def save_subscription(self, record: SubscriptionRecord) -> None:
        raise ConnectionError("SDL not connected to backend")

    def delete_subscription(self, node: str) -> None:
        raise ConnectionError("SDL not connected to backend")


def test_a_store_down_does_not_cost_a_node_its_subscription() -> None:
    """Before: the record's write failed between the E2 setup response and the subscription,
    which was never sent; the node, set up and connected, never reported (an xApp started while
    Redis restarted)."""
    settings = E2Settings(nodes=(E2NodeConfig(node=NODE, access="nr", measurements=NAMES),))
    cpes = [Cpe("cpe-1", {"nr": AccessIdentity("nr", e2_node_id=NODE, ue_id="gnb-du:7")})]
    collected = Collected()
    server = StandaloneE2Termination(
        settings, IndicationProcessor(cpes), collected.add, StoreDown()
    )
    server.start()
    node = E2NodeClient(server.address, 1, NAMES)
    node.connect()
    try:
        assert node.wait_subscribed(5) is not None
        assert server.wait_for(lambda r: r[NODE].status == "active", 5)
        node.send_indication(builders.header(time.time(), KpmVersion.V3_00), report(7000))
        assert collected.wait(1)[0].throughput_mbps == pytest.approx(7.0)
        server.stop()
        assert node.wait_unsubscribed(5)
    finally:
        node.close()
        server.stop()


def test_framing_limits() -> None:
    left, right = socket.socketpair()
    with left, right:
        send_frame(left, b"abc")
        assert recv_frame(right) == b"abc"
        left.sendall((MAX_FRAME_BYTES + 1).to_bytes(4, "big"))
        with pytest.raises(FramingError, match="exceeds"):
            recv_frame(right)
        left.sendall(b"\x00\x00\x00\x05ab")
        left.shutdown(socket.SHUT_WR)
        with pytest.raises(ConnectionError, match="inside a frame"):
            recv_frame(right)


def test_node_names_follow_the_configured_naming_style() -> None:
    old_style = e2_node_name(b"\x00\xf1\x10", 1, style="plmn-hex")
    assert old_style == "gnb_00f110_00000001" != NODE
    settings = E2Settings(
        nodes=(E2NodeConfig(node=old_style, access="nr", measurements=NAMES),),
        node_naming="plmn-hex",
    )
    processor = IndicationProcessor([])
    server = StandaloneE2Termination(settings, processor, lambda _: None, MemoryStateStore())
    server.start()
    node = E2NodeClient(server.address, 1, NAMES)
    node.connect()
    try:
        assert node.wait_subscribed() is not None
        assert server.wait_for(lambda r: old_style in r and r[old_style].status == "active", 5)
    finally:
        node.close()
        server.stop()


def test_a_ran_function_of_another_service_model_is_named_not_decoded_as_kpm(
    termination: Running,
) -> None:
    server, _, processor, _ = termination
    node = E2NodeClient(server.address, 1, NAMES, oid="1.3.6.1.4.1.53148.1.1.2.3")  # E2SM-RC
    node.connect()
    try:
        assert node.wait_subscribed(2) is None
        assert processor.rejected_count("no-kpm-function") == 1
        assert processor.rejected_count("ran-function") == 0
    finally:
        node.close()


def test_a_connection_claiming_a_nodes_name_and_closing_leaves_the_node_subscribed(
    termination: Running,
) -> None:
    """Before: the real node was marked disconnected and left without a subscription."""
    server, collected, _, _ = termination
    real = E2NodeClient(server.address, 1, NAMES)
    real.connect()
    try:
        assert real.wait_subscribed() is not None
        impostor = E2NodeClient(server.address, 1, NAMES)
        impostor.connect()
        assert impostor.wait_subscribed() is not None
        impostor.close()
        assert server.wait_for(
            lambda r: r[NODE].status == "active" and r[NODE].xapp_event_instance_id == 3, 5
        )
        with real._changed:
            assert real._changed.wait_for(
                lambda: (
                    real.subscription is not None and real.subscription.request_id.instance_id == 3
                ),
                5,
            )
        real.send_indication(builders.header(time.time(), KpmVersion.V3_00), report(7000))
        assert collected.wait(1)[0].throughput_mbps == pytest.approx(7.0)
    finally:
        real.close()


@pytest.fixture
def guarded() -> Iterator[Running]:
    settings = E2Settings(nodes=(E2NodeConfig(node=NODE, access="nr", measurements=NAMES),))
    cpes = [Cpe("cpe-1", {"nr": AccessIdentity("nr", e2_node_id=NODE, ue_id="gnb-du:7")})]
    processor = IndicationProcessor(cpes)
    collected = Collected()
    store = MemoryStateStore()
    limits = StreamLimits(max_connections=4, setup_timeout_s=1.0, frame_deadline_s=1.0)
    server = StandaloneE2Termination(settings, processor, collected.add, store, limits=limits)
    server.start()
    yield server, collected, processor, store
    server.stop()


def closed_by_peer(sock: socket.socket, within_s: float = 10.0) -> bool:
    sock.settimeout(within_s)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_peers_that_stall_or_never_set_up_are_dropped(guarded: Running) -> None:
    """Before: no read deadline and no setup deadline; each such peer held a thread for ever."""
    server, _, _, _ = guarded
    stalled = socket.create_connection(server.address)
    stalled.sendall((1_000_000).to_bytes(4, "big") + b"0123456789")
    silent = socket.create_connection(server.address)
    try:
        assert closed_by_peer(stalled)
        assert closed_by_peer(silent)
    finally:
        stalled.close()
        silent.close()


def test_connections_beyond_the_cap_are_closed_and_good_nodes_get_in_later(
    guarded: Running,
) -> None:
    server, _, _, _ = guarded
    hogs = [socket.create_connection(server.address) for _ in range(4)]
    try:
        time.sleep(0.2)  # let the server take them in
        extra = socket.create_connection(server.address)
        assert closed_by_peer(extra, 5)
        extra.close()
        for hog in hogs:
            assert closed_by_peer(hog)  # the setup deadline frees their slots
        node = E2NodeClient(server.address, 1, NAMES)
        node.connect()
        try:
            assert node.wait_subscribed() is not None
        finally:
            node.close()
    finally:
        for hog in hogs:
            hog.close()


def test_a_set_up_node_stalling_inside_a_frame_is_dropped(guarded: Running) -> None:
    """A node may stay silent between frames once set up, but not inside one."""
    server, _, _, _ = guarded
    node = E2NodeClient(server.address, 1, NAMES)
    node.connect()
    try:
        assert node.wait_subscribed() is not None
        time.sleep(1.5)  # silent longer than the setup deadline: still connected
        assert server.records()[NODE].status == "active"
        node.send_raw_bytes((100_000).to_bytes(4, "big") + b"partial")
        assert server.wait_for(lambda r: r[NODE].status == "disconnected", 10)
    finally:
        node.close()
