"""A stand-in for the RIC's subscription manager, served over real HTTP by uvicorn in tests.

It records every request and answers each POST by the next behaviour in its script: success
(notification first, then 201 — the order that trips naive xApps), success-late (201 first, the
notification after), failure (E2 node refused: ErrorCause in the notification), unavailable
(503, no E2 connection), reject (400) or not-json (a 201 whose body is not JSON); per node
if `per_node` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import BackgroundTasks, FastAPI, Request, Response
from fastapi.responses import JSONResponse


@dataclass
class FakeSubmgr:
    script: list[str] = field(default_factory=list)
    # Per node (Meid): its own behaviours, the last one repeated for ever.
    per_node: dict[str, list[str]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    notifications_sent: int = 0
    _next_id: int = 100

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/ric/v1/subscriptions")
        async def subscribe(request: Request, background: BackgroundTasks) -> Response:
            body = await request.json()
            self.requests.append(body)
            behaviour = self.script.pop(0) if self.script else "success"
            own = self.per_node.get(body.get("Meid"))
            if own:
                behaviour = own.pop(0) if len(own) > 1 else own[0]
            if behaviour == "unavailable":
                return JSONResponse({"error": "no E2 connection"}, status_code=503)
            if behaviour == "reject":
                return JSONResponse({"error": "bad request"}, status_code=400)
            if behaviour == "not-json":
                return Response("<html>created</html>", status_code=201)
            self._next_id += 1
            subscription_id = f"sub-{self._next_id}"
            notification = self._notification(body, subscription_id, failed=behaviour == "failure")
            if behaviour == "success-late":
                background.add_task(self._notify, body, notification)
            else:
                await self._notify(body, notification)
            return JSONResponse(
                {"SubscriptionId": subscription_id, "SubscriptionInstances": []}, 201
            )

        @app.delete("/ric/v1/subscriptions/{subscription_id}")
        async def delete(subscription_id: str) -> Response:
            self.deleted.append(subscription_id)
            return Response(status_code=204)

        return app

    def _notification(
        self, body: dict[str, Any], subscription_id: str, failed: bool
    ) -> dict[str, Any]:
        instances = []
        for detail in body["SubscriptionDetails"]:
            instance: dict[str, Any] = {
                "XappEventInstanceId": detail["XappEventInstanceId"],
                "E2EventInstanceId": self._next_id,
            }
            if failed:
                instance["ErrorCause"] = "RIC subscription failure: action-not-supported"
                instance["ErrorSource"] = "E2Node"
            instances.append(instance)
        return {"SubscriptionId": subscription_id, "SubscriptionInstances": instances}

    async def _notify(self, body: dict[str, Any], notification: dict[str, Any]) -> None:
        endpoint = body["ClientEndpoint"]
        url = f"http://{endpoint['Host']}:{endpoint['HTTPPort']}/ric/v1/subscriptions/response"
        async with httpx.AsyncClient(timeout=5) as client:
            response = await client.post(url, json=notification)
            response.raise_for_status()
        self.notifications_sent += 1
