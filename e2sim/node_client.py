"""The E2 node side of the standalone E2 transport: connect, set up, answer subscriptions.

A node announces one KPM RAN function (with the OID of its E2SM-KPM version and a RAN function
description listing the measurements it offers), admits subscriptions whose measurements it
offers, refuses the others with an E2AP cause, and sends whatever indications its owner
builds. The KPM simulator drives it; tests use it directly.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.e2_framing import recv_frame, send_frame
from core.e2_naming import e2_node_name
from kpm import builders, e2ap
from kpm.codec import KpmPdu, codec_for
from kpm.errors import CodecError
from kpm.versions import OID_BY_VERSION, KpmVersion

REFUSED_MEASUREMENT: e2ap.Cause = ("ricRequest", "action-not-supported")
UNDECODABLE: e2ap.Cause = ("protocol", "abstract-syntax-error-falsely-constructed-message")


@dataclass(frozen=True)
class ActiveSubscription:
    request_id: e2ap.RicRequestId
    ran_function_id: int
    action_id: int
    reporting_period_ms: int
    style: int
    measurements: tuple[str, ...]


class E2NodeClient:
    def __init__(
        self,
        address: tuple[str, int],
        gnb_id: int,
        offered: Sequence[str],
        version: KpmVersion = KpmVersion.V3_00,
        plmn: bytes = b"\x00\xf1\x10",
        ran_function_id: int = 2,
        oid: str | None = None,
        styles: Sequence[int] = (1, 4),
    ) -> None:
        self.address = address
        self.gnb_id = gnb_id
        self.plmn = plmn
        self.offered = tuple(offered)
        self.version = version
        self.ran_function_id = ran_function_id
        self.oid = OID_BY_VERSION[version] if oid is None else oid
        self.codec = codec_for(version)
        self.styles = tuple(styles)
        self.subscription: ActiveSubscription | None = None
        self.refusals: list[e2ap.Cause] = []
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._changed = threading.Condition()
        self._send_lock = threading.Lock()
        self.setup_done = False

    @property
    def node_name(self) -> str:
        return e2_node_name(self.plmn, self.gnb_id)

    def connect(self) -> None:
        self._sock = socket.create_connection(self.address, timeout=10)
        self._sock.settimeout(None)
        description = builders.ran_function_description(
            self.version,
            "ORAN-E2SM-KPM",
            "KPM Monitor",
            [builders.report_style(s, self.offered) for s in self.styles],
        )
        function = e2ap.RanFunction(
            self.ran_function_id, self.codec.encode(KpmPdu.RANFUNCTION, description), 1, self.oid
        )
        setup = e2ap.E2SetupRequest(1, self.plmn, self.gnb_id, (function,))
        self.send_raw(e2ap.encode(setup))
        self._thread = threading.Thread(
            target=self._receive, name=f"e2node-{self.gnb_id}", daemon=True
        )
        self._thread.start()

    @property
    def connected(self) -> bool:
        """Connected and reading: the association has not ended."""
        return self._thread is not None and self._thread.is_alive()

    def wait_subscribed(self, timeout_s: float = 10.0) -> ActiveSubscription | None:
        with self._changed:
            self._changed.wait_for(
                lambda: self.subscription is not None or bool(self.refusals), timeout_s
            )
            return self.subscription

    def wait_unsubscribed(self, timeout_s: float = 10.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.subscription is None, timeout_s)

    def send_indication(
        self, header: dict[str, Any], message: dict[str, Any], sequence: int = 0
    ) -> None:
        """Encode header and message with this node's KPM version and send them."""
        self.send_encoded_indication(
            self.codec.encode(KpmPdu.HEADER, header),
            self.codec.encode(KpmPdu.MESSAGE, message),
            sequence,
        )

    def send_encoded_indication(self, header: bytes, message: bytes, sequence: int = 0) -> None:
        active = self.subscription
        if active is None:
            raise RuntimeError(f"{self.node_name} has no active subscription")
        indication = e2ap.Indication(
            active.request_id, active.ran_function_id, active.action_id, header, message, sequence
        )
        self.send_raw(e2ap.encode(indication))

    def send_raw(self, payload: bytes) -> None:
        if self._sock is None:
            raise RuntimeError("not connected")
        with self._send_lock:
            send_frame(self._sock, payload)

    def send_raw_bytes(self, data: bytes) -> None:
        """Bytes as they are, framing included or not (to test a termination's defences)."""
        if self._sock is None:
            raise RuntimeError("not connected")
        with self._send_lock:
            self._sock.sendall(data)

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _receive(self) -> None:
        assert self._sock is not None
        try:
            while (payload := recv_frame(self._sock)) is not None:
                self._handle(e2ap.decode(payload))
        except (OSError, ConnectionError, CodecError):
            return
        except Exception:  # a node that stops answering is worse than one that logs
            logging.getLogger(__name__).exception("E2 node %s stopped", self.node_name)

    def _handle(self, message: e2ap.E2apMessage) -> None:
        if isinstance(message, e2ap.E2SetupResponse):
            with self._changed:
                self.setup_done = True
                self._changed.notify_all()
        elif isinstance(message, e2ap.SubscriptionRequest):
            self._subscribe(message)
        elif isinstance(message, e2ap.SubscriptionDeleteRequest):
            self.send_raw(
                e2ap.encode(
                    e2ap.SubscriptionDeleteResponse(message.request_id, message.ran_function_id)
                )
            )
            with self._changed:
                self.subscription = None
                self._changed.notify_all()

    def _subscribe(self, request: e2ap.SubscriptionRequest) -> None:
        try:
            trigger = self.codec.decode(KpmPdu.TRIGGER, request.event_trigger)
            action = request.actions[0]
            definition = self.codec.decode(KpmPdu.ACTION, action.definition)
        except (CodecError, IndexError):
            self._refuse(request, UNDECODABLE)
            return
        style = definition["ric-Style-Type"]
        format_name, body = definition["actionDefinition-formats"]
        if format_name is None or not isinstance(body, dict):
            # A format this layout does not know: an asn1c-built node (FlexRIC's) fails to decode
            # such an extension alternative, which is a protocol error, not a refusal.
            self._refuse(request, UNDECODABLE)
            return
        info = body.get("subscriptionInfo") or body.get("subscriptInfo") or body
        names = tuple(item["measType"][1] for item in info.get("measInfoList", []))
        if style not in self.styles or not names or any(n not in self.offered for n in names):
            self._refuse(request, REFUSED_MEASUREMENT)
            return
        _, trigger_body = trigger["eventDefinition-formats"]
        if not isinstance(trigger_body, dict):
            self._refuse(request, ("ricRequest", "eventTriggerNotSupported"))
            return
        active = ActiveSubscription(
            request.request_id,
            request.ran_function_id,
            action.action_id,
            trigger_body["reportingPeriod"],
            style,
            names,
        )
        response = e2ap.SubscriptionResponse(
            request.request_id, request.ran_function_id, (action.action_id,)
        )
        self.send_raw(e2ap.encode(response))
        with self._changed:
            self.subscription = active
            self._changed.notify_all()

    def _refuse(self, request: e2ap.SubscriptionRequest, cause: e2ap.Cause) -> None:
        self.send_raw(
            e2ap.encode(
                e2ap.SubscriptionFailure(request.request_id, request.ran_function_id, cause)
            )
        )
        with self._changed:
            self.refusals.append(cause)
            self._changed.notify_all()
