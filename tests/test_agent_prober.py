"""The AgentProber against `atsss agent run` over real HTTP: the Prober port's contract.

A successful probe needs an iperf3 server behind a shaped path; that case runs in the netns
testbed (test_testbed.py). Here: the failures, which must never be taken for an outage.
"""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path

import pytest

from core.domain import Direction, ProbeOutcome, ProbeRequest
from tests.servers import answer_json
from tests.test_agent_api import TOKEN, agent, write_config
from xapp.adapters.agent_http import AgentEndpoint
from xapp.adapters.agent_prober import AgentProber


def wait(prober: AgentProber, count: int) -> list[ProbeOutcome]:
    found: list[ProbeOutcome] = []
    deadline = time.monotonic() + 30
    while len(found) < count and time.monotonic() < deadline:
        found += prober.collect(0.0)
        time.sleep(0.05)
    return found


def request(access: str, cpe_id: str = "cpe-1") -> ProbeRequest:
    return ProbeRequest(cpe_id, access, Direction.DOWNLINK, 1.0, 2, "test")


def test_failed_probes_are_failures_not_outages(tmp_path: Path) -> None:
    config, port = write_config(tmp_path)
    url = f"http://127.0.0.1:{port}"
    with agent(config, port):
        prober = AgentProber(
            {
                "cpe-1": AgentEndpoint(url, TOKEN),
                "cpe-2": AgentEndpoint(url, "wrong-token"),
                "cpe-3": AgentEndpoint("http://127.0.0.1:1", TOKEN),
                # the same agent as another CPE's: cpe-1's 409 (kept as that CPE's answer for
                # a while) must not answer for it when its own probe starts late
                "cpe-4": AgentEndpoint(url, TOKEN),
            }
        )
        try:
            started = time.monotonic()
            prober.start(request("wifi"), 5.0)  # the agent has no probe_server: 409
            prober.start(request("satellite", "cpe-4"), 5.0)  # not an access of its: 404
            prober.start(request("wifi", "cpe-2"), 5.0)  # 401
            prober.start(request("wifi", "cpe-3"), 5.0)  # nobody listening
            prober.start(request("wifi", "cpe-9"), 5.0)  # no agent configured
            assert time.monotonic() - started < 1.0  # start() does not wait for the probe
            outcomes = wait(prober, 5)
        finally:
            prober.close()
    assert len(outcomes) == 5
    by_key = {(o.request.cpe_id, o.request.access): o for o in outcomes}
    for outcome in outcomes:
        assert outcome.capacity_mbps is None
        assert not outcome.path_down
        assert outcome.finished_at_s >= outcome.started_at_s == 5.0
    assert "no probe_server" in by_key[("cpe-1", "wifi")].error
    assert "404" in by_key[("cpe-4", "satellite")].error
    assert "401" in by_key[("cpe-2", "wifi")].error
    assert "cpe-3" in by_key[("cpe-3", "wifi")].error
    assert "no agent configured" in by_key[("cpe-9", "wifi")].error


class _LyingAgent(http.server.BaseHTTPRequestHandler):
    """Answers every probe with the body its server was given (real HTTP, a real socket)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        answer_json(self, 200, self.server.answer)  # type: ignore[attr-defined]

    def log_message(self, *args: object) -> None:
        pass


def _probe_answered(answer: bytes) -> ProbeOutcome:
    """One probe of an agent whose server answers ``answer`` (real HTTP, a real socket)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _LyingAgent)
    server.answer = answer  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    prober = AgentProber({"cpe-1": AgentEndpoint(f"http://127.0.0.1:{server.server_port}", TOKEN)})
    try:
        prober.start(request("wifi"), 5.0)
        (outcome,) = wait(prober, 1)
    finally:
        prober.close()
        server.shutdown()
        server.server_close()
    return outcome


@pytest.mark.parametrize(
    "answer",
    [
        b'{"probe": {"mbps": Infinity, "bytes": 1000}}',
        b'{"probe": {"mbps": NaN, "bytes": 1000}}',
        b'{"probe": {"mbps": -5.0, "bytes": 1000}}',
        b'{"probe": {"mbps": 1e12, "bytes": 1000}}',
        b'{"probe": {"path_mbps": 1e300, "mbps": 10.0, "bytes": 1000}}',
        b'{"probe": {"mbps": 10.0, "bytes": -1}}',
        b'{"probe": {"mbps": 10.0, "bytes": 1e400}}',
    ],
)
def test_a_probe_result_no_access_carries_is_a_failure_not_a_capacity(answer: bytes) -> None:
    """Python's JSON reads Infinity and NaN: an agent that answers them (or rates beyond any
    access) fails its probe with the reason; it must never reach the estimators as a capacity,
    where one CPE's infinity once stopped the fleet's step."""
    outcome = _probe_answered(answer)
    assert outcome.capacity_mbps is None
    assert not outcome.path_down
    assert "not a capacity" in outcome.error, outcome.error


def test_a_sound_probe_result_is_taken() -> None:
    """The same server answering a rate within reason: the check above refuses only garbage."""
    outcome = _probe_answered(b'{"probe": {"path_mbps": 412.5, "mbps": 300.0, "bytes": 37500000}}')
    assert outcome.capacity_mbps == 412.5
    assert outcome.probe_mbit == 300.0
    assert not outcome.error
