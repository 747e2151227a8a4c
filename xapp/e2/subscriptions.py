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

from core.domain import SubscriptionRecord
from kpm import builders
from kpm.codec import KpmPdu, codec_for
from kpm.versions import DEFAULT_VERSION, KpmVersion
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
        try:
            body = response.json()
        except ValueError:
            raise SubmgrError(
                f"submgr answered {response.status_code} with a body that is not JSON: "
                f"{response.text[:200]!r}"
            ) from None
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
    """Subscribes every configured node and keeps the records in the store.

    One record per node, identified by its XappEventInstanceId: a subscribe loop that finds its
    record replaced (reconnect, shutdown) stops and deletes whatever it obtained, so no
    subscription is left behind.
    """

    MAX_EARLY_NOTIFICATIONS = 256

    def __init__(
        self,
        settings: E2Settings,
        client: SubmgrClient,
        store: SubscriptionStore,
        backoff: Backoff = Backoff(),
        sleep: Callable[[float], None] | None = None,
        versions: Mapping[str, KpmVersion] | None = None,
    ) -> None:
        self._settings = settings
        self._client = client
        self._store = store
        self._backoff = backoff
        self._stopping = threading.Event()
        self._sleep = sleep or self._stopping.wait  # shutdown interrupts a backoff wait
        self._versions = dict(versions or {})
        self._rng = random.Random(0)
        self._lock = threading.RLock()
        self._records: dict[str, SubscriptionRecord] = {}
        self._early: dict[str, dict[str, Any]] = {}  # notifications ahead of their 201
        self._next_instance = 1
        self._trying: dict[str, int] = {}  # nodes with a subscribe loop at work, how many

    # After this many 503s in a row a node is reported failed (it is still retried): one node
    # whose E2 connection stays down is visible as such, and holds nothing else.
    FAILED_AFTER_UNAVAILABLE = 3

    def trying(self, node_name: str) -> bool:
        """Whether a subscribe loop for the node is still at work (retrying 503s)."""
        with self._lock:
            return self._trying.get(node_name, 0) > 0

    def records(self) -> dict[str, SubscriptionRecord]:
        with self._lock:
            return dict(self._records)

    def reconfigure(self, settings: E2Settings) -> list[str]:
        """A reloaded configuration: unsubscribe the nodes no longer in it; returns the nodes
        that are new, for the caller to subscribe."""
        with self._lock:
            old = {n.node for n in self._settings.nodes}
            self._settings = settings
        new = {n.node for n in settings.nodes}
        for name in old - new:
            self._forget(name)
        return sorted(new - old)

    def set_version(self, node: str, version: KpmVersion) -> None:
        self._versions[node] = version

    def recover(self) -> list[str]:
        """After a restart: delete what the previous life subscribed; returns the removed ids.

        A record whose deletion failed stays in the store for the next attempt.
        """
        removed = []
        for record in self._store.load_subscriptions():
            if record.subscription_id:
                try:
                    self._client.delete(record.subscription_id)
                except (SubmgrError, SubmgrUnavailableError) as error:
                    log.warning(
                        "could not delete stale subscription %s: %s", record.subscription_id, error
                    )
                    continue
                removed.append(record.subscription_id)
            self._store.delete_subscription(record.node)
        return removed

    def subscribe_all(
        self, on_done: Callable[[SubscriptionRecord], None] | None = None
    ) -> dict[str, SubscriptionRecord]:
        """Subscribe every node, each on its own: one whose E2 connection is down (503,
        retried until it comes up) or whose answer is broken keeps no other node waiting.
        ``on_done`` hears each node's outcome as it comes; returns when all are settled."""

        def one(node_name: str) -> None:
            try:
                record = self.subscribe(node_name)
            except Exception:  # one node's surprise must not end the others' subscriptions
                log.exception("subscribing %s failed", node_name)
                return
            if on_done is not None:
                on_done(record)

        threads = [
            threading.Thread(target=one, args=(node.node,), name=f"subscribe-{node.node}")
            for node in self._settings.nodes
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return self.records()

    def subscribe(self, node_name: str) -> SubscriptionRecord:
        """Subscribe one node, retrying 503s with backoff; returns the record as it stands."""
        node = self._settings.node(node_name)
        if node is None:
            raise KeyError(f"E2 node {node_name!r} is not configured")
        with self._lock:
            self._trying[node_name] = self._trying.get(node_name, 0) + 1
        try:
            return self._subscribe(node)
        finally:
            with self._lock:
                self._trying[node_name] -= 1
                if not self._trying[node_name]:
                    del self._trying[node_name]

    def _subscribe(self, node: E2NodeConfig) -> SubscriptionRecord:
        node_name = node.node
        instance = self._allocate_instance()
        plan = plan_subscription(node, self._settings, instance, self._versions.get(node_name))
        record = SubscriptionRecord(node=node_name, xapp_event_instance_id=instance)
        self._put(record)
        attempt = 0
        while self._current(node_name, instance):
            try:
                subscription_id = self._client.subscribe(plan.params)
            except SubmgrUnavailableError as error:
                attempt += 1
                limit = self._backoff.max_attempts
                if limit is not None and attempt >= limit:
                    return self._update(node_name, instance, status="failed", cause=str(error))
                delay = self._backoff.delay_s(attempt - 1, self._rng)
                if attempt == self.FAILED_AFTER_UNAVAILABLE:
                    self._update(node_name, instance, status="failed", cause=str(error))
                    log.warning("%s (%d attempts); still retrying", error, attempt)
                else:
                    log.info("%s; retrying in %.1f s", error, delay)
                self._sleep(delay)
                continue
            except SubmgrError as error:
                return self._update(node_name, instance, status="failed", cause=str(error))
            with self._lock:
                if not self._current(node_name, instance):
                    stale = True
                else:
                    stale = False
                    early = self._early.pop(subscription_id, None)
                    record = self._update(
                        node_name,
                        instance,
                        subscription_id=subscription_id,
                        status="pending",
                        cause="",
                    )
            if stale:  # reconnect or shutdown happened while the POST was in flight
                self._delete_quietly(subscription_id)
                break
            if early is not None:
                return self.handle_notification(early) or record
            return record
        with self._lock:
            return self._records.get(node_name, record)

    def handle_notification(self, body: Mapping[str, Any]) -> SubscriptionRecord | None:
        """The submgr's asynchronous outcome; may come before or after the 201."""
        subscription_id = body.get("SubscriptionId")
        instances = body.get("SubscriptionInstances")
        if not isinstance(subscription_id, str | int) or not str(subscription_id):
            raise ValueError("notification needs a SubscriptionId")
        if not isinstance(instances, list) or not all(isinstance(i, dict) for i in instances):
            raise ValueError("SubscriptionInstances must be a list of objects")
        subscription_id = str(subscription_id)
        errors = [
            f"{i.get('ErrorSource') or 'E2'}: {i.get('ErrorCause')}"
            for i in instances
            if i.get("ErrorCause")
        ]
        with self._lock:
            target = next(
                (r for r in self._records.values() if r.subscription_id == subscription_id), None
            )
            if target is None:
                # Its 201 has not come back yet (or it is not ours): keep it for a while.
                if len(self._early) >= self.MAX_EARLY_NOTIFICATIONS:
                    self._early.pop(next(iter(self._early)))
                self._early[subscription_id] = dict(body)
                return None
            updated = self._update(
                target.node,
                target.xapp_event_instance_id,
                status="failed" if errors else "active",
                cause="; ".join(errors),
            )
        if errors:
            log.warning("subscription for %s failed: %s", updated.node, updated.cause)
        return updated

    def node_reconnected(self, node_name: str) -> SubscriptionRecord:
        """An E2 node came back: its old subscription is gone with the association."""
        self._forget(node_name)
        return self.subscribe(node_name)

    def shutdown(self, deadline_s: float = 2.0) -> None:
        """Delete every subscription, all at once, waiting at most ``deadline_s``: a submgr
        that does not answer must not hold the xApp's stop."""
        self._stopping.set()
        threads = [
            threading.Thread(target=self._forget, args=(name,), name=f"unsubscribe-{name}")
            for name in self.records()
        ]
        for thread in threads:
            thread.daemon = True
            thread.start()
        ends_at = time.monotonic() + deadline_s
        for thread in threads:
            thread.join(timeout=max(0.0, ends_at - time.monotonic()))

    def _forget(self, node_name: str) -> None:
        with self._lock:
            record = self._records.pop(node_name, None)
            self._store.delete_subscription(node_name)
        if record is not None and record.subscription_id:
            self._delete_quietly(record.subscription_id)

    def _delete_quietly(self, subscription_id: str) -> None:
        try:
            self._client.delete(subscription_id)
        except (SubmgrError, SubmgrUnavailableError) as error:
            log.warning("could not delete subscription %s: %s", subscription_id, error)

    def _current(self, node_name: str, instance: int) -> bool:
        with self._lock:
            record = self._records.get(node_name)
            return (
                not self._stopping.is_set()
                and record is not None
                and record.xapp_event_instance_id == instance
            )

    def _put(self, record: SubscriptionRecord) -> None:
        with self._lock:  # memory and store change together
            self._records[record.node] = record
            self._store.save_subscription(record)

    def _update(self, node_name: str, instance: int, **changes: Any) -> SubscriptionRecord:
        with self._lock:
            record = self._records.get(node_name)
            if record is None or record.xapp_event_instance_id != instance:
                return replace(
                    record or SubscriptionRecord(node_name, instance), **changes
                )  # superseded: report, do not store
            updated = replace(record, **changes)
            self._put(updated)
            return updated

    def _allocate_instance(self) -> int:
        with self._lock:
            instance = self._next_instance
            self._next_instance = self._next_instance % 65535 + 1
        return instance
