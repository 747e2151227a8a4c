"""The operator REST API: what the xApp believes and does per CPE, and the operator's overrides.

Mounted on the service's HTTP port under ``/v1``; OpenAPI at ``/openapi.json``. Reads need a
viewer token (or no tokens file at all), writes an operator token. Every 4xx names the field or
the thing that was wrong; a write is applied whole or not at all.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.deployment import CpeConfig, DeploymentError
from core.domain import (
    CapacityEstimate,
    Cpe,
    Direction,
    SteeringMode,
    SteeringRule,
    SteeringThresholds,
    WeightSet,
)
from xapp.operator import fleet as fleet_view
from xapp.operator.auth import Caller, Role, Tokens
from xapp.operator.overrides import OperatorOverride, rule_json
from xapp.operator.registry import CpeRefusedError
from xapp.operator.state import (
    ConflictError,
    OperatorState,
    StoreUnavailableError,
    UnknownError,
)

ESTIMATOR_MODES = ("fused", "kpi-only", "model-only", "probe-only")
MAX_EXPIRY_S = 30 * 24 * 3600.0


class Problem(BaseModel):
    detail: str


class FieldProblem(BaseModel):
    loc: list[str]
    msg: str


class ValidationProblem(BaseModel):
    detail: str = Field(description="the first problem, naming its field")
    errors: list[FieldProblem] = Field(
        default_factory=list, description="every problem, where the request's shape was wrong"
    )


def _answers(*codes: int) -> dict[int | str, dict[str, Any]]:
    meaning = {
        401: "no bearer token, or an unknown one",
        403: "the token's role may not do this",
        404: "no such CPE or override",
        409: "conflicts with an override in force (named)",
        422: "the request is not valid (the field is named)",
        503: "SDL did not answer; nothing was changed",
    }
    found: dict[int | str, dict[str, Any]] = {
        code: {"model": Problem, "description": meaning[code]} for code in codes
    }
    found[422] = {"model": ValidationProblem, "description": meaning[422]}
    return found


READ = _answers(401, 403)
READ_ONE = _answers(401, 403, 404)
WRITE = _answers(401, 403, 404, 409, 503)


class ServiceView(Protocol):
    """What the API reads of the running xApp: a read-only port."""

    def cpes(self) -> Sequence[Cpe]: ...

    def estimate(
        self, cpe_id: str, access: str, direction: Direction
    ) -> CapacityEstimate | None: ...

    def weights_in_force(self, cpe_id: str, direction: Direction) -> WeightSet | None: ...

    def last_push(self, cpe_id: str, direction: Direction) -> dict[str, Any] | None: ...

    def last_access_event(self, cpe_id: str) -> dict[str, Any] | None: ...

    def estimator_mode(self, cpe_id: str, direction: Direction) -> str: ...

    def steering(self, cpe_id: str, direction: Direction) -> SteeringRule: ...

    def nodes(self) -> list[dict[str, Any]]: ...

    def agents(self, check: bool = False) -> list[dict[str, Any]]: ...

    def weights_at_agent(self, cpe_id: str, direction: Direction) -> dict[str, Any]: ...

    def models(self) -> list[dict[str, Any]]: ...

    def fleet(self) -> list[dict[str, Any]]: ...


class ServiceCommands(Protocol):
    """What the API changes in the running xApp beyond overrides (those go to OperatorState)."""

    def put_cpes(self, cpes: Sequence[CpeConfig], who: str, why: str) -> None: ...

    def remove_cpe(self, cpe_id: str, who: str, why: str) -> None: ...

    def reload_model(self, access: str, name: str | None, who: str, why: str) -> dict[str, Any]: ...


class SteeringBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: SteeringMode
    preferred: list[str] = Field(
        default_factory=list, description="ACTIVE_STANDBY: active first; PRIORITY_BASED: order"
    )
    rtt_ms: int | None = Field(default=None, ge=0, le=10_000, description="RTT threshold, ms")
    loss_rate_permille: int | None = Field(
        default=None, ge=0, le=1000, description="packet loss rate threshold, per mille"
    )


class CpeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cpe: CpeConfig
    reason: str = Field(min_length=1, max_length=500)


class CpeImportBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cpes: list[CpeConfig] = Field(min_length=1, max_length=10_000)
    reason: str = Field(min_length=1, max_length=500)


class ModelReloadBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    access: Literal["nr", "wifi", "lifi"]
    model: str | None = Field(
        default=None,
        max_length=100,
        description="a model by name: the folder `<operator_api.models_folder>/<name>` that "
        "`atsss train --out` wrote; default: the shipped model",
    )
    reason: str = Field(min_length=1, max_length=500)


class OverrideBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["weights", "exclude", "steering", "estimator", "freeze"]
    directions: list[Direction] = Field(
        default_factory=lambda: [Direction.DOWNLINK, Direction.UPLINK], min_length=1
    )
    reason: str = Field(min_length=1, max_length=500)
    # Strict: a string "10" or true is a client's mistake, not a number to guess from; an expiry
    # shorter than a second ends before the loop could act on it.
    expires_in_s: Annotated[float, Field(strict=True, ge=1, le=MAX_EXPIRY_S)] | None = None
    weights: dict[str, Annotated[int, Field(strict=True, ge=0, le=255)]] | None = None
    excluded: list[str] | None = Field(default=None, min_length=1)
    steering: SteeringBody | None = None
    estimator: Literal["fused", "kpi-only", "model-only", "probe-only"] | None = None

    @model_validator(mode="after")
    def _fits_kind(self) -> OverrideBody:
        needed = {"weights": "weights", "exclude": "excluded", "steering": "steering"}
        needed["estimator"] = "estimator"
        for kind, name in needed.items():
            given = getattr(self, name) is not None
            if kind == self.kind and not given:
                raise ValueError(f"{name}: a {kind} override needs it")
            if kind != self.kind and given:
                raise ValueError(f"{name}: not part of a {self.kind} override")
        if self.weights is not None and not any(self.weights.values()):
            raise ValueError("weights: all zero would leave the CPE with no path")
        if len(set(self.directions)) != len(self.directions):
            raise ValueError("directions: a direction appears twice")
        return self


# Seconds since the answering replica last found its overrides and CPEs in step with SDL.
STATE_AGE_HEADER = "X-Operator-State-Age"


def create_router(
    view: ServiceView, commands: ServiceCommands, state: OperatorState, tokens: Tokens
) -> APIRouter:
    def state_age(response: Response) -> None:
        # Reads are served from memory, also while SDL is slow or down: each answer says how
        # long ago this replica last found its operator state in step with SDL.
        response.headers[STATE_AGE_HEADER] = f"{state.state_age_s():.1f}"

    router = APIRouter(prefix="/v1", tags=["operator"], dependencies=[Depends(state_age)])

    def caller_with(role: Role) -> Any:
        def dependency(request: Request) -> Caller:
            header = request.headers.get("authorization", "")
            scheme, _, token = header.partition(" ")
            if not tokens.configured and role == "viewer":
                return Caller("anonymous", "viewer")
            if scheme.lower() != "bearer" or not token:
                raise HTTPException(401, "a bearer token is needed", {"WWW-Authenticate": "Bearer"})
            caller = tokens.caller(token.strip())
            if caller is None:
                raise HTTPException(401, "unknown token", {"WWW-Authenticate": "Bearer"})
            if not caller.may(role):
                raise HTTPException(403, f"{caller.name} is a {caller.role}; this needs {role}")
            return caller

        return Depends(dependency)

    viewer = caller_with("viewer")
    operator = caller_with("operator")

    def cpe_or_404(cpe_id: str) -> Cpe:
        for cpe in view.cpes():
            if cpe.cpe_id == cpe_id:
                return cpe
        raise HTTPException(404, f"cpe_id: no CPE {cpe_id!r}")

    @router.get("/cpes", dependencies=[viewer], responses=READ)
    def list_cpes(
        offset: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        access: Annotated[str | None, Query(max_length=32)] = None,
        overridden: bool | None = None,
    ) -> dict[str, Any]:
        """The CPEs, a page at a time; filter by an access they have, or by having overrides."""
        chosen = []
        for cpe in view.cpes():
            if access is not None and access not in cpe.accesses:
                continue
            has = bool(state.overrides(cpe.cpe_id))
            if overridden is not None and has != overridden:
                continue
            chosen.append(cpe)
        page = chosen[offset : offset + limit]
        return {
            "total": len(chosen),
            "offset": offset,
            "items": [
                {
                    "cpe_id": cpe.cpe_id,
                    "accesses": list(cpe.access_names),
                    "overrides": len(state.overrides(cpe.cpe_id)),
                    "weights": {
                        d.value: _weights(view.weights_in_force(cpe.cpe_id, d)) for d in Direction
                    },
                }
                for cpe in page
            ],
        }

    @router.get("/cpes/{cpe_id}", dependencies=[viewer], responses=READ_ONE)
    def cpe_state(cpe_id: str) -> dict[str, Any]:
        """What the xApp believes and does for one CPE, per direction."""
        cpe = cpe_or_404(cpe_id)
        now = time.time()
        directions = {}
        for direction in Direction:
            in_force = view.weights_in_force(cpe_id, direction)
            directions[direction.value] = {
                "estimates": {
                    access: _estimate(view.estimate(cpe_id, access, direction), now)
                    for access in cpe.access_names
                },
                "weights_in_force": _weights(in_force),
                "at_agent": view.weights_at_agent(cpe_id, direction),
                "sequence": None if in_force is None else in_force.sequence,
                "last_push": view.last_push(cpe_id, direction),
                "steering": rule_json(view.steering(cpe_id, direction)),
                "estimator_mode": view.estimator_mode(cpe_id, direction),
                "frozen": _frozen(state, cpe_id, direction),
            }
        return {
            "cpe_id": cpe_id,
            "accesses": {
                name: {"node": a.e2_node_id, "ue_id": a.ue_id, "station_mac": a.station_mac}
                for name, a in cpe.accesses.items()
            },
            "directions": directions,
            "last_access_event": view.last_access_event(cpe_id),
            "overrides": [o.as_json() for o in state.overrides(cpe_id)],
        }

    @router.post("/cpes/{cpe_id}/overrides", status_code=201, responses=WRITE)
    def set_override(cpe_id: str, body: OverrideBody, caller: Caller = operator) -> dict[str, Any]:
        """Set an override; it takes effect at the next decision. 409 names a conflicting one."""
        cpe_or_404(cpe_id)
        rule = None
        if body.steering is not None:
            rule = SteeringRule(
                body.steering.mode,
                tuple(body.steering.preferred),
                SteeringThresholds(body.steering.rtt_ms, body.steering.loss_rate_permille),
            )
        now = time.time()
        override = OperatorOverride(
            override_id="",
            cpe_id=cpe_id,
            directions=tuple(body.directions),
            kind=body.kind,
            reason=body.reason,
            set_by=caller.name,
            set_at_s=now,
            expires_at_s=None if body.expires_in_s is None else now + body.expires_in_s,
            weights=body.weights,
            excluded=tuple(body.excluded or ()),
            rule=rule,
            estimator=body.estimator,
        )
        try:
            return state.add(override).as_json()
        except UnknownError as error:
            raise HTTPException(422, str(error)) from None
        except ConflictError as error:
            raise HTTPException(409, str(error)) from None
        except StoreUnavailableError as error:
            raise HTTPException(503, str(error)) from None

    @router.post("/cpes", status_code=201, responses=WRITE)
    def add_cpe(body: CpeBody, caller: Caller = operator) -> dict[str, Any]:
        """Add a CPE (or replace one of that id) on top of the configuration file; kept in SDL."""
        return change_cpes([body.cpe], caller, body.reason)[0]

    @router.post("/cpes/import", status_code=201, responses=WRITE)
    def import_cpes(body: CpeImportBody, caller: Caller = operator) -> list[dict[str, Any]]:
        """Add or replace many CPEs at once: all of them, or none when one does not fit."""
        return change_cpes(body.cpes, caller, body.reason)

    @router.put("/cpes/{cpe_id}", responses=WRITE)
    def replace_cpe(cpe_id: str, body: CpeBody, caller: Caller = operator) -> dict[str, Any]:
        """Change a CPE's identities or agent."""
        if body.cpe.id != cpe_id:
            raise HTTPException(
                422, f"cpe.id: {body.cpe.id!r} is not the CPE of the path {cpe_id!r}"
            )
        cpe_or_404(cpe_id)
        return change_cpes([body.cpe], caller, body.reason)[0]

    @router.delete("/cpes/{cpe_id}", responses=WRITE)
    def remove_cpe(
        cpe_id: str,
        reason: Annotated[str, Query(min_length=1, max_length=500)],
        caller: Caller = operator,
    ) -> dict[str, str]:
        """Stop controlling a CPE (also one of the configuration file's); kept in SDL."""
        try:
            commands.remove_cpe(cpe_id, caller.name, reason)
        except UnknownError as error:
            raise HTTPException(404, str(error)) from None
        except DeploymentError as error:
            raise HTTPException(409, str(error)) from None
        except StoreUnavailableError as error:
            raise HTTPException(503, str(error)) from None
        return {"removed": cpe_id}

    def change_cpes(cpes: Sequence[CpeConfig], caller: Caller, reason: str) -> list[dict[str, Any]]:
        ids = [c.id for c in cpes]
        if len(set(ids)) != len(ids):
            raise HTTPException(422, "cpes: a CPE id appears twice")
        try:
            commands.put_cpes(cpes, caller.name, reason)
        except CpeRefusedError as error:
            raise HTTPException(422, str(error)) from None
        except DeploymentError as error:
            raise HTTPException(409, str(error)) from None
        except StoreUnavailableError as error:
            raise HTTPException(503, str(error)) from None
        return [c.model_dump(mode="json", exclude_defaults=True) for c in cpes]

    @router.get("/models", dependencies=[viewer], responses=READ)
    def models() -> list[dict[str, Any]]:
        """Which model answers for each access's estimator."""
        return view.models()

    @router.post("/models/reload", responses=_answers(401, 403, 409))
    def reload_model(body: ModelReloadBody, caller: Caller = operator) -> dict[str, Any]:
        """Load a model by name from the models folder (a retrained one, another version) or
        the shipped one, for an access, without a restart; 409 when it cannot be loaded (the
        same answer whatever the reason, which goes to the xApp's log), the one in use stays."""
        try:
            return commands.reload_model(body.access, body.model, caller.name, body.reason)
        except ValueError as error:
            raise HTTPException(409, str(error)) from None

    @router.get("/overrides", dependencies=[viewer], responses=READ)
    def list_overrides(cpe_id: str | None = None) -> list[dict[str, Any]]:
        return [o.as_json() for o in state.overrides(cpe_id)]

    @router.delete("/overrides/{override_id}", responses=WRITE)
    def delete_override(
        override_id: str,
        reason: Annotated[str, Query(min_length=1, max_length=500)],
        caller: Caller = operator,
    ) -> dict[str, Any]:
        """Remove an override (``reason`` says why, for the audit log); its effect ends at the
        next decision."""
        try:
            return state.remove(override_id, caller.name, reason).as_json()
        except UnknownError as error:
            raise HTTPException(404, str(error)) from None
        except StoreUnavailableError as error:
            raise HTTPException(503, str(error)) from None

    @router.get("/audit", dependencies=[viewer], responses=_answers(401, 403, 503))
    def audit(
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        cpe_id: Annotated[str | None, Query(max_length=64)] = None,
        before: Annotated[str | None, Query(pattern=r"^[0-9]{1,20}-[0-9]{1,20}$")] = None,
    ) -> list[dict[str, Any]]:
        """Every change: who, when, what, why, before and after; newest first, each with its
        ``id``: pass the last one's as ``before`` for the next page. The log is bounded
        (``operator_api.audit_max_entries``, ``audit_max_age_days``)."""
        try:
            return state.audit(limit, cpe_id, before)
        except Exception as error:  # SDL down: the log lives there
            raise HTTPException(
                503, f"the audit log is in SDL, which did not answer: {error}"
            ) from None

    @router.get(
        "/events",
        dependencies=[viewer],
        responses={**READ_ONE, 200: {"content": {"text/event-stream": {}}}},
        response_class=StreamingResponse,
    )
    async def events(
        request: Request,
        cpe_id: Annotated[str, Query(min_length=1, max_length=64)],
        direction: Direction = Direction.DOWNLINK,
        period_s: Annotated[float, Query(ge=0.2, le=60)] = 1.0,
    ) -> StreamingResponse:
        """Server-sent events, one a period: the CPE's capacity estimates and weights per
        access, its overrides, and the E2 nodes' and agents' health (the dashboard's feed)."""
        cpe = cpe_or_404(cpe_id)

        async def snapshots() -> AsyncIterator[str]:
            while not await request.is_disconnected():
                # in a worker thread: reading the weights may wait on SDL, and the event loop
                # also answers the liveness probe
                found = await asyncio.to_thread(snapshot, cpe, direction)
                yield "data: " + json.dumps(found) + "\n\n"
                await asyncio.sleep(period_s)

        return StreamingResponse(snapshots(), media_type="text/event-stream")

    def snapshot(cpe: Cpe, direction: Direction) -> dict[str, Any]:
        held = view.weights_in_force(cpe.cpe_id, direction)
        own_nodes = {a.e2_node_id for a in cpe.accesses.values()}
        capacity = {}
        for access in cpe.access_names:
            estimate = view.estimate(cpe.cpe_id, access, direction)
            if estimate is not None:
                capacity[access] = round(estimate.capacity_mbps, 3)
        return {
            "time_s": time.time(),
            "cpe_id": cpe.cpe_id,
            "direction": direction.value,
            "accesses": list(cpe.access_names),
            "capacity": capacity,
            "weights": {} if held is None else dict(held.weights),
            "overrides": [o.as_json() for o in state.overrides(cpe.cpe_id)],
            # the CPE's own nodes and agents: a fleet's would be thousands of rows a second
            "nodes": [n for n in view.nodes() if n["node"] in own_nodes],
            "agents": [a for a in view.agents() if a["cpe_id"] in (None, cpe.cpe_id)],
        }

    fleet_snapshots = fleet_view.FleetSnapshots(view.fleet)

    @router.get("/fleet", dependencies=[viewer], responses=READ)
    def fleet(
        offset: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        search: Annotated[str | None, Query(max_length=64)] = None,
        problem: fleet_view.RowFilter | None = None,
        sort: fleet_view.SortKey = "attention",
        snapshot: Annotated[int | None, Query(ge=1)] = None,
    ) -> dict[str, Any]:
        """Every CPE in one table, a page at a time: steered or not and why (reports fresh, the
        latest push, the agent, the E2 nodes), the weights in force and their age, overrides.
        ``sort=attention`` puts the CPEs that need it first; ``search`` looks in the CPE id;
        ``problem`` keeps one kind of row. ``summary`` counts the whole fleet. Each answer names
        its ``snapshot``: the next page asked with it reads the same rows (no CPE on two pages
        of a fleet that changes meanwhile) while the xApp keeps it; otherwise a fresh one."""
        taken, rows = fleet_snapshots.rows(snapshot)
        chosen = fleet_view.select(rows, search, problem, sort)
        return {
            "snapshot": taken,
            "summary": fleet_view.summary(rows),
            "problems": {name: text for name, (_, text) in fleet_view.PROBLEMS.items()},
            "total": len(chosen),
            "offset": offset,
            "items": chosen[offset : offset + limit],
        }

    @router.get("/nodes", dependencies=[viewer], responses=READ)
    def nodes() -> list[dict[str, Any]]:
        """Per E2 node its subscription state."""
        return view.nodes()

    @router.get("/agents", dependencies=[viewer], responses=READ)
    def agents(check: bool = False) -> list[dict[str, Any]]:
        """Per agent its lever and the outcome of the last push; ``check``: ask each agent's
        health now as well (one request per agent)."""
        return view.agents(check)

    return router


DASHBOARD = Path(__file__).with_name("dashboard.html")


def install_dashboard(app: FastAPI) -> None:
    """The live dashboard: one page, no CDN; it reads and writes through the API above."""

    @app.get("/dashboard", response_class=HTMLResponse, include_in_schema=False)
    def dashboard() -> HTMLResponse:
        return HTMLResponse(DASHBOARD.read_text())


def install_error_format(app: FastAPI) -> None:
    """Validation errors as one message naming the field, besides FastAPI's detail list."""
    from fastapi.exceptions import RequestValidationError

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = error.errors()
        first = problems[0] if problems else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"] if p != "body")
        message = str(first["msg"]).removeprefix("Value error, ")
        return JSONResponse(
            {"detail": f"{where}: {message}" if where else message, "errors": _plain(problems)},
            status_code=422,
        )


def _plain(problems: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {"loc": [str(p) for p in item.get("loc", ())], "msg": str(item.get("msg", ""))}
        for item in problems
    ]


def _weights(weight_set: WeightSet | None) -> dict[str, int] | None:
    return None if weight_set is None else dict(weight_set.weights)


def _estimate(estimate: CapacityEstimate | None, now_s: float) -> dict[str, Any] | None:
    if estimate is None:
        return None
    return {
        "capacity_mbps": round(estimate.capacity_mbps, 3),
        "p10_mbps": round(estimate.quantile_mbps(0.1), 3),
        "p90_mbps": round(estimate.quantile_mbps(0.9), 3),
        "source": estimate.source,
        "age_s": round(estimate.age_s(now_s), 3),
        "lower_bound": estimate.lower_bound,
        "available": estimate.available,
    }


def _frozen(state: OperatorState, cpe_id: str, direction: Direction) -> bool:
    control = state.in_force(cpe_id, direction).control
    return control is not None and control.frozen
