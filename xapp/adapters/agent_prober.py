"""The Prober port over the agents' REST API (`POST /v1/probes`).

Probes run on a thread pool so that ``start`` returns at once; each CPE has its agent (base URL
and bearer token). The agent runs iperf3 from the access's address toward the proxy: downlink
probes ask the server to send (``reverse``). An agent answering 502 could not get a probe
through that path (the path is down); any other failure (unreachable agent, 4xx, timeout) is a
failed probe that says nothing about the path.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import httpx

from core.domain import MAX_CAPACITY_MBPS, Direction, ProbeOutcome, ProbeRequest
from xapp.adapters.agent_http import AgentEndpoint, request_within, response_detail


class AgentProber:
    # An agent that said it cannot probe is not asked again for this long (it may be
    # reconfigured meanwhile).
    CANNOT_PROBE_FOR_S = 300.0

    def __init__(
        self,
        agents: Mapping[str, AgentEndpoint],
        timeout_margin_s: float = 15.0,
        workers: int = 8,
    ) -> None:
        self._agents = dict(agents)
        self._margin_s = timeout_margin_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="probe")
        self._lock = threading.Lock()
        self._futures: list[Future[ProbeOutcome]] = []
        # CPEs whose agent said it cannot probe (409: no probe_server), until when to believe it
        self._cannot_probe: dict[str, tuple[float, str]] = {}

    def set_agents(self, agents: Mapping[str, AgentEndpoint]) -> None:
        """A reloaded configuration's CPE agents."""
        self._agents = dict(agents)

    def start(self, request: ProbeRequest, now_s: float) -> None:
        future = self._pool.submit(self._probe, request, now_s, time.monotonic())
        with self._lock:
            self._futures.append(future)

    def collect(self, now_s: float) -> Sequence[ProbeOutcome]:
        with self._lock:
            done = [f for f in self._futures if f.done()]
            self._futures = [f for f in self._futures if not f.done()]
        return [f.result() for f in done]

    def close(self) -> None:
        """Start no more probes; one under way against a slow agent is not waited for (it
        ends at its own deadline, in a daemon thread)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _probe(self, request: ProbeRequest, now_s: float, started: float) -> ProbeOutcome:
        def outcome(
            capacity: float | None, mbit: float = 0.0, down: bool = False, error: str = ""
        ) -> ProbeOutcome:
            return ProbeOutcome(
                request, now_s, now_s + (time.monotonic() - started), capacity, mbit, down, error
            )

        agent = self._agents.get(request.cpe_id)
        if agent is None:
            return outcome(None, error=f"no agent configured for {request.cpe_id}")
        refused = self._cannot_probe.get(request.cpe_id)
        if refused is not None and time.monotonic() < refused[0]:
            return outcome(None, error=refused[1])  # not asked again: it said why before
        body = {
            "access": request.access,
            "seconds": request.duration_s,
            "parallel": request.parallel_flows,
            "reverse": request.direction == Direction.DOWNLINK,
        }
        try:
            response = request_within(
                agent, "POST", "/v1/probes", request.duration_s + self._margin_s, json=body
            )
        except httpx.HTTPError as error:
            return outcome(None, error=f"agent of {request.cpe_id}: {error}")
        if response.status_code == 502:
            return outcome(None, down=True, error=response_detail(response))
        if response.status_code != 200:
            refusal = f"agent answered {response.status_code}: {response_detail(response)}"
            if response.status_code == 409:  # it cannot probe at all (no probe_server)
                self._cannot_probe[request.cpe_id] = (
                    time.monotonic() + self.CANNOT_PROBE_FOR_S,
                    refusal,
                )
            return outcome(None, error=refusal)
        try:
            probe = response.json()["probe"]
            # The interface's count (probe plus data beside it) when the agent has it; the
            # probe's own rate is only its share of the path while data flows.
            mbps = float(probe.get("path_mbps") or probe["mbps"])
            mbit = float(probe["bytes"]) * 8 / 1e6
        except (ValueError, KeyError, TypeError) as error:
            return outcome(None, error=f"agent's answer is not a probe result: {error}")
        # Python's JSON reads Infinity and NaN too: a rate no access carries is a wrong answer
        # (a failed probe), never a capacity, and a byte count below zero is none.
        if not 0.0 <= mbps <= MAX_CAPACITY_MBPS or not 0.0 <= mbit < math.inf:
            return outcome(
                None,
                error=f"agent's probe result is not a capacity: {mbps} Mbit/s after {mbit} Mbit "
                f"(0 to {MAX_CAPACITY_MBPS:g} Mbit/s)",
            )
        return outcome(mbps, mbit)
