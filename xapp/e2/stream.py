"""The standalone E2 transport: E2AP PDUs over a local TCP stream, for running without a RIC.

Each frame is a 4-byte big-endian length followed by one APER-encoded E2AP PDU, the same bytes
a RIC's E2 termination would carry over SCTP. The xApp side plays E2 termination and submgr in
one: E2 nodes connect and send E2 setup; we learn their RAN functions (and so their E2SM-KPM
version from the OID), subscribe with the same event trigger and action definition bytes a RIC
subscription would carry, and read the indications. A node that reconnects is subscribed again.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from core.domain import KpiSample, SubscriptionRecord
from core.e2_framing import recv_frame, send_frame
from kpm import dialects, e2ap
from kpm.codec import compile_all
from kpm.errors import CodecError
from kpm.reports import read_ran_function
from kpm.versions import DEFAULT_VERSION, KpmVersion, service_model_name, version_from_oid
from xapp.e2.config import E2NodeConfig, E2Settings
from xapp.e2.indications import IndicationProcessor
from xapp.e2.subscriptions import plan_subscription
from xapp.ports import SubscriptionStore

log = logging.getLogger(__name__)

REQUESTOR_ID = 1001


@dataclass(eq=False)  # hashable by identity: one per TCP connection
class _Connection:
    sock: socket.socket
    node: str | None = None
    setup: e2ap.E2SetupRequest | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Other E2SM-KPM layouts the node's E2 setup fits, to subscribe in if it cannot read ours.
    untried_layouts: list[KpmVersion] = field(default_factory=list)
    closed: bool = False


@dataclass(frozen=True)
class StreamLimits:
    """What one peer may hold of the termination: a connection slot, a thread, a frame."""

    max_connections: int = 64  # open at once; more are closed at once (an E2 node needs one)
    backlog: int = 128  # connections waiting to be accepted
    setup_timeout_s: float = 30.0  # to send E2 setup after connecting
    frame_deadline_s: float = 30.0  # for a frame, once begun, to arrive in full


class StandaloneE2Termination:
    """Accepts E2 nodes on a TCP port and subscribes each configured one."""

    def __init__(
        self,
        settings: E2Settings,
        processor: IndicationProcessor,
        on_samples: Callable[[Sequence[KpiSample]], None],
        store: SubscriptionStore,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: StreamLimits | None = None,
        *,
        on_indication: Callable[[str, e2ap.Indication], None] | None = None,
    ) -> None:
        """``on_indication``: where indications go undecoded (the control loop's source,
        which decodes them in its own thread); None: decoded here, as they arrive, and the
        samples handed to ``on_samples``."""
        self._settings = settings
        self._on_indication = on_indication or processor.decoding_into(on_samples)
        self._limits = limits or StreamLimits()
        self._open = 0  # connections being served
        self._refused_logged = False
        self._processor = processor
        self._store = store
        self._lock = threading.Lock()
        self._connections: dict[str, _Connection] = {}
        self._records: dict[str, SubscriptionRecord] = {}
        self._unconfigured: set[_Connection] = set()  # set up, but not (yet) in the config
        # A node's earlier connection, still open, that a newer one claiming its name replaced:
        # if the newer one goes, the earlier one is the node again (an impostor, or a retry).
        self._superseded: dict[str, _Connection] = {}
        self._instance = 0
        self._changed = threading.Condition(self._lock)
        termination = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                termination._serve(self.request)

        self._server = socketserver.ThreadingTCPServer(
            (host, port), Handler, bind_and_activate=False
        )
        self._server.allow_reuse_address = True
        self._server.daemon_threads = True
        self._server.request_queue_size = self._limits.backlog
        self._server.server_bind()
        self._server.server_activate()
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        compile_all()  # before the first node connects, not while its reports queue up
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="e2-stream", daemon=True
        )
        self._thread.start()

    def records(self) -> dict[str, SubscriptionRecord]:
        with self._lock:
            return dict(self._records)

    def wait_for(
        self, predicate: Callable[[dict[str, SubscriptionRecord]], bool], timeout_s: float
    ) -> bool:
        """Block until the subscription records satisfy ``predicate`` (for callers and tests)."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(dict(self._records)), timeout_s)

    def stop(self) -> None:
        """Delete every subscription (best effort), then close the connections and the port."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread is None:  # never started: nothing to shut down but the socket
            self._server.server_close()
            return
        with self._lock:
            targets = [
                (self._connections.get(n), r)
                for n, r in self._records.items()
                if r.status == "active"
            ]
        for connection, record in targets:
            if connection is None:
                continue
            request = e2ap.SubscriptionDeleteRequest(
                e2ap.RicRequestId(REQUESTOR_ID, record.xapp_event_instance_id),
                self._function_id(record.node),
            )
            with contextlib.suppress(OSError):
                self._send(connection, e2ap.encode(request))
        self.wait_for(lambda records: all(r.status != "active" for r in records.values()), 2.0)
        # The subscriptions live on the associations, which end with the stop: a record whose
        # node did not answer the delete in time (a busy node) is not left behind in the store.
        with self._lock:
            unanswered = [r for r in self._records.values() if r.status == "active"]
        for record in unanswered:
            self._keep_record(record, deleted=True)
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            for connection in self._connections.values():
                with contextlib.suppress(OSError):
                    connection.sock.shutdown(socket.SHUT_RDWR)

    def _serve(self, sock: socket.socket) -> None:
        with self._lock:
            full = self._open >= self._limits.max_connections
            if not full:
                self._open += 1
        if full:
            if not self._refused_logged:
                self._refused_logged = True
                log.warning(
                    "E2 stream: %d connections open, the most allowed; refusing more",
                    self._limits.max_connections,
                )
            sock.close()
            return
        try:
            self._serve_counted(sock)
        finally:
            with self._lock:
                self._open -= 1

    def _serve_counted(self, sock: socket.socket) -> None:
        connection = _Connection(sock)
        # Until its E2 setup a peer is nobody: it gets a short while to send one.
        sock.settimeout(self._limits.setup_timeout_s)
        try:
            while True:
                payload = recv_frame(sock, self._limits.frame_deadline_s)
                if payload is None:
                    break
                try:
                    self._dispatch(connection, payload)
                except (ConnectionError, OSError):
                    raise
                except Exception as error:  # one bad message must not end the association
                    log.exception("E2 stream from %s: message not handled", connection.node)
                    self._processor.reject(connection.node or "unknown", "internal", repr(error))
                if connection.setup is not None and sock.gettimeout() is not None:
                    sock.settimeout(None)  # a node set up may stay silent until subscribed
        except (ConnectionError, OSError) as error:
            log.info("E2 stream from %s closed: %s", connection.node or "an unknown node", error)
        finally:
            self._closed(connection)

    def _closed(self, connection: _Connection) -> None:
        reinstated: _Connection | None = None
        with self._changed:
            connection.closed = True
            self._unconfigured.discard(connection)
            name = connection.node
            if name is not None and self._superseded.get(name) is connection:
                del self._superseded[name]
            if name is not None and self._connections.get(name) is connection:
                del self._connections[name]
                earlier = self._superseded.pop(name, None)
                if earlier is not None and not earlier.closed and earlier.setup is not None:
                    reinstated = earlier
                else:
                    record = self._records.get(name)
                    if record is not None and record.status == "active":
                        self._records[name] = replace(record, status="disconnected")
            self._changed.notify_all()
        if reinstated is not None and reinstated.setup is not None:
            log.warning(
                "E2 node %s: the connection that claimed its name closed; the earlier one, "
                "still open, is the node again",
                name,
            )
            with contextlib.suppress(OSError):
                self._subscribe(reinstated, reinstated.setup)

    def _dispatch(self, connection: _Connection, payload: bytes) -> None:
        node = connection.node or "unknown"
        try:
            message = e2ap.decode(payload)
        except CodecError as error:
            self._processor.reject(node, error.cause, str(error))
            return
        if isinstance(message, e2ap.Indication):
            self._on_indication(node, message)
        elif isinstance(message, e2ap.E2SetupRequest):
            self._setup(connection, message)
        elif isinstance(message, e2ap.SubscriptionResponse):
            self._outcome(node, "active" if message.admitted else "failed", _refusals(message))
        elif isinstance(message, e2ap.SubscriptionFailure):
            if not self._retry_in_another_layout(connection, message.cause):
                cause = f"E2 node refused: {message.cause[0]}/{message.cause[1]}"
                self._outcome(node, "failed", cause)
        elif isinstance(message, e2ap.SubscriptionDeleteResponse):
            self._outcome(node, "deleted", "")
        else:
            self._processor.reject(
                node, "unexpected-message", f"{type(message).__name__} from a node"
            )

    def set_settings(self, settings: E2Settings) -> None:
        """A reloaded configuration: nodes no longer configured are unsubscribed; connected
        nodes that have just been configured are subscribed now, the others when they connect."""
        with self._lock:
            previous, self._settings = self._settings, settings
            connections = dict(self._connections)
            records = dict(self._records)
            unknown = list(self._unconfigured)
        for name, record in records.items():
            connection = connections.get(name)
            if settings.node(name) is None and connection is not None:
                if record.status == "active":
                    removed = previous.node(name)
                    request = e2ap.SubscriptionDeleteRequest(
                        e2ap.RicRequestId(REQUESTOR_ID, record.xapp_event_instance_id),
                        removed.ran_function_id if removed is not None else 0,
                    )
                    with contextlib.suppress(OSError):
                        self._send(connection, e2ap.encode(request))
                log.info("E2 node %s is no longer configured: unsubscribed", name)
        for connection in unknown:
            if connection.setup is not None and settings.node(
                connection.setup.name_in(settings.node_naming)
            ):
                with self._lock:
                    self._unconfigured.discard(connection)
                self._subscribe(connection, connection.setup)

    def _setup(self, connection: _Connection, request: e2ap.E2SetupRequest) -> None:
        name = request.name_in(self._settings.node_naming)
        connection.node = name
        connection.setup = request
        accepted = tuple(f.function_id for f in request.ran_functions)
        self._send(connection, e2ap.encode(e2ap.E2SetupResponse(request.transaction_id, accepted)))
        self._subscribe(connection, request)

    def _retry_in_another_layout(self, connection: _Connection, cause: e2ap.Cause) -> bool:
        """A node that could not decode our subscription (a protocol error) and whose E2 setup
        fits another layout gets the subscription again in that layout: FlexRIC and standard
        nodes announce the same OID, and this answer is what tells them apart."""
        if cause[0] != "protocol" or not connection.untried_layouts or connection.setup is None:
            return False
        layout = connection.untried_layouts.pop(0)
        log.info(
            "E2 node %s could not decode our subscription (%s); subscribing in E2SM-KPM %s, "
            "another layout its E2 setup fits",
            connection.node,
            cause[1],
            layout,
        )
        self._subscribe(connection, connection.setup, layout)
        return True

    def _subscribe(
        self,
        connection: _Connection,
        request: e2ap.E2SetupRequest,
        layout: KpmVersion | None = None,
    ) -> None:
        name = request.name_in(self._settings.node_naming)
        config = self._settings.node(name)
        if config is None:
            with self._lock:
                self._unconfigured.add(connection)
            self._processor.reject(
                name, "unknown-node", "E2 setup from a node that is not configured"
            )
            return
        function = next(
            (f for f in request.ran_functions if f.function_id == config.ran_function_id), None
        )
        if function is None:
            self._processor.reject(
                name, "no-kpm-function", f"node offers no RAN function {config.ran_function_id}"
            )
            return
        service_model = service_model_name(function.oid)
        if service_model not in ("E2SM-KPM", None):
            self._processor.reject(
                name,
                "no-kpm-function",
                f"RAN function {function.function_id} is {service_model} ({function.oid}), "
                "not E2SM-KPM: check the node's ran_function_id",
            )
            return
        if layout is None:
            version, connection.untried_layouts = self._layout(name, config, function)
        else:
            version = layout
        try:
            # The bytes do not depend on the instance id (only the REST parameters do).
            plan = plan_subscription(config, self._settings, 0, version)
        except CodecError as error:
            self._processor.reject(
                name, "no-subscription", f"cannot subscribe in E2SM-KPM {version}: {error}"
            )
            return
        self._processor.set_node(config, version)
        self._check_offer(name, config, function, version)
        with self._changed:
            earlier = self._connections.get(name)
            if earlier is not None and earlier is not connection and not earlier.closed:
                log.warning("E2 node %s: a second connection claims its name", name)
                self._superseded[name] = earlier
            self._connections[name] = connection
            self._instance = self._instance % 65535 + 1
            record = SubscriptionRecord(
                node=name, xapp_event_instance_id=self._instance, status="pending"
            )
            self._records[name] = record
            self._changed.notify_all()
        subscription = e2ap.SubscriptionRequest(
            e2ap.RicRequestId(REQUESTOR_ID, record.xapp_event_instance_id),
            config.ran_function_id,
            plan.event_trigger,
            (e2ap.ActionToSetup(1, plan.action_definition),),
        )
        self._keep_record(record)
        self._send(connection, e2ap.encode(subscription))

    def _layout(
        self, name: str, config: E2NodeConfig, function: e2ap.RanFunction
    ) -> tuple[KpmVersion, list[KpmVersion]]:
        """The node's E2SM-KPM layout, configured or as its E2 setup shows (kpm.dialects), and
        the other layouts the setup fits."""
        if version_from_oid(function.oid) is None:
            log.warning("E2 node %s: unknown RAN function OID %r", name, function.oid)
        if config.kpm_version is not None:
            return config.kpm_version, []
        detection = dialects.detect_from_setup(function.oid, function.definition)
        if detection.ambiguous or not detection.candidates:
            log.info("E2 node %s: %s", name, detection.note)
        return detection.chosen, list(detection.candidates[1:])

    def _check_offer(
        self,
        name: str,
        config: E2NodeConfig,
        function: e2ap.RanFunction,
        version: KpmVersion | None,
    ) -> None:
        """Warn ahead of the node's refusal when it does not offer what we will ask for."""
        style = 4 if config.report == "per-ue" else 1
        try:
            info = read_ran_function(function.definition, version or DEFAULT_VERSION)
        except CodecError as error:
            self._processor.reject(name, "ran-function", f"RAN function description: {error}")
            return
        missing = info.offers(style, config.measurements)
        if missing:
            log.warning(
                "E2 node %s does not offer %s in report style %d; the subscription will be refused",
                name,
                ", ".join(missing),
                style,
            )

    def _outcome(self, node: str, status: str, cause: str) -> None:
        with self._changed:
            record = self._records.get(node)
            if record is None:
                return
            updated = replace(
                record,
                status=status,
                cause=cause,
                subscription_id=record.subscription_id or f"{node}/{record.xapp_event_instance_id}",
            )
            self._records[node] = updated
            self._changed.notify_all()
        if status == "failed":
            log.warning("E2 subscription for %s failed: %s", node, cause)
        self._keep_record(updated, deleted=status == "deleted")

    def _keep_record(self, record: SubscriptionRecord, *, deleted: bool = False) -> None:
        """The record's copy in the store. The subscription lives on the association, not
        there: a store that is down (SDL while Redis restarts) costs the copy, never the node
        its subscription or its reports."""
        try:
            if deleted:
                self._store.delete_subscription(record.node)
            else:
                self._store.save_subscription(record)
        except Exception as error:  # ricsdl raises its own types
            log.warning("E2 node %s: subscription record not stored: %s", record.node, error)

    def _function_id(self, node: str) -> int:
        config = self._settings.node(node)
        return config.ran_function_id if config else 0

    @staticmethod
    def _send(connection: _Connection, payload: bytes) -> None:
        with connection.lock:
            send_frame(connection.sock, payload)


def _refusals(response: e2ap.SubscriptionResponse) -> str:
    return "; ".join(f"action {a} refused: {c[0]}/{c[1]}" for a, c in response.not_admitted)
