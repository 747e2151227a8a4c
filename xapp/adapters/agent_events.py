"""The CPE agents' own actions (a carrier lost or back), heard as they happen.

One task per agent, on the agents' event loop (``agent_http.AgentIO``: a fleet's thousand long
polls cost no thread each), holds a long poll open on its ``GET /v1/events`` and hands every
new action to ``on_event`` (called on that loop: it must not block). The first answer only
says where the agent's numbering stands (what happened before the xApp listened is not news);
an agent that restarted (its ``instance`` changed) numbers from 1 again, so its actions are
taken from the start. An agent that does not answer is asked again after a pause that doubles
while it keeps failing: the periodic reports still carry the loop meanwhile.

An agent cannot flood the xApp: each answer is capped in bytes (``MAX_EVENTS_BYTES``), an agent
is asked at most ``MAX_POLLS_PER_S`` times a second, and of the events in one answer only the
latest per access is handed on (how many were folded into it is logged once per answer).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass

import httpx

from xapp.adapters.agent_http import AgentEndpoint, agent_io, exchange

log = logging.getLogger(__name__)

POLL_WAIT_S = 20.0  # how long the agent holds each request open
RETRY_AFTER_S = 1.0  # after an agent failed to answer, doubling while it fails
MAX_RETRY_AFTER_S = 30.0
MAX_EVENTS_BYTES = 64 * 1024  # one answer: some hundreds of events, far more than an honest one
MAX_POLLS_PER_S = 5.0  # an agent answering at once every time is not asked faster than this
STARTS_PER_S = 200.0  # watchers starting a second, on average


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
    def __init__(
        self,
        agents: Mapping[str, AgentEndpoint],
        on_event: OnEvent,
        on_restart: Callable[[str], None] = lambda url: None,
    ) -> None:
        """``agents``: by base URL, those whose carrier events matter (the CPEs' agents).
        ``on_restart``: told the URL of an agent whose run changed (it restarted)."""
        self._on_event = on_event
        self._on_restart = on_restart
        self._stopped = False
        self._tasks: dict[str, Future[None]] = {}
        self._agents: dict[str, AgentEndpoint] = {}
        self.set_agents(agents)

    def set_agents(self, agents: Mapping[str, AgentEndpoint]) -> None:
        """Watch these from now on; a task whose agent left ends at its next answer."""
        self._agents = dict(agents)
        for url, agent in self._agents.items():
            running = self._tasks.get(url)
            if running is None or running.done():
                self._tasks[url] = agent_io().submit(self._watch(agent))

    def stop(self) -> None:
        self._stopped = True
        for task in self._tasks.values():
            task.cancel()

    async def _watch(self, agent: AgentEndpoint) -> None:
        # A fleet's watchers start spread over a few seconds, not all at one instant.
        await asyncio.sleep(random.uniform(0.0, len(self._agents) / STARTS_PER_S))
        instance: str | None = None
        after = 0
        failures = 0
        while not self._stopped and self._agents.get(agent.base_url) == agent:
            wait_s = 0.0 if instance is None else POLL_WAIT_S
            asked_at = time.monotonic()
            try:
                response = await exchange(
                    agent,
                    "GET",
                    "/v1/events",
                    wait_s + 5.0,
                    MAX_EVENTS_BYTES,
                    params={"after": after, "wait_s": wait_s},
                )
                if response.status_code != 200:
                    raise ValueError(f"answered {response.status_code}")
                answer = response.json()
                latest, events = int(answer["latest"]), list(answer["events"])
                seen = str(answer["instance"])
            except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as error:
                failures += 1
                pause = min(MAX_RETRY_AFTER_S, RETRY_AFTER_S * 2 ** (failures - 1))
                log.debug(
                    "events from %s: %s; asking again in %.0f s", agent.base_url, error, pause
                )
                await asyncio.sleep(pause)
                continue
            failures = 0
            # Never faster than MAX_POLLS_PER_S, whatever the agent answers.
            await asyncio.sleep(max(0.0, 1 / MAX_POLLS_PER_S - (time.monotonic() - asked_at)))
            if instance is None:
                instance, after = seen, latest  # where its numbering stands: nothing is news
                continue
            if seen != instance:
                log.warning(
                    "agent at %s restarted; taking its actions from the start", agent.base_url
                )
                instance, after = seen, 0
                self._on_restart(agent.base_url)
                continue
            newest: dict[str, AccessEvent] = {}  # per access, the latest of this answer
            malformed = 0
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
                except (KeyError, TypeError, ValueError, AttributeError):
                    malformed += 1
                    continue
                if event.sequence > after:
                    kept = newest.get(event.access)
                    if kept is None or event.sequence > kept.sequence:
                        newest[event.access] = event
            if malformed:
                log.warning("%d malformed events from %s: skipped", malformed, agent.base_url)
            if len(events) - malformed > len(newest) > 0:
                log.info(
                    "%d events from %s folded into the latest per access",
                    len(events) - malformed,
                    agent.base_url,
                )
            for event in sorted(newest.values(), key=lambda e: e.sequence):
                self._on_event(event)
            after = max(after, latest)
