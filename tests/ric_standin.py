"""Stand-ins for the RIC platform around an xApp in RIC mode, over real sockets and HTTP:

- an **E2 termination** that E2 nodes (the simulator's) connect to over the standalone E2
  stream, and that forwards their RIC indications to the xApp over RMR (``tests.rmr_standin``);
- a **submgr** speaking ``../shared/reference/osc/subscription-api.yaml``: POST /subscriptions
  turns the xApp's parameters into an E2AP RIC subscription request to the node, and the node's
  answer into the notification to the xApp's ``/ric/v1/subscriptions/response`` — sent before
  the 201, the order that trips naive xApps; 503 while the node is not connected; DELETE
  removes the subscription at the node;
- an **appmgr** taking ``/ric/v1/register`` and ``/ric/v1/deregister``.

Like the real E2 termination it forwards a node's indications only while a subscription the
submgr made holds them (``forget`` drops one as a restarted E2T or submgr would, without telling
the xApp); ``unreachable`` nodes get 503 from the submgr, as nodes with no E2 connection do.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from core.e2_framing import recv_frame, send_frame
from kpm import e2ap
from tests.rmr_standin import RmrPeer
from tests.servers import uvicorn_thread

RIC_INDICATION = 12050
REQUESTOR_ID = 77


@dataclass
class Subscription:
    subscription_id: str
    node: str
    instance: int
    function_id: int
    xapp_instance: int
    client: dict[str, Any]
    answered: threading.Event = field(default_factory=threading.Event)
    outcome: dict[str, Any] | None = None


class RicStandIn:
    def __init__(self) -> None:
        self.nodes: dict[str, socket.socket] = {}
        self.subscriptions: dict[str, Subscription] = {}
        self.deleted: list[str] = []
        self.registered: list[dict[str, Any]] = []
        self.deregistered: list[dict[str, Any]] = []
        self.forwarded = 0
        self.forwarded_by_node: dict[str, int] = {}
        self.unreachable: set[str] = set()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._rmr: RmrPeer | None = None
        self._forward_lock = threading.Lock()
        self._rmr_port: int | None = None

    # ------------------------------------------------------------- E2 termination
    @contextlib.contextmanager
    def running(self, rmr_port: int) -> Iterator[tuple[int, int]]:
        """Serve E2 and HTTP; yields (E2 port, HTTP port of submgr and appmgr)."""
        self._rmr_port = rmr_port
        stand_in = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                stand_in._serve_node(self.request)

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            with uvicorn_thread(self.app()) as http_port:
                yield server.server_address[1], http_port
        finally:
            server.shutdown()
            server.server_close()
            if self._rmr is not None:
                self._rmr.close()

    def _serve_node(self, sock: socket.socket) -> None:
        node = None
        try:
            while (frame := recv_frame(sock)) is not None:
                message = e2ap.decode(frame)
                if isinstance(message, e2ap.E2SetupRequest):
                    node = message.node_name
                    accepted = tuple(f.function_id for f in message.ran_functions)
                    send_frame(
                        sock, e2ap.encode(e2ap.E2SetupResponse(message.transaction_id, accepted))
                    )
                    with self._lock:
                        self.nodes[node] = sock
                elif isinstance(message, e2ap.Indication) and node is not None:
                    if self._holds(node, message.request_id.instance_id):
                        self._forward(node, frame, message.request_id.instance_id)
                elif isinstance(message, e2ap.SubscriptionResponse | e2ap.SubscriptionFailure):
                    self._answered(message)
        except (OSError, ConnectionError):
            pass
        finally:
            with self._lock:
                if node is not None and self.nodes.get(node) is sock:
                    del self.nodes[node]

    def _holds(self, node: str, instance: int) -> bool:
        with self._lock:
            return any(
                s.node == node and s.instance == instance for s in self.subscriptions.values()
            )

    def forget(self, node: str) -> None:
        """Drop the node's subscriptions as a platform restarted without its state would: the
        node stops reporting, and nobody tells the xApp."""
        with self._lock:
            dropped = [s for s in self.subscriptions.values() if s.node == node]
            for subscription in dropped:
                del self.subscriptions[subscription.subscription_id]
            sock = self.nodes.get(node)
        for subscription in dropped:
            if sock is not None:
                request_pdu = e2ap.SubscriptionDeleteRequest(
                    e2ap.RicRequestId(REQUESTOR_ID, subscription.instance),
                    subscription.function_id,
                )
                with contextlib.suppress(OSError):
                    send_frame(sock, e2ap.encode(request_pdu))

    def _forward(self, node: str, payload: bytes, instance: int) -> None:
        with self._forward_lock:  # one RMR stream, shared by the nodes' threads
            if self._rmr is None:
                assert self._rmr_port is not None
                try:
                    self._rmr = RmrPeer(self._rmr_port)
                except OSError:
                    return  # the xApp's RMR is not up (yet): dropped, as RMR would
            try:
                self._rmr.send(RIC_INDICATION, node, payload, instance)
                self.forwarded += 1
                self.forwarded_by_node[node] = self.forwarded_by_node.get(node, 0) + 1
            except OSError:
                self._rmr.close()
                self._rmr = None

    def _answered(self, message: e2ap.SubscriptionResponse | e2ap.SubscriptionFailure) -> None:
        with self._lock:
            subscription = next(
                (
                    s
                    for s in self.subscriptions.values()
                    if s.instance == message.request_id.instance_id
                ),
                None,
            )
        if subscription is None:
            return
        instance: dict[str, Any] = {
            "XappEventInstanceId": subscription.xapp_instance,
            "E2EventInstanceId": subscription.instance,
        }
        if isinstance(message, e2ap.SubscriptionFailure) or not message.admitted:
            instance["ErrorCause"] = "RIC subscription failure"
            instance["ErrorSource"] = "E2Node"
        subscription.outcome = {
            "SubscriptionId": subscription.subscription_id,
            "SubscriptionInstances": [instance],
        }
        subscription.answered.set()

    def active_subscriptions(self) -> list[Subscription]:
        with self._lock:
            return list(self.subscriptions.values())

    # ------------------------------------------------------------- submgr, appmgr
    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/ric/v1/subscriptions")
        async def subscribe(request: Request) -> Response:
            body = await request.json()
            node = body["Meid"]
            with self._lock:
                sock = self.nodes.get(node)
            if sock is None or node in self.unreachable:
                return JSONResponse({"error": f"no E2 connection to {node}"}, status_code=503)
            detail = body["SubscriptionDetails"][0]
            subscription = Subscription(
                subscription_id=f"sub-{next(self._ids)}",
                node=node,
                instance=next(self._ids),
                function_id=int(body["RANFunctionID"]),
                xapp_instance=int(detail["XappEventInstanceId"]),
                client=body["ClientEndpoint"],
            )
            actions = tuple(
                e2ap.ActionToSetup(int(a["ActionID"]), bytes(a["ActionDefinition"]))
                for a in detail["ActionToBeSetupList"]
            )
            request_pdu = e2ap.SubscriptionRequest(
                e2ap.RicRequestId(REQUESTOR_ID, subscription.instance),
                subscription.function_id,
                bytes(detail["EventTriggers"]),
                actions,
            )
            with self._lock:
                self.subscriptions[subscription.subscription_id] = subscription
            send_frame(sock, e2ap.encode(request_pdu))
            answered = await asyncio.to_thread(subscription.answered.wait, 5.0)
            if answered and subscription.outcome is not None:
                await self._notify(subscription)  # before the 201
            return JSONResponse(
                {"SubscriptionId": subscription.subscription_id, "SubscriptionInstances": []}, 201
            )

        @app.delete("/ric/v1/subscriptions/{subscription_id}")
        def delete(subscription_id: str) -> Response:
            with self._lock:
                subscription = self.subscriptions.pop(subscription_id, None)
                sock = None if subscription is None else self.nodes.get(subscription.node)
            if subscription is None:
                return Response(status_code=404)
            self.deleted.append(subscription_id)
            if sock is not None:
                request_pdu = e2ap.SubscriptionDeleteRequest(
                    e2ap.RicRequestId(REQUESTOR_ID, subscription.instance),
                    subscription.function_id,
                )
                with contextlib.suppress(OSError):
                    send_frame(sock, e2ap.encode(request_pdu))
            return Response(status_code=204)

        @app.post("/ric/v1/register")
        async def register(request: Request) -> Response:
            self.registered.append(await request.json())
            return Response(status_code=201)

        @app.post("/ric/v1/deregister")
        async def deregister(request: Request) -> Response:
            self.deregistered.append(await request.json())
            return Response(status_code=204)

        return app

    async def _notify(self, subscription: Subscription) -> None:
        client = subscription.client
        url = f"http://{client['Host']}:{client['HTTPPort']}/ric/v1/subscriptions/response"
        async with httpx.AsyncClient(timeout=5) as http:
            await http.post(url, json=subscription.outcome)


def point_at_stand_ins(config: Path, platform_port: int, http_port: int, rmr_port: int) -> None:
    """Make an xApp configuration use the stand-ins' submgr and appmgr and these ports."""
    document = json.loads(config.read_text())
    document["e2"] |= {
        "submgr_url": f"http://127.0.0.1:{platform_port}/ric/v1",
        "appmgr_url": f"http://127.0.0.1:{platform_port}/ric/v1",
        "client_host": "127.0.0.1",
        "http_port": http_port,
        "rmr_port": rmr_port,
    }
    config.write_text(json.dumps(document))
