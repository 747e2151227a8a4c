"""E2 subscriptions: build them from configuration, hold them through the RIC's submgr.

The submgr REST API (O-RAN SC ``xapp_rest_api.yaml``): POST {base}/subscriptions with a
``SubscriptionParams`` body answers 201 with a SubscriptionId; the E2 outcome arrives later as a
POST to our ``/ric/v1/subscriptions/response`` — sometimes before the 201 itself, so
notifications are matched by SubscriptionId whenever they come. DELETE
{base}/subscriptions/{id} removes one. 503 means the E2 node is not connected: we back off and
retry. The records live in a SubscriptionStore (SDL) so a restarted xApp first removes the
subscriptions of its previous life.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx

from kpm import builders
from kpm.codec import KpmPdu, codec_for
from kpm.versions import DEFAULT_VERSION, KpmVersion
from xapp.domain import SubscriptionRecord
from xapp.e2.config import E2NodeConfig, E2Settings
from xapp.ports import SubscriptionStore

log = logging.getLogger(__name__)

ACTION_ID = 1


@dataclass(frozen=True)
class SubscriptionPlan:
    """The bytes and JSON of one node's KPM subscription."""

    node: str
    version: KpmVersion
    event_trigger: bytes
    action_definition: bytes
    params: dict[str, Any]


def plan_subscription(
    node: E2NodeConfig,
    settings: E2Settings,
    xapp_event_instance_id: int,
    version: KpmVersion | None = None,
) -> SubscriptionPlan:
    chosen = version or node.kpm_version or DEFAULT_VERSION
    codec = codec_for(chosen)
    trigger = codec.encode(KpmPdu.TRIGGER, builders.trigger(node.report_period_ms))
    if node.report == "per-ue":
        action_value = builders.action_ue_condition(node.measurements, node.granularity)
    else:
        action_value = builders.action_cell(node.measurements, node.granularity)
    action = codec.encode(KpmPdu.ACTION, action_value)
    params = {
        "SubscriptionId": "",
        "ClientEndpoint": {
            "Host": settings.client_host,
            "HTTPPort": settings.http_port,
            "RMRPort": settings.rmr_port,
        },
        "Meid": node.node,
        "RANFunctionID": node.ran_function_id,
        "SubscriptionDetails": [
            {
                "XappEventInstanceId": xapp_event_instance_id,
                "EventTriggers": list(trigger),
                "ActionToBeSetupList": [
                    {
                        "ActionID": ACTION_ID,
                        "ActionType": "report",
                        "ActionDefinition": list(action),
                        "SubsequentAction": {
                            "SubsequentActionType": "continue",
                            "TimeToWait": "zero",
                        },
                    }
                ],
            }
        ],
    }
    return SubscriptionPlan(node.node, chosen, trigger, action, params)


class SubmgrUnavailableError(RuntimeError):
    """503 from the submgr: the E2 node is not connected (yet); worth retrying later."""


class SubmgrError(RuntimeError):
    """The submgr refused the request; retrying the same request will not help."""


class SubmgrClient:
    """HTTP client of the submgr REST API."""

    def __init__(self, base_url: str, timeout_s: float = 10.0) -> None:
        self._base = base_url.rstrip("/")
        self._http = httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def subscribe(self, params: Mapping[str, Any]) -> str:
        try:
            response = self._http.post(f"{self._base}/subscriptions", json=dict(params))
        except httpx.HTTPError as error:
            raise SubmgrUnavailableError(f"submgr at {self._base} unreachable: {error}") from error
        if response.status_code == 503:
            raise SubmgrUnavailableError(f"submgr: no E2 connection to {params.get('Meid')} (503)")
        if response.status_code not in (200, 201):
            raise SubmgrError(
                f"submgr refused the subscription: {response.status_code} {response.text}"
            )
        body = response.json()
        subscription_id = body.get("SubscriptionId") if isinstance(body, dict) else None
        if not subscription_id:
            raise SubmgrError(f"submgr answered without a SubscriptionId: {response.text}")
        return str(subscription_id)

    def delete(self, subscription_id: str) -> None:
        try:
            response = self._http.delete(f"{self._base}/subscriptions/{subscription_id}")
        except httpx.HTTPError as error:
            raise SubmgrUnavailableError(f"submgr at {self._base} unreachable: {error}") from error
        if response.status_code not in (200, 204, 404):
            raise SubmgrError(f"submgr could not delete {subscription_id}: {response.status_code}")


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter, capped."""

    first_s: float = 0.5
    cap_s: float = 30.0
    max_attempts: int | None = None  # None: until shutdown

    def delay_s(self, attempt: int, rng: random.Random) -> float:
        return rng.uniform(0.0, min(self.cap_s, self.first_s * 2**attempt))


class SubscriptionManager:
    """Subscribes every configured node and keeps the records in the store."""

    def __init__(
        self,
        settings: E2Settings,
        client: SubmgrClient,
        store: SubscriptionStore,
        backoff: Backoff = Backoff(),
        sleep: Callable[[float], None] = time.sleep,
        versions: Mapping[str, KpmVersion] | None = None,
    ) -> None:
        self._settings = settings
        self._client = client
        self._store = store
        self._backoff = backoff
        self._sleep = sleep
        self._versions = dict(versions or {})
        self._rng = random.Random(0)
        self._lock = threading.Lock()
        self._records: dict[str, SubscriptionRecord] = {}
        self._early: dict[str, dict[str, Any]] = {}  # notifications ahead of their 201
        self._stopping = threading.Event()
        self._next_instance = 1

    def records(self) -> dict[str, SubscriptionRecord]:
        with self._lock:
            return dict(self._records)

    def set_version(self, node: str, version: KpmVersion) -> None:
        self._versions[node] = version

    def recover(self) -> list[str]:
        """After a restart: delete what the previous life subscribed; returns the removed ids."""
        removed = []
        for record in self._store.load_subscriptions():
            if record.subscription_id:
                try:
                    self._client.delete(record.subscription_id)
                    removed.append(record.subscription_id)
                except (SubmgrError, SubmgrUnavailableError) as error:
                    log.warning(
                        "could not delete stale subscription %s: %s", record.subscription_id, error
                    )
            self._store.delete_subscription(record.node)
        return removed

    def subscribe_all(self) -> dict[str, SubscriptionRecord]:
        for node in self._settings.nodes:
            self.subscribe(node.node)
        return self.records()

    def subscribe(self, node_name: str) -> SubscriptionRecord:
        """Subscribe one node, retrying 503s with backoff; returns the record as it stands."""
        node = self._settings.node(node_name)
        if node is None:
            raise KeyError(f"E2 node {node_name!r} is not configured")
        instance = self._allocate_instance()
        plan = plan_subscription(node, self._settings, instance, self._versions.get(node_name))
        record = SubscriptionRecord(node=node_name, xapp_event_instance_id=instance)
        self._save(record)
        attempt = 0
        while not self._stopping.is_set():
            try:
                subscription_id = self._client.subscribe(plan.params)
            except SubmgrUnavailableError as error:
                if (
                    self._backoff.max_attempts is not None
                    and attempt + 1 >= self._backoff.max_attempts
                ):
                    record = replace(record, status="failed", cause=str(error))
                    self._save(record)
                    return record
                delay = self._backoff.delay_s(attempt, self._rng)
                log.info("%s; retrying in %.1f s", error, delay)
                attempt += 1
                self._sleep(delay)
                continue
            except SubmgrError as error:
                record = replace(record, status="failed", cause=str(error))
                self._save(record)
                return record
            with self._lock:
                early = self._early.pop(subscription_id, None)
                current = self._records.get(node_name, record)
                record = replace(current, subscription_id=subscription_id)
                self._records[node_name] = record
            self._store.save_subscription(record)
            if early is not None:
                return self.handle_notification(early) or record
            return record
        return record

    def handle_notification(self, body: Mapping[str, Any]) -> SubscriptionRecord | None:
        """The submgr's asynchronous outcome; may come before or after the 201."""
        subscription_id = str(body.get("SubscriptionId", ""))
        instances = body.get("SubscriptionInstances") or []
        if not subscription_id or not isinstance(instances, list):
            raise ValueError("notification needs SubscriptionId and SubscriptionInstances")
        with self._lock:
            target = next(
                (r for r in self._records.values() if r.subscription_id == subscription_id), None
            )
            if target is None:
                by_instance = {r.xapp_event_instance_id: r for r in self._records.values()}
                ids = [i.get("XappEventInstanceId") for i in instances if isinstance(i, dict)]
                target = next((by_instance[i] for i in ids if i in by_instance), None)
                if target is None or target.subscription_id is None:
                    self._early[subscription_id] = dict(body)
                    return None
            errors = [
                f"{i.get('ErrorSource') or 'E2'}: {i.get('ErrorCause')}"
                for i in instances
                if isinstance(i, dict) and i.get("ErrorCause")
            ]
            updated = replace(
                target,
                subscription_id=subscription_id,
                status="failed" if errors else "active",
                cause="; ".join(errors),
            )
            self._records[updated.node] = updated
        self._store.save_subscription(updated)
        if errors:
            log.warning("subscription for %s failed: %s", updated.node, updated.cause)
        return updated

    def node_reconnected(self, node_name: str) -> SubscriptionRecord:
        """An E2 node came back: its old subscription is gone with the association."""
        self._forget(node_name)
        return self.subscribe(node_name)

    def shutdown(self) -> None:
        self._stopping.set()
        for node_name in list(self.records()):
            self._forget(node_name)

    def _forget(self, node_name: str) -> None:
        with self._lock:
            record = self._records.pop(node_name, None)
        if record is not None and record.subscription_id:
            try:
                self._client.delete(record.subscription_id)
            except (SubmgrError, SubmgrUnavailableError) as error:
                log.warning("could not delete subscription %s: %s", record.subscription_id, error)
        self._store.delete_subscription(node_name)

    def _save(self, record: SubscriptionRecord) -> None:
        with self._lock:
            self._records[record.node] = record
        self._store.save_subscription(record)

    def _allocate_instance(self) -> int:
        with self._lock:
            instance = self._next_instance
            self._next_instance = self._next_instance % 65535 + 1
        return instance
