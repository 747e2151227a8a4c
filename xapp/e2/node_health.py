"""Subscriptions that heal: each E2 node's state, from its subscription and its indications.

The platform can forget a subscription without telling the xApp (E2 termination or submgr
restarted without their state, an E2 node that reconnected): indications just stop. So every
node is watched:

- ``subscribing``: its first subscription is under way;
- ``active``: subscribed, and indications come (or it was subscribed less than the quiet
  bound ago);
- ``quiet``: subscribed, but nothing came for ``quiet_periods`` of its reporting periods;
- ``resubscribing``: its subscription is being deleted and made again;
- ``failed``: the submgr or the node refused it, or the node stayed unreachable (503) for
  several attempts; retried with backoff all the same.

A quiet or failed node is subscribed again (delete, then subscribe), with a backoff that grows
while it stays quiet, up to ``max_backoff_s``. Where the platform says a node connected again
(the E2 manager's RAN_CONNECTION_STATUS_CHANGE, or RIC_SUB_DEL_REQUIRED), the node is subscribed
again at once. One node's state never holds the others, nor the xApp's readiness.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from xapp.e2.config import E2NodeConfig, E2Settings
from xapp.e2.subscriptions import SubscriptionManager

log = logging.getLogger(__name__)

NodeState = Literal["subscribing", "active", "quiet", "resubscribing", "failed"]
NODE_STATES: tuple[NodeState, ...] = ("subscribing", "active", "quiet", "resubscribing", "failed")


@dataclass(frozen=True)
class NodeHealth:
    node: str
    state: NodeState
    last_report_age_s: float | None
    cause: str
    resubscriptions: int


@dataclass
class _Watch:
    """What the healer remembers of one node."""

    active_since: float | None = None  # when its current subscription was first seen active
    subscription_id: str | None = None
    healing: bool = False  # a resubscription is under way
    attempts: int = 0  # resubscriptions since its last indication
    next_try: float = 0.0
    resubscriptions: int = 0
    cause: str = ""


class SubscriptionHealer:
    def __init__(
        self,
        manager: SubscriptionManager,
        settings: Callable[[], E2Settings],
        last_indication: Callable[[str], float | None],
        quiet_periods: int = 3,
        max_backoff_s: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._manager = manager
        self._settings = settings
        self._last_indication = last_indication
        self._quiet_periods = quiet_periods
        self._max_backoff_s = max_backoff_s
        self._clock = clock
        self._lock = threading.Lock()
        self._watches: dict[str, _Watch] = {}
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ reading
    def health(self) -> list[NodeHealth]:
        now = self._clock()
        records = self._manager.records()
        found = []
        for node in self._settings().nodes:
            record = records.get(node.node)
            last = self._last_indication(node.node)
            age = None if last is None else max(0.0, now - last)
            with self._lock:
                watch = self._watches.get(node.node, _Watch())
                state = self._state(node.node, now)
                cause = watch.cause or (record.cause if record is not None else "")
                found.append(NodeHealth(node.node, state, age, cause, watch.resubscriptions))
        return found

    def _state(self, node: str, now: float) -> NodeState:
        watch = self._watches.get(node, _Watch())
        if watch.healing:
            return "resubscribing"
        record = self._manager.records().get(node)
        if record is None or record.status == "pending":
            return "subscribing"
        if record.status == "failed":
            return "failed"
        if record.status != "active":
            return "subscribing"
        if self._quiet_for(node, watch, now) is not None:
            return "quiet"
        return "active"

    def _quiet_for(self, node: str, watch: _Watch, now: float) -> float | None:
        """Seconds the node has been quiet beyond its bound, or None while it reports."""
        config = self._settings().node(node)
        if config is None or watch.active_since is None:
            return None
        bound = self._quiet_periods * config.report_period_ms / 1000
        last = self._last_indication(node)
        since = max(watch.active_since, last if last is not None else 0.0)
        quiet = now - since
        return quiet - bound if quiet > bound else None

    # ------------------------------------------------------------------ healing
    def check(self) -> list[str]:
        """One look at every node; starts a resubscription for each one that needs it and
        returns their names."""
        now = self._clock()
        records = self._manager.records()
        started = []
        for node in self._settings().nodes:
            name = node.node
            record = records.get(name)
            with self._lock:
                watch = self._watches.setdefault(name, _Watch())
                if watch.healing or record is None or self._manager.trying(name):
                    continue  # a subscribe loop of its own is still at work (503s retried)
                if record.status == "active" and record.subscription_id != watch.subscription_id:
                    watch.subscription_id = record.subscription_id
                    watch.active_since = now
                last = self._last_indication(name)
                if (
                    last is not None
                    and watch.active_since is not None
                    and last > watch.active_since
                ):
                    watch.attempts = 0  # it reports: any later silence starts the backoff anew
                    watch.cause = ""
                if record.status == "active" and self._quiet_for(name, watch, now) is not None:
                    reason = (
                        f"no indication for {self._quiet_periods} reporting periods "
                        f"({self._quiet_periods * node.report_period_ms / 1000:g} s)"
                    )
                elif record.status == "failed":
                    reason = f"subscription failed: {record.cause}"
                else:
                    continue
                if now < watch.next_try:
                    continue
                self._begin(name, watch, reason, now)
            started.append(name)
            self._spawn(name)
        return started

    def resubscribe_now(self, node: str, why: str) -> bool:
        """The platform says the node's subscription is gone (it connected again, or asked to
        delete it): subscribe it again at once. False when the node is not ours or a
        resubscription is already under way."""
        config = self._settings().node(node)
        if config is None:
            return False
        with self._lock:
            watch = self._watches.setdefault(node, _Watch())
            if watch.healing or self._manager.trying(node):
                return False  # a subscription is being made right now: it is the fresh one
            watch.attempts = 0
            self._begin(node, watch, why, self._clock())
        self._spawn(node)
        return True

    def _begin(self, node: str, watch: _Watch, why: str, now: float) -> None:
        watch.healing = True
        watch.cause = why
        watch.resubscriptions += 1
        config = self._settings().node(node)
        delay = self._backoff_s(config, watch.attempts)
        watch.attempts += 1
        watch.next_try = now + delay
        log.warning(
            "E2 node %s: %s; subscribing it again (attempt %d, next no sooner than %.1f s)",
            node,
            why,
            watch.attempts,
            delay,
        )

    def _backoff_s(self, config: E2NodeConfig | None, attempts: int) -> float:
        """How long after this resubscription the next one may start, if it does not help."""
        period_s = (config.report_period_ms if config is not None else 1000) / 1000
        first = self._quiet_periods * period_s
        return float(min(self._max_backoff_s, first * 2**attempts))

    def _spawn(self, node: str) -> None:
        threading.Thread(
            target=self._resubscribe, args=(node,), name=f"resubscribe-{node}", daemon=True
        ).start()

    def _resubscribe(self, node: str) -> None:
        try:
            record = self._manager.node_reconnected(node)
            log.info("E2 node %s subscribed again: %s %s", node, record.status, record.cause)
        except Exception as error:  # the healer must survive whatever one node does
            log.warning("E2 node %s: subscribing again failed: %s", node, error)
        finally:
            with self._lock:
                watch = self._watches.setdefault(node, _Watch())
                watch.healing = False
                watch.subscription_id = None  # the new one starts its own quiet clock
                watch.active_since = None

    def run(self, interval_s: float) -> None:
        """Check every ``interval_s`` until ``stop``."""
        while not self._stopping.wait(interval_s):
            try:
                self.check()
            except Exception as error:  # never let the watch thread end
                log.warning("subscription health check failed: %s", error)

    def stop(self) -> None:
        self._stopping.set()
