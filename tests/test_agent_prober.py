"""The AgentProber against `atsss agent run` over real HTTP: the Prober port's contract.

A successful probe needs an iperf3 server behind a shaped path; that case runs in the netns
testbed (test_testbed.py). Here: the failures, which must never be taken for an outage.
"""

from __future__ import annotations

import time
from pathlib import Path

from core.domain import Direction, ProbeOutcome, ProbeRequest
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
            }
        )
        try:
            started = time.monotonic()
            prober.start(request("wifi"), 5.0)  # the agent has no probe_server: 409
            prober.start(request("satellite"), 5.0)  # not an access of that CPE: 404
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
    assert "404" in by_key[("cpe-1", "satellite")].error
    assert "401" in by_key[("cpe-2", "wifi")].error
    assert "cpe-3" in by_key[("cpe-3", "wifi")].error
    assert "no agent configured" in by_key[("cpe-9", "wifi")].error
