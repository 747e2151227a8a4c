"""The xApp's HTTP face towards the RIC: submgr notifications, health probes, metrics."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from fastapi import APIRouter, FastAPI, HTTPException, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from core.asgi_guard import NO_NATIVE_TELEMETRY
from xapp.e2.subscriptions import SubscriptionManager

NOTIFICATION_PATH = "/ric/v1/subscriptions/response"


class ReadinessLike(Protocol):
    @property
    def ready(self) -> bool: ...

    @property
    def waiting_for(self) -> tuple[str, ...]: ...


class _AlwaysReady:
    ready = True
    waiting_for: tuple[str, ...] = ()


def create_app(
    manager: SubscriptionManager | None,
    registry: CollectorRegistry | None = None,
    readiness: Callable[[], ReadinessLike] = _AlwaysReady,
    routers: Sequence[APIRouter] = (),
) -> FastAPI:
    """``manager`` is None in standalone mode (no submgr sends notifications)."""
    app = FastAPI(title="atsss xApp", version="0.1.0", telemetry=NO_NATIVE_TELEMETRY)
    for router in routers:
        app.include_router(router)

    @app.post(
        NOTIFICATION_PATH,
        responses={
            400: {"description": "not a SubscriptionResponse"},
            404: {"description": "standalone: no submgr"},
        },
    )
    async def subscription_notification(request: Request) -> dict[str, Any]:
        if manager is None:
            raise HTTPException(404, "no submgr subscriptions: the xApp runs standalone")
        try:
            body = await request.json()
        except ValueError as error:
            raise HTTPException(400, f"notification body is not JSON: {error}") from error
        if not isinstance(body, dict):
            raise HTTPException(400, "notification body must be a SubscriptionResponse object")
        try:
            # in a worker thread: it writes to SDL, which must never stall the event loop
            record = await asyncio.to_thread(manager.handle_notification, body)
        except ValueError as error:
            raise HTTPException(400, str(error)) from error
        return {"matched": record is not None}

    @app.get("/ric/v1/health/alive")
    async def alive() -> dict[str, str]:
        # On the event loop itself, never waiting for a worker thread: while SDL stalls,
        # requests that read it may hold every worker, and a liveness probe that timed out
        # would have Kubernetes restart a healthy xApp.
        return {"status": "alive"}

    @app.get("/ric/v1/health/ready", responses={503: {"description": "not ready"}})
    def is_ready() -> Response:
        """200 once the xApp can serve; 503 with what it still waits for, one line each."""
        found = readiness()
        body: dict[str, object] = {"status": "ready" if found.ready else "not ready"}
        if not found.ready:
            body["waiting_for"] = list(found.waiting_for)
        return Response(
            json.dumps(body), status_code=200 if found.ready else 503, media_type="application/json"
        )

    @app.get(
        "/metrics",
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text"}},
    )
    def metrics() -> Response:
        payload = generate_latest(registry) if registry is not None else b""
        return Response(payload, media_type=CONTENT_TYPE_LATEST)

    return app
