"""One entry point for every E2 message the xApp receives, whatever carried it (RMR or stream).

RMR message types are the O-RAN SC RIC's (ric-plt/lib/rmr, RIC_message_types.h).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.domain import KpiSample
from kpm import e2ap
from kpm.errors import CodecError
from xapp.e2.indications import IndicationProcessor

log = logging.getLogger(__name__)

RIC_HEALTH_CHECK_REQ = 100
RIC_HEALTH_CHECK_RESP = 101
RIC_SUB_REQ = 12010
RIC_SUB_RESP = 12011
RIC_SUB_FAILURE = 12012
RIC_SUB_DEL_REQ = 12020
RIC_SUB_DEL_RESP = 12021
RIC_SUB_DEL_REQUIRED = 12023  # the E2 node dropped subscriptions on its own (E2AP v2+)
RIC_INDICATION = 12050


@dataclass(frozen=True)
class Reply:
    message_type: int
    payload: bytes


@dataclass(frozen=True)
class SubscriptionOutcome:
    node: str
    admitted: bool
    detail: str
    lost: bool = False  # the node's subscription is gone: it needs subscribing again


class E2MessageHandler:
    """Routes a received E2 message: indications to KPI samples, outcomes to a callback."""

    def __init__(
        self,
        processor: IndicationProcessor,
        on_samples: Callable[[Sequence[KpiSample]], None],
        on_outcome: Callable[[SubscriptionOutcome], None] = lambda outcome: None,
        healthy: Callable[[], bool] = lambda: True,
        *,
        on_indication: Callable[[str, e2ap.Indication], None] | None = None,
    ) -> None:
        """``on_indication``: where indications go undecoded (the control loop's source,
        which decodes them in its own thread); None: decoded here and the samples handed to
        ``on_samples``."""
        self._processor = processor
        self._on_indication = on_indication or processor.decoding_into(on_samples)
        self._on_outcome = on_outcome
        self._healthy = healthy

    def on_message(self, message_type: int, node: str, payload: bytes | None) -> Reply | None:
        if message_type == RIC_HEALTH_CHECK_REQ:
            text = b"OK\n" if self._healthy() else b"ERROR [not healthy]\n"
            return Reply(RIC_HEALTH_CHECK_RESP, text)
        if payload is None:
            self._processor.reject(node, "empty", f"RMR message {message_type} without payload")
            return None
        if message_type == RIC_INDICATION:
            indication = self._processor.read_payload(node, payload)
            if indication is not None:
                self._on_indication(node, indication)
            return None
        if message_type in (RIC_SUB_RESP, RIC_SUB_FAILURE, RIC_SUB_DEL_RESP):
            self._outcome(node, payload)
            return None
        if message_type == RIC_SUB_DEL_REQUIRED:
            # Which of the node's subscriptions does not matter: this xApp holds one per node.
            detail = "the E2 node deleted its subscription (RIC subscription delete required)"
            self._on_outcome(SubscriptionOutcome(node, False, detail, lost=True))
            return None
        self._processor.reject(node, "unexpected-message", f"RMR message type {message_type}")
        return None

    def _outcome(self, node: str, payload: bytes) -> None:
        try:
            message = e2ap.decode(payload)
        except CodecError as error:
            self._processor.reject(node, error.cause, str(error))
            return
        if isinstance(message, e2ap.SubscriptionResponse):
            refused = ", ".join(f"action {a}: {c[0]}/{c[1]}" for a, c in message.not_admitted)
            detail = f"admitted actions {list(message.admitted)}" + (
                f"; refused {refused}" if refused else ""
            )
            self._on_outcome(SubscriptionOutcome(node, bool(message.admitted), detail))
        elif isinstance(message, e2ap.SubscriptionFailure):
            cause = f"{message.cause[0]}/{message.cause[1]}"
            self._on_outcome(SubscriptionOutcome(node, False, f"subscription failed: {cause}"))
        elif isinstance(message, e2ap.SubscriptionDeleteResponse):
            self._on_outcome(SubscriptionOutcome(node, False, "subscription deleted"))
        else:
            self._processor.reject(
                node, "unexpected-message", f"{type(message).__name__} on a subscription channel"
            )
