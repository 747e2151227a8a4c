"""The agent's REST API (FastAPI): weights, telemetry, probes, health; bearer-token auth.

No `from __future__ import annotations` here: FastAPI reads the dependencies of the routes
from their annotations at run time, and these refer to names local to `create_app`.
"""

import asyncio
import contextlib
import hmac
import logging
import subprocess
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from agent.guard import RequestGuard
from agent.probes import PathDownError, ProbeError, iperf3_probe, truth_probe
from agent.service import (
    MAX_EPOCH,
    ApplyFailedError,
    UpdateRejectedError,
    WeightService,
    WeightUpdate,
)
from core.asgi_guard import NO_NATIVE_TELEMETRY
from core.domain import Direction
from core.sequence import SPACE as SEQUENCE_SPACE

log = logging.getLogger(__name__)


# Sets in one batch: 256 of a few hundred bytes each stay well inside the 64 KiB body cap.
MAX_BATCH_SETS = 256
# Sets per page of `GET /v1/weights/{direction}/held`: about 120 kB, under the xApp's cap on an
# agent's answer (256 KiB).
MAX_HELD_PAGE = 500


class WeightsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cpe_id: str | None = None
    weights: dict[str, StrictInt]
    sequence: StrictInt = Field(ge=0, le=SEQUENCE_SPACE - 1, description="wraps (RFC 1982)")
    requested_by: str = Field(default="xapp", max_length=100)
    epoch: StrictInt = Field(
        default=0,
        ge=0,
        le=MAX_EPOCH,
        description="the sender's owner epoch: a set from an earlier owner than the one in "
        "force is refused (409)",
    )


class WeightsBatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sets: list[WeightsBody] = Field(min_length=1, max_length=MAX_BATCH_SETS)


class ProbeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    access: str
    seconds: float = Field(default=5.0, gt=0, le=60)
    parallel: int = Field(default=10, ge=1, le=32)
    reverse: bool = False


def read_token(path: Path | None) -> str | None:
    if path is None:
        return None
    token = path.read_text().strip()
    if not token:
        raise ValueError(f"{path}: the token file is empty")
    return token


# The longest an events request is held open (the xApp asks again at once).
MAX_EVENT_WAIT_S = 30.0


def refusal_status(error: UpdateRejectedError | ApplyFailedError) -> int:
    """The HTTP status of a set not applied: the refusal's own, or 502 when the kernel or the
    state file would not take it."""
    return error.status if isinstance(error, UpdateRejectedError) else 502


def create_app(service: WeightService, token: str | None) -> FastAPI:
    app = FastAPI(title="atsss agent", version="0.1.0", telemetry=NO_NATIVE_TELEMETRY)
    # Tells this run of the agent from the previous one: an xApp seeing it change knows the
    # agent restarted and checks that it holds what it should.
    instance = uuid.uuid4().hex
    app.add_middleware(RequestGuard, token=token)
    news = _News()
    service.on_action.append(news.pulse)
    bearer = HTTPBearer(auto_error=False)
    config = service.config

    @app.exception_handler(RequestValidationError)
    async def bad_body(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if p != "body")
        message = "the body is not valid JSON" if first["type"] == "json_invalid" else first["msg"]
        return JSONResponse(
            {"detail": f"{where}: {message}" if where else message}, status_code=422
        )

    def caller(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> str:
        if token is None:
            return "anyone (no token configured)"
        if credentials is None or not hmac.compare_digest(
            credentials.credentials.encode(), token.encode()
        ):
            raise HTTPException(
                401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"}
            )
        return "token holder"

    @app.get("/v1/health")
    def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "role": config.role,
            "backend": service.backend.name,
            "lever": service.backend.lever,
            "directions": sorted(d.value for d in service.directions),
            "instance": instance,
            "carrier_down": service.carrier_down,
            "local_actions": [a.__dict__ for a in service.local_actions[-10:]],
            **held_by_a_cpe(),
        }

    def held_by_a_cpe() -> dict[str, Any]:
        """A CPE's agent says in its health what it holds, per direction: a restarted xApp
        learns its lever and its sets in one call. (The proxy's lists them by page.)"""
        if config.role != "cpe" or config.cpe_id is None:
            return {}
        applied = service.applied(config.cpe_id)
        held = {applied.direction: applied.__dict__} if applied is not None else {}
        return {"cpe_id": config.cpe_id, "held": held}

    def update_from(
        body: WeightsBody, direction: Direction, who: str, request: Request
    ) -> WeightUpdate:
        client = request.client.host if request.client else "?"
        return WeightUpdate(
            cpe_id=body.cpe_id or config.cpe_id,
            direction=direction,
            weights=body.weights,
            sequence=body.sequence,
            requested_by=f"{body.requested_by} ({who}, {client})",
            epoch=body.epoch,
        )

    @app.put("/v1/weights/{direction}")
    def put_weights(
        direction: Direction,
        body: WeightsBody,
        request: Request,
        who: Annotated[str, Depends(caller)],
    ) -> dict[str, Any]:
        if body.cpe_id is None and config.role == "proxy":
            raise HTTPException(422, "cpe_id: a proxy serves several CPEs; name the one meant")
        try:
            applied = service.apply(update_from(body, direction, who, request))
        except (UpdateRejectedError, ApplyFailedError) as error:
            raise HTTPException(refusal_status(error), str(error)) from error
        return {"applied": applied.__dict__}

    @app.put("/v1/weights/{direction}/batch")
    def put_weights_batch(
        direction: Direction,
        body: WeightsBatchBody,
        request: Request,
        who: Annotated[str, Depends(caller)],
    ) -> dict[str, Any]:
        """Many CPEs' sets in one request, applied with one kernel write (the proxy's agent
        serving a fleet). Each set gets its own result, with the status a single PUT of it
        would have had: 200 and what was applied, or the refusal's status and detail."""
        if config.role == "proxy" and any(s.cpe_id is None for s in body.sets):
            raise HTTPException(422, "sets.cpe_id: a proxy serves several CPEs; name each one")
        updates = [update_from(s, direction, who, request) for s in body.sets]
        results: list[dict[str, Any]] = []
        for update, outcome in zip(updates, service.apply_many(updates), strict=True):
            if isinstance(outcome, Exception):
                status = refusal_status(outcome)
                results.append({"cpe_id": update.cpe_id, "status": status, "detail": str(outcome)})
            else:
                results.append(
                    {"cpe_id": update.cpe_id, "status": 200, "applied": outcome.__dict__}
                )
        return {"results": results}

    @app.get("/v1/weights/{direction}")
    def get_weights(
        direction: Direction, who: Annotated[str, Depends(caller)], cpe_id: str | None = None
    ) -> dict[str, Any]:
        if cpe_id is None and config.role == "proxy":
            raise HTTPException(422, "cpe_id: a proxy serves several CPEs; name the one meant")
        chosen = cpe_id or config.cpe_id
        applied = service.applied(chosen)
        if applied is None or applied.direction != direction.value:
            raise HTTPException(404, f"no {direction.value} weights applied for {chosen}")
        return {
            "applied": applied.__dict__,
            "effective": service.effective(chosen),
            "carrier_down": service.carrier_down,
        }

    @app.get("/v1/weights/{direction}/held")
    def get_held_weights(
        direction: Direction,
        who: Annotated[str, Depends(caller)],
        after: Annotated[str, Query(max_length=200)] = "",
        limit: Annotated[int, Query(ge=1, le=MAX_HELD_PAGE)] = MAX_HELD_PAGE,
    ) -> dict[str, Any]:
        """Every CPE's set in force for the direction, a page at a time in the order of the
        CPE ids: a restarted xApp asks the proxy's agent this once per page, not once per CPE.
        ``next``: the ``after`` of the next page, or null on the last."""
        page, more = service.applied_page(direction, after, limit)
        return {"held": [a.__dict__ for a in page], "next": page[-1].cpe_id if more else None}

    @app.get("/v1/events")
    async def events(
        who: Annotated[str, Depends(caller)],
        after: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0,
        wait_s: Annotated[float, Query(ge=0, le=MAX_EVENT_WAIT_S)] = 0.0,
    ) -> dict[str, Any]:
        """The agent's own actions numbered above ``after``; with ``wait_s``, held open until
        there is one (long poll): how the xApp hears of a carrier lost or back at once. The
        wait is on the event loop, not in a worker thread: however many long polls are held
        open, the weight requests keep their workers."""
        deadline = time.monotonic() + wait_s
        while True:
            latest, actions = service.actions_since(after)
            left = deadline - time.monotonic()
            if actions or left <= 0:
                break
            woken = news.waiter()
            latest, actions = service.actions_since(after)  # one may have come meanwhile
            if actions:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), timeout=left)
        return {
            "instance": instance,
            "latest": latest,
            "events": [a.__dict__ for a in actions],
        }

    @app.get("/v1/telemetry")
    def telemetry(who: Annotated[str, Depends(caller)]) -> dict[str, Any]:
        out: dict[str, Any] = {"kernel": service.backend.describe()}
        try:
            done = subprocess.run(
                ["ss", "-tinHM"], capture_output=True, text=True, timeout=5, check=False
            )
            out["subflows"] = _parse_ss(done.stdout)
        except OSError as error:
            out["subflows_error"] = str(error)
        return out

    @app.post("/v1/probes")
    def probe(body: ProbeBody, who: Annotated[str, Depends(caller)]) -> dict[str, Any]:
        access = config.accesses.get(body.access)
        if access is None:
            raise HTTPException(404, f"unknown access {body.access!r}")
        if config.probe_truth is not None:
            try:
                # a dry-run host's stand-in for iperf3 (agent/probes.py)
                result = truth_probe(
                    config.cpe_id, body.access, body.seconds, body.reverse, config.probe_truth
                )
            except PathDownError as error:
                raise HTTPException(502, str(error)) from error
            except ProbeError as error:  # no truth to read: says nothing of the path
                raise HTTPException(503, str(error)) from error
            return {"probe": result.__dict__}
        if config.probe_server is None:
            raise HTTPException(409, "no probe_server configured")
        try:
            result = iperf3_probe(
                body.access,
                access.address,
                config.probe_server,
                body.seconds,
                body.parallel,
                body.reverse,
                interface=access.interface,
            )
        except ProbeError as error:
            raise HTTPException(502, str(error)) from error
        log.info("probe on %s: %.1f Mbit/s, %d bytes", body.access, result.mbps, result.bytes)
        return {"probe": result.__dict__}

    return app


class _News:
    """Wakes the held events requests (on the event loop) when the carrier thread acts."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def waiter(self) -> asyncio.Event:
        """The event the next action sets; call on the event loop."""
        self._loop = asyncio.get_running_loop()
        if self._event is None:
            self._event = asyncio.Event()
        return self._event

    def pulse(self) -> None:
        """From any thread: set the current event, the next waiters get a new one."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._set)

    def _set(self) -> None:
        event, self._event = self._event, None
        if event is not None:
            event.set()


def _parse_ss(text: str) -> list[dict[str, str]]:
    """`ss -tinHM`: a socket line followed by its info line; keep the key:value tokens."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    sockets = []
    for socket_line, info in zip(lines[::2], lines[1::2], strict=False):
        fields = socket_line.split()
        entry = {
            "local": fields[3] if len(fields) > 3 else "",
            "peer": fields[4] if len(fields) > 4 else "",
        }
        for token in info.split():
            key, sep, value = token.partition(":")
            if sep and key in {
                "rtt",
                "cwnd",
                "bytes_sent",
                "bytes_acked",
                "bytes_received",
                "delivery_rate",
            }:
                entry[key] = value
        sockets.append(entry)
    return sockets
