"""The CPE agents' own actions (a carrier lost or back), heard as they happen.

One thread per agent holds a long poll open on its ``GET /v1/events`` and hands every new
action to ``on_event``. The first answer only says where the agent's numbering stands (what
happened before the xApp listened is not news); an agent that restarted (its ``instance``
changed) numbers from 1 again, so its actions are taken from the start. An agent that does not
answer is asked again after a pause: the periodic reports still carry the loop meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from xapp.adapters.agent_http import AgentEndpoint, request_within

log = logging.getLogger(__name__)

POLL_WAIT_S = 20.0  # how long the agent holds each request open
RETRY_AFTER_S = 1.0  # after an agent failed to answer


@dataclass(frozen=True)
class AccessEvent:
    agent_url: str
    access: str
    carrier_up: bool
    sequence: int
    at_s: float  # the agent's clock
    result: str


OnEvent = Callable[[AccessEvent], None]


class AgentEventWatcher:
    def __init__(self, agents: Mapping[str, AgentEndpoint], on_event: OnEvent) -> None:
        """``agents``: by base URL, those whose carrier events matter (the CPEs' agents)."""
        self._on_event = on_event
        self._stop = threading.Event()
        self._threads: dict[str, threading.Thread] = {}
        self._agents: dict[str, AgentEndpoint] = {}
        self.set_agents(agents)

    def set_agents(self, agents: Mapping[str, AgentEndpoint]) -> None:
        """Watch these from now on; a thread whose agent left ends at its next answer."""
        self._agents = dict(agents)
        for url, agent in self._agents.items():
            running = self._threads.get(url)
            if running is None or not running.is_alive():
                thread = threading.Thread(
                    target=self._watch, args=(agent,), name=f"agent-events {url}", daemon=True
                )
                self._threads[url] = thread
                thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self, agent: AgentEndpoint) -> None:
        instance: str | None = None
        after = 0
        while not self._stop.is_set() and self._agents.get(agent.base_url) == agent:
            wait_s = 0.0 if instance is None else POLL_WAIT_S
            try:
                response = request_within(
                    agent,
                    "GET",
                    "/v1/events",
                    wait_s + 5.0,
                    params={"after": after, "wait_s": wait_s},
                )
                response.raise_for_status()
                answer = response.json()
                latest, events = int(answer["latest"]), list(answer["events"])
                seen = str(answer["instance"])
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
                log.debug("events from %s: %s; asking again", agent.base_url, error)
                self._stop.wait(RETRY_AFTER_S)
                continue
            if instance is None:
                instance, after = seen, latest  # where its numbering stands: nothing is news
                continue
            if seen != instance:
                log.warning(
                    "agent at %s restarted; taking its actions from the start", agent.base_url
                )
                instance, after = seen, 0
                continue
            for item in events:
                try:
                    event = AccessEvent(
                        agent_url=agent.base_url,
                        access=str(item["access"]),
                        carrier_up=bool(item["carrier_up"]),
                        sequence=int(item["sequence"]),
                        at_s=float(item["at_s"]),
                        result=str(item["result"]),
                    )
                except (KeyError, TypeError, ValueError) as error:
                    log.warning(
                        "an event from %s is malformed (%s): skipped", agent.base_url, error
                    )
                    continue
                if event.sequence > after:
                    self._on_event(event)
            after = max(after, latest)
