"""What the operator API, the dashboard and /metrics read of the running xApp: one read-only
view over the control loop, the store, the operator's state and the E2 side.

Nothing here changes anything; the service hands this view to its readers (the API's
``ServiceView`` port, the metrics' ``Observed``), and keeps the changes to itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any, cast

import httpx

from core.deployment import Deployment
from core.domain import (
    CapacityEstimate,
    Cpe,
    Direction,
    SteeringRule,
    SubscriptionRecord,
    WeightSet,
)
from xapp.adapters.agent_http import AgentEndpoint, request_within
from xapp.e2.indications import IndicationProcessor
from xapp.e2.node_health import NodeHealth
from xapp.live import LiveControl
from xapp.operator.fleet import DirectionState, FleetInputs, fleet_rows
from xapp.operator.state import OperatorState
from xapp.ports import WeightPushError, XappStore

# After SDL failed to answer a read, reads serve memory alone this long before asking it again.
STORE_RETRY_S = 5.0


class XappView:
    def __init__(
        self,
        control: LiveControl,
        store: XappStore,
        operator: OperatorState,
        processor: IndicationProcessor,
        deployment: Callable[[], Deployment],
        records: Callable[[], dict[str, SubscriptionRecord]],
        health: Callable[[], list[NodeHealth]] | None,
    ) -> None:
        self._control = control
        self._store = store
        self._operator = operator
        self._processor = processor
        self._deployment = deployment
        self._records = records
        self._health = health
        self._store_failed_at = -float("inf")

    # ------------------------------------------------------------------ CPEs
    def cpes(self) -> Sequence[Cpe]:
        return list(self._control.cpes)

    def estimate(self, cpe_id: str, access: str, direction: Direction) -> CapacityEstimate | None:
        return self._control.estimator.estimate(cpe_id, access, direction, time.time())

    def weights_in_force(self, cpe_id: str, direction: Direction) -> WeightSet | None:
        """From the loop's memory; from SDL only for a CPE it has not read (another replica's),
        and not again for a while after SDL failed to answer: a page of 50 CPEs must not wait
        3 s per CPE and direction on a stalled SDL."""
        known = self._control.state.weights_known(cpe_id, direction)
        if known is not None:
            return known
        if time.monotonic() - self._store_failed_at < STORE_RETRY_S:
            return None
        try:
            return self._store.load_weights(cpe_id, direction)
        except Exception:  # SDL down: the loop's own record is not at hand either
            self._store_failed_at = time.monotonic()
            return None

    def last_push(self, cpe_id: str, direction: Direction) -> dict[str, Any] | None:
        return self._control.last_push.get((cpe_id, direction))

    def last_access_event(self, cpe_id: str) -> dict[str, Any] | None:
        """The latest carrier lost or back that the CPE's agent told of, and what it did."""
        return self._control.last_access_event.get(cpe_id)

    def estimator_mode(self, cpe_id: str, direction: Direction) -> str:
        return self._control.estimator.mode_for(cpe_id, direction)

    def steering(self, cpe_id: str, direction: Direction) -> SteeringRule:
        control = self._operator.in_force(cpe_id, direction).control
        return control.rule if control is not None and control.rule is not None else SteeringRule()

    def models(self) -> list[dict[str, Any]]:
        return self._control.estimator.model.describe()

    # ------------------------------------------------------------------ E2 nodes
    def nodes(self) -> list[dict[str, Any]]:
        """Per configured node: its subscription, the age of its last report and its state."""
        records = self._records()
        health = {h.node: h for h in self._health()} if self._health is not None else {}
        now = time.time()
        found = []
        for node in self._deployment().e2.nodes:
            last = self._processor.last_indication_s.get(node.name)
            age = None if last is None else round(now - last, 3)
            record = records.get(node.name)
            healed = health.get(node.name)
            found.append(
                {
                    "node": node.name,
                    "access": node.access,
                    "state": healed.state if healed is not None else _plain_state(record),
                    "cause": healed.cause if healed is not None else (record and record.cause),
                    "resubscriptions": healed.resubscriptions if healed is not None else 0,
                    "subscription": None if record is None else asdict(record),
                    "last_report_age_s": age,
                    # reporting: a report within two of its periods
                    "reporting": age is not None and age <= 2 * node.report_period_ms / 1000,
                }
            )
        return found

    # ------------------------------------------------------------------ agents
    def agents(self, check: bool = False) -> list[dict[str, Any]]:
        """Each agent's role, lever and the last push to it; with ``check``, asked live too."""
        settings = self._control.settings  # the agents in force (token files read once)
        found: list[dict[str, Any]] = [
            {"role": "cpe", "cpe_id": cpe_id, "url": endpoint.base_url, "endpoint": endpoint}
            for cpe_id, endpoint in settings.cpe_agents.items()
        ]
        if settings.proxy_agent is not None:
            found.append(
                {
                    "role": "proxy",
                    "cpe_id": None,
                    "url": settings.proxy_agent.base_url,
                    "endpoint": settings.proxy_agent,
                }
            )
        via_cpe = settings.downlink_via_cpe
        # The latest push per CPE agent and the proxy's, in one pass (a fleet has thousands).
        latest_by: dict[str | None, dict[str, object]] = {}
        for (cpe_id, direction), push in list(self._control.last_push.items()):
            whose = None if direction == Direction.DOWNLINK and not via_cpe else cpe_id
            known = latest_by.get(whose)
            if known is None or cast(float, push["time_s"]) > cast(float, known["time_s"]):
                latest_by[whose] = push
        for agent in found:
            endpoint = agent.pop("endpoint")
            agent["lever"] = self._control.levers.get(str(agent["url"]))
            # failures in a row, the last error, and how long it is left alone for
            agent["calls"] = self._control.book.describe(str(agent["url"]))
            latest = latest_by.get(agent["cpe_id"] if agent["role"] == "cpe" else None)
            agent["last_push"] = (
                None if latest is None else {k: latest[k] for k in ("time_s", "result", "reason")}
            )
            if check:
                agent["health"] = _agent_health(endpoint)
        return found

    # ------------------------------------------------------------------ the fleet
    def fleet(self) -> list[dict[str, Any]]:
        """One row per CPE: steered or not, and why; read from memory only (no SDL, no agent)."""
        control = self._control
        now = time.time()
        node_states = {n["node"]: n["state"] for n in self.nodes()}
        node_period_s = {n.name: n.report_period_ms / 1000 for n in self._deployment().e2.nodes}
        overrides: dict[str, list[str]] = {}
        for override in self._operator.overrides():
            overrides.setdefault(override.cpe_id, []).append(override.kind)
        heard = control.estimator.last_report_s
        book, sink = control.book, control.sink

        def direction_state(cpe_id: str, direction: Direction) -> DirectionState:
            key = (cpe_id, direction)
            weights = control.state.weights_known(cpe_id, direction)
            push = control.last_push.get(key)
            try:
                agent = book.describe(sink.book_key(cpe_id, direction))
            except WeightPushError as error:  # no agent configured for it
                agent = {"state": "missing", "last_error": str(error)}
            return DirectionState(
                weights=None if weights is None else weights.weights,
                weights_since_s=control.applied_at_s.get(key),
                last_push_result=None if push is None else cast(str, push["result"]),
                last_push_s=None if push is None else cast(float, push["time_s"]),
                last_push_reason=None if push is None else cast(str, push["reason"]),
                agent_state=cast(str, agent["state"]),
                agent_error=cast("str | None", agent["last_error"]),
            )

        return fleet_rows(
            FleetInputs(
                now_s=now,
                cpes=list(control.cpes),
                directions=control.settings.directions,
                node_states=node_states,
                node_period_s=node_period_s,
                report_time=lambda cpe_id, access: heard.get((cpe_id, access)),
                direction_state=direction_state,
                overrides=overrides,
            )
        )

    def weights_at_agent(self, cpe_id: str, direction: Direction) -> dict[str, Any]:
        """What the agent itself holds for the CPE, asked now."""
        try:
            held = self._control.sink.in_force(cpe_id, direction)
        except WeightPushError as error:
            return {"error": str(error)}
        if held is None:
            return {"weights": None}
        return {"weights": dict(held.weights), "sequence": held.sequence}

    # ------------------------------------------------------------------ for /metrics
    def overrides_by_kind(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for override in self._operator.overrides():
            counts[override.kind] = counts.get(override.kind, 0) + 1
        return counts

    def probe_mbit(self) -> float:
        return float(self._control.estimator.probe.stats.probe_mbit)

    def model_inference(self) -> tuple[int, float]:
        model = self._control.estimator.model
        return model.inferences, model.inference_s

    def exploration(self) -> tuple[int, int]:
        if self._control.exploration is None:
            return 0, 0
        stats = self._control.exploration.stats
        return stats.raises, stats.overshoots

    def agent_counts(self) -> dict[str, int]:
        """Agents whose last call succeeded and those failing (left alone for a while)."""
        return {str(state): count for state, count in self._control.book.counts().items()}

    def node_health(self) -> list[tuple[str, str, float | None]]:
        """(node, state, seconds since its last report) per configured node."""
        return [(n["node"], n["state"], n["last_report_age_s"]) for n in self.nodes()]


def _plain_state(record: SubscriptionRecord | None) -> str:
    """A node's state where nothing heals it (standalone: the node itself reconnects)."""
    if record is None or record.status == "pending":
        return "subscribing"
    return "active" if record.status == "active" else "failed"


def _agent_health(endpoint: AgentEndpoint) -> dict[str, Any]:
    try:
        response = request_within(endpoint, "GET", "/v1/health", 2.0)
    except httpx.HTTPError as error:
        return {"reachable": False, "error": str(error)}
    return {"reachable": True, "status": response.status_code}
