"""The xApp's life in an O-RAN SC near-RT RIC: RMR, registration with the appmgr, the E2
subscriptions through the submgr and their healing, readiness, and a stop that fits a pod's
grace period.

Ready means "can serve": the configuration is loaded (the service exists), SDL answers, RMR has
a route table and the appmgr took the registration. The subscriptions are not part of it: a
node whose subscription fails or goes quiet is reported (``/v1/nodes``, ``/metrics``, the log)
and healed, but never holds the pod out of service, which would stop the submgr's notification
from reaching it behind a Service that routes to ready pods only.

The stop deletes the subscriptions (all at once, bounded), closes RMR and deregisters exactly
once, with the name it registered under, within a few seconds.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from core.deployment import Deployment
from xapp.adapters.e2mgr_events import E2ManagerEvents
from xapp.e2.messages import E2MessageHandler, SubscriptionOutcome
from xapp.e2.node_health import SubscriptionHealer
from xapp.e2.subscriptions import SubscriptionManager

log = logging.getLogger(__name__)

Check = Callable[[], str | None]  # None when satisfied, else what it waits for, in one line


@dataclass(frozen=True)
class Readiness:
    ready: bool
    waiting_for: tuple[str, ...]


def evaluate(checks: Sequence[Check]) -> Readiness:
    waiting = tuple(reason for reason in (check() for check in checks) if reason is not None)
    return Readiness(not waiting, waiting)


class AppmgrRegistration:
    """Registration with the appmgr (its ``/register`` and ``/deregister``), as O-RAN SC xApps
    do: retried with a capped backoff until it is taken; deregistered once, at stop."""

    def __init__(self, appmgr_url: str, body: Callable[[], dict[str, str]]) -> None:
        self._url = appmgr_url.rstrip("/")
        self._body = body
        self._stopping = threading.Event()
        self._registered_as: dict[str, str] | None = None
        self._deregistered = False
        self._lock = threading.Lock()
        self.last_error = "not tried yet"

    @property
    def registered(self) -> bool:
        return self._registered_as is not None

    def run(self, first_wait_s: float = 1.0, cap_s: float = 30.0) -> None:
        attempt = 0
        while not self._stopping.is_set():
            body = self._body()
            try:
                response = httpx.post(self._url + "/register", json=body, timeout=5.0)
            except httpx.HTTPError as error:
                self.last_error = f"appmgr at {self._url} unreachable: {error}"
            else:
                if response.status_code in (200, 201, 204):
                    with self._lock:
                        if self._stopping.is_set():
                            return  # stopped while the request was under way: deregistered
                        self._registered_as = body
                    log.info("registered with the appmgr as %s", body["appInstanceName"])
                    return
                self.last_error = (
                    f"appmgr refused the registration: {response.status_code} {response.text[:200]}"
                )
            wait_s = min(cap_s, first_wait_s * 2**attempt)
            log.warning("%s; trying again in %.0f s", self.last_error, wait_s)
            attempt += 1
            self._stopping.wait(wait_s)

    def deregister(self, timeout_s: float = 1.5) -> None:
        """Once, whatever calls it, and only when registered."""
        with self._lock:
            self._stopping.set()
            body, self._deregistered = (
                (None, True) if self._deregistered else (self._registered_as, True)
            )
        if body is None:
            return
        try:
            httpx.post(
                self._url + "/deregister",
                json={"appName": body["appName"], "appInstanceName": body["appInstanceName"]},
                timeout=timeout_s,
            )
        except httpx.HTTPError as error:
            log.warning("appmgr deregistration: %s", error)
        else:
            log.info("deregistered from the appmgr")


def registration_body(deployment: Deployment, config_path: Path) -> dict[str, str]:
    """What the appmgr's /register takes, from the descriptor and the pod's environment."""
    descriptor = _descriptor_document(config_path)
    name = str(descriptor.get("name", "atsss-xapp"))
    e2 = deployment.e2
    return {
        "appName": os.environ.get("HOSTNAME", name),
        "appVersion": str(descriptor.get("version", "")),
        "configPath": "",
        "appInstanceName": name,
        "httpEndpoint": f"{e2.client_host}:{e2.http_port}",
        "rmrEndpoint": f"{os.environ.get('RMR_SRC_ID', e2.client_host)}:{e2.rmr_port}",
        "config": json.dumps(descriptor),
    }


class RicPlatform:
    """RMR, the appmgr, the submgr's subscriptions and the E2 manager's events, as one life."""

    def __init__(
        self,
        deployment: Callable[[], Deployment],
        config_path: Path,
        handler_for: Callable[[Callable[[SubscriptionOutcome], None]], E2MessageHandler],
        manager: SubscriptionManager,
        healer: SubscriptionHealer,
        uses_sdl: bool,
        spawn: Callable[[str, Callable[[], object]], None],
    ) -> None:
        from xapp.e2.rmr_adapter import RmrE2Adapter  # the one module that touches librmr

        self._deployment = deployment
        self.manager = manager
        self.healer = healer
        self._spawn = spawn
        e2 = deployment().e2
        self.rmr = RmrE2Adapter(handler_for(self._on_outcome), e2.rmr_port)
        self.registration = AppmgrRegistration(
            e2.appmgr_url, lambda: registration_body(self._deployment(), config_path)
        )
        self.events = E2ManagerEvents(self._on_node_event) if uses_sdl else None

    def start(self) -> None:
        """RMR listening, then registration, subscriptions and their watch, each in its own
        thread: none of them waits for another."""
        self.rmr.start()
        manager = self.manager

        def subscribe() -> None:
            removed = manager.recover()
            if removed:
                log.info("deleted %d subscriptions of a previous run", len(removed))
            manager.subscribe_all(
                on_done=lambda record: log.info(
                    "subscription for %s: %s %s", record.node, record.status, record.cause
                )
            )

        self._spawn("subscribe", subscribe)
        self._spawn("register", self.registration.run)
        period_s = min(n.report_period_ms for n in self._deployment().e2.nodes) / 1000
        self._spawn("subscription-health", lambda: self.healer.run(max(0.05, period_s / 2)))
        if self.events is not None:
            self.events.start()

    def checks(self) -> list[Check]:
        return [
            self.rmr.waiting_for,
            lambda: (
                None
                if self.registration.registered
                else f"not registered with the appmgr ({self.registration.last_error})"
            ),
        ]

    def stop(self) -> None:
        """Subscriptions deleted, RMR closed, deregistered once: bounded to a few seconds."""
        self.healer.stop()
        if self.events is not None:
            self.events.stop()
        self.manager.shutdown(deadline_s=2.0)
        self.rmr.stop()
        self.registration.deregister()

    def _on_outcome(self, outcome: SubscriptionOutcome) -> None:
        log.info("E2 node %s: %s", outcome.node, outcome.detail)
        if outcome.lost:
            self.healer.resubscribe_now(outcome.node, outcome.detail)

    def _on_node_event(self, node: str, status: str) -> None:
        if self._deployment_node(node) is None:
            return  # one of the RIC's other nodes: not ours to follow
        if status == "CONNECTED" and self.healer.resubscribe_now(
            node, "the E2 manager says it connected again"
        ):
            return
        log.info("E2 manager: node %s %s", node, status.lower().replace("_", " "))

    def _deployment_node(self, node: str) -> object | None:
        return next((n for n in self._deployment().e2.nodes if n.name == node), None)


def _descriptor_document(path: Path) -> dict[str, Any]:
    import yaml

    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return document if isinstance(document, dict) else {}
