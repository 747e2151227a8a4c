"""The xApp's HTTP face towards the RIC: submgr notifications, health probes, metrics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from xapp.e2.subscriptions import SubscriptionManager

NOTIFICATION_PATH = "/ric/v1/subscriptions/response"


def create_app(
    manager: SubscriptionManager | None,
    registry: CollectorRegistry | None = None,
    ready: Callable[[], bool] = lambda: True,
    routers: Sequence[APIRouter] = (),
) -> FastAPI:
    """``manager`` is None in standalone mode (no submgr sends notifications)."""
    app = FastAPI(title="atsss xApp", version="0.1.0")
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
            record = manager.handle_notification(body)
        except ValueError as error:
            raise HTTPException(400, str(error)) from error
        return {"matched": record is not None}

    @app.get("/ric/v1/health/alive")
    def alive() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/ric/v1/health/ready", responses={503: {"description": "not ready"}})
    def is_ready() -> Response:
        if ready():
            return Response('{"status":"ready"}', media_type="application/json")
        return Response('{"status":"not ready"}', status_code=503, media_type="application/json")

    @app.get(
        "/metrics",
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text"}},
    )
    def metrics() -> Response:
        payload = generate_latest(registry) if registry is not None else b""
        return Response(payload, media_type=CONTENT_TYPE_LATEST)

    return app
