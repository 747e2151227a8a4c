"""`atsss xapp serve` standalone, as the live system: the xApp, the KPM simulator and dry-run agents
as processes on loopback, SDL in a real Redis."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from bench.live_system import (
    FIRST_PUSH,
    Agent,
    agent_process,
    start_simulator,
    start_xapp,
    wait_until,
    write_xapp_config,
)
from tests.servers import redis_server
from xapp.ownership import assigned_replica

pytestmark = pytest.mark.slow

TWO_CPES = """\
version: 1
name: two-cpes
description: Two CPEs with all three accesses, for the reload test.
duration_s: 60
seed: 5
cpes:
  - id: cpe-{index}
    count: 2
    accesses:
      nr: {downlink_mbps: 342, uplink_mbps: 56}
      wifi: {downlink_mbps: 1190, uplink_mbps: 900}
      lifi: {downlink_mbps: 12.1, uplink_mbps: 6}
"""


@pytest.fixture
def sdl() -> Iterator[tuple[dict[str, str], redis.Redis]]:
    with redis_server() as port:
        client = redis.Redis(port=port)
        yield {"DBAAS_SERVICE_HOST": "127.0.0.1", "DBAAS_SERVICE_PORT": str(port)}, client
        client.close()


def subscription_keys(client: redis.Redis) -> list[bytes]:
    return sorted(k for k in client.keys("*") if b"subscription/" in k)


class SequenceWatch:
    """Polls what an agent holds, to prove its sequence numbers never go backwards."""

    def __init__(self, agent: Agent, direction: str, cpe_id: str) -> None:
        self.agent, self.direction, self.cpe_id = agent, direction, cpe_id
        self.sequences: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            with contextlib.suppress(Exception):
                held = self.agent.weights(self.direction, self.cpe_id)
                if held is not None:
                    self.sequences.append(int(held["applied"]["sequence"]))

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.sequences


def test_serve_standalone_pushes_to_every_agent_and_stops_cleanly(
    tmp_path: Path, sdl: tuple[dict[str, str], redis.Redis]
) -> None:
    env, client = sdl
    with (
        agent_process(tmp_path, "cpe-1", "cpe", ["cpe-1"]) as cpe,
        agent_process(tmp_path, "proxy", "proxy", ["cpe-1"]) as proxy,
    ):
        config = write_xapp_config(tmp_path, "paper-static", {"cpe-1": cpe.url}, proxy.url)
        xapp = start_xapp(tmp_path, config, env)
        simulator = start_simulator(tmp_path, "paper-static", xapp.e2_port, 30, config)
        try:
            wait_until(xapp.ready, 20, "readiness")
            wait_until(
                lambda: (
                    proxy.weights("downlink", "cpe-1") is not None
                    and cpe.weights("uplink", "cpe-1") is not None
                ),
                10,
                "weights at both agents:\n" + xapp.log(),
            )
            held = proxy.weights("downlink", "cpe-1")
            assert held is not None
            assert held["applied"]["weights"]["wifi"] > held["applied"]["weights"]["nr"] > 0
            assert held["applied"]["requested_by"].startswith("xapp")
            # a push that outlasted its step is logged at the next one, after the agent has it
            wait_until(lambda: FIRST_PUSH.search(xapp.log()) is not None, 10, "the first push")
            delay = FIRST_PUSH.search(xapp.log())
            assert delay is not None, xapp.log()
            assert float(delay.group(2)) <= 2.0, "more than two reporting periods to first push"
            assert len(subscription_keys(client)) == 3, "one subscription record per node in SDL"
            check_metrics(httpx.get(f"{xapp.http_url}/metrics").text)
            code, seconds = xapp.terminate_within(5)
            assert code == 0, xapp.log()
            assert seconds < 5
            assert subscription_keys(client) == [], "subscriptions left behind in SDL"
        finally:
            simulator.kill()
            simulator.wait()
            if xapp.process.poll() is None:
                xapp.process.kill()
            xapp.process.wait()


GRAFANA = Path(__file__).resolve().parents[1] / "docs" / "grafana" / "atsss-xapp.json"


def check_metrics(scraped: str) -> None:
    """The figures a Grafana user needs are there, and every one the dashboard asks for."""
    assert 'atsss_capacity_mbps{access="wifi",cpe="cpe-1",direction="downlink"}' in scraped
    assert 'atsss_weight{access="wifi",cpe="cpe-1",direction="downlink"}' in scraped
    assert 'atsss_weight_pushes_total{result="applied",role="proxy"}' in scraped
    # the control delay of the pushes decided from reports: report → decision → applied
    for stage in ("decided", "applied"):
        counted = re.search(
            rf'^atsss_control_delay_seconds_count{{stage="{stage}"}} (\S+)$', scraped, re.M
        )
        assert counted is not None, stage
        assert float(counted.group(1)) > 0, stage
    for name in (
        "atsss_decision_seconds_count",
        "atsss_e2_decode_seconds_count",
        "atsss_ready 1.0",
        "atsss_exploration_raises_total",
        "atsss_exploration_overshoots_total",
    ):
        assert name in scraped, name
    dashboard = json.loads(GRAFANA.read_text())
    asked = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"atsss_[a-z_]+", target["expr"])
    }
    present = {
        line.split("{")[0].split(" ")[0]
        for line in scraped.splitlines()
        if line.startswith("atsss_")
    }
    # A counter the xApp has not counted yet (no rejection, no override) still has its HELP line.
    described = set(re.findall(r"^# HELP (atsss_[a-z_]+)", scraped, re.M))
    missing = {
        name
        for name in asked
        if name not in present
        and name.removesuffix("_total") not in described
        and name.removesuffix("_bucket") not in described
    }
    assert not missing, f"the Grafana dashboard asks for metrics the xApp does not have: {missing}"


def test_kill_9_and_restart_resumes_without_409_or_going_backwards(
    tmp_path: Path, sdl: tuple[dict[str, str], redis.Redis]
) -> None:
    env, client = sdl
    with (
        agent_process(tmp_path, "cpe-1", "cpe", ["cpe-1"]) as cpe,
        agent_process(tmp_path, "proxy", "proxy", ["cpe-1"]) as proxy,
    ):
        config = write_xapp_config(tmp_path, "paper-interruption", {"cpe-1": cpe.url}, proxy.url)
        first = start_xapp(tmp_path, config, env, name="xapp-1")
        simulator = start_simulator(tmp_path, "paper-interruption", first.e2_port, 60)
        watch = SequenceWatch(proxy, "downlink", "cpe-1")
        second = None
        try:
            # An access goes down every 5 s here, so the xApp pushes every few seconds.
            wait_until(lambda: len(set(watch.sequences)) >= 2, 25, "two pushes")
            os.kill(first.process.pid, signal.SIGKILL)
            first.process.wait(timeout=10)
            before = max(watch.sequences)
            second = start_xapp(tmp_path, config, env, e2_port=first.e2_port, name="xapp-2")
            wait_until(second.ready, 20, "readiness after the restart:\n" + second.log())
            wait_until(lambda: max(watch.sequences) > before, 20, "a push after the restart")
            assert len(subscription_keys(client)) == 3, "subscriptions duplicated"
            code, _ = second.terminate_within(5)
            assert code == 0
        finally:
            sequences = watch.stop()
            simulator.kill()
            simulator.wait()
            for xapp in (first, second):
                if xapp is not None and xapp.process.poll() is None:
                    xapp.process.kill()
                    xapp.process.wait()
    assert sequences == sorted(sequences), f"a sequence number went backwards: {sequences}"
    for log in (first.log(), second.log() if second else ""):
        assert "is not after" not in log, log  # the agent's refusal of a stale sequence (409)
        assert "push failed" not in log, log


def test_an_edited_configuration_takes_effect_without_a_restart(tmp_path: Path) -> None:
    scenario = tmp_path / "two.yaml"
    scenario.write_text(TWO_CPES)
    first, second = "cpe-0", "cpe-1"  # the template's ids
    with agent_process(tmp_path, "proxy", "proxy", [first, second]) as proxy:
        config = write_xapp_config(tmp_path, str(scenario), {}, proxy.url, directions=["downlink"])
        full = json.loads(config.read_text())
        assert [c["id"] for c in full["cpes"]] == [first, second]
        config.write_text(json.dumps(dict(full, cpes=full["cpes"][:1])))
        xapp = start_xapp(tmp_path, config)
        simulator = start_simulator(tmp_path, str(scenario), xapp.e2_port, 40)
        try:
            wait_until(lambda: proxy.weights("downlink", first) is not None, 20, first)
            assert proxy.weights("downlink", second) is None
            config.write_text(json.dumps(dict(full, cpes=full["cpes"][1:])))
            wait_until(lambda: proxy.weights("downlink", second) is not None, 15, second)
            assert f"added {second}, removed {first}" in xapp.log()
            assert xapp.process.poll() is None
            config.write_text("{not json")  # a broken edit changes nothing and kills nothing
            wait_until(lambda: "configuration not reloaded" in xapp.log(), 10, "the refusal")
            assert xapp.ready()
            code, _ = xapp.terminate_within(5)
            assert code == 0
        finally:
            simulator.kill()
            simulator.wait()
            if xapp.process.poll() is None:
                xapp.process.kill()
            xapp.process.wait()


def test_serve_reloads_on_sighup(tmp_path: Path) -> None:
    with agent_process(tmp_path, "proxy", "proxy", ["cpe-1"]) as proxy:
        config = write_xapp_config(tmp_path, "paper-static", {}, proxy.url)
        xapp = start_xapp(tmp_path, config)
        try:
            time.sleep(1)
            xapp.process.send_signal(signal.SIGHUP)
            wait_until(lambda: "configuration reloaded" in xapp.log(), 10, "the reload")
        finally:
            code, _ = xapp.terminate_within(5)
        assert code == 0


def test_the_demo_runs_the_live_system() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "atsss", "demo", "--live-seconds", "12", "--duration", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "cpe-1 on paper-dynamic, live" in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("│ downlink"))
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    pushes, efficiency, round_robin = int(cells[1]), float(cells[3]), float(cells[4])
    assert pushes >= 1
    assert efficiency > 3 * round_robin, "the live xApp's weights do no better than 1-1-1"
    assert "paper-static: 1 CPE(s)" in done.stdout, "the closed-loop figures follow"


FOUR_CPES = """\
version: 1
name: four-cpes
description: Four CPEs whose LiFi comes and goes, for the replica test (pushes every few seconds).
duration_s: 120
seed: 6
cpes:
  - id: cpe-{index}
    count: 4
    accesses:
      nr: {downlink_mbps: 342, uplink_mbps: 56}
      wifi: {downlink_mbps: 1190, uplink_mbps: 900}
      lifi:
        downlink_mbps: 120
        uplink_mbps: 60
        availability: {periodic: {up_s: 4, down_s: 3, offset_s: 0}}
"""


def controlled(log: str, replica: str) -> set[str]:
    """The CPEs a replica says it controls now, from its log of takes and hand-overs."""
    held: set[str] = set()
    for line in log.splitlines():
        taken = re.search(rf"replica {replica} now controls (\S+)", line)
        handed = re.search(rf"replica {replica} hands (\S+) over", line)
        if taken:
            held.add(taken.group(1))
        if handed:
            held.discard(handed.group(1))
    return held


def test_two_replicas_share_the_cpes_and_one_takes_over_when_the_other_dies(
    tmp_path: Path, sdl: tuple[dict[str, str], redis.Redis]
) -> None:
    env, _ = sdl
    scenario = tmp_path / "four.yaml"
    scenario.write_text(FOUR_CPES)
    ids = [f"cpe-{n}" for n in range(4)]
    with agent_process(tmp_path, "proxy", "proxy", ids) as proxy:
        config = write_xapp_config(tmp_path, str(scenario), {}, proxy.url, directions=["downlink"])
        a = start_xapp(tmp_path, config, {**env, "HOSTNAME": "replica-a"}, name="xapp-a")
        b = start_xapp(tmp_path, config, {**env, "HOSTNAME": "replica-b"}, name="xapp-b")
        simulators = [start_simulator(tmp_path, str(scenario), x.e2_port, 110) for x in (a, b)]
        try:
            wait_until(
                lambda: all(proxy.weights("downlink", c) is not None for c in ids), 30, "weights"
            )
            # each replica's share as rendezvous hashing assigns it (both have some)
            share_a = {
                c for c in ids if assigned_replica(c, ["replica-a", "replica-b"]) == "replica-a"
            }
            assert 0 < len(share_a) < len(ids)
            wait_until(
                lambda: (
                    controlled(a.log(), "replica-a") == share_a
                    and controlled(b.log(), "replica-b") == set(ids) - share_a
                ),
                20,
                "the split:\n" + a.log()[-2000:] + b.log()[-2000:],
            )
            assert controlled(a.log(), "replica-a").isdisjoint(controlled(b.log(), "replica-b"))
            from_a = controlled(a.log(), "replica-a")
            os.kill(a.process.pid, signal.SIGKILL)
            a.process.wait(timeout=10)
            wait_until(lambda: controlled(b.log(), "replica-b") == set(ids), 15, "the take-over")
            assert "taken over from replica-a" in b.log()
            mark = len(b.log())
            wait_until(
                lambda: any(f"pushed {c} downlink" in b.log()[mark:] for c in from_a),
                20,
                "a push by replica-b for a CPE it took over",
            )
            code, _ = b.terminate_within(5)
            assert code == 0
        finally:
            for simulator in simulators:
                simulator.kill()
                simulator.wait()
            for xapp in (a, b):
                if xapp.process.poll() is None:
                    xapp.process.kill()
                    xapp.process.wait()
    for log in (a.log(), b.log()):
        assert "is not after" not in log, "two replicas pushed to one CPE (a 409)"
        assert "push failed" not in log, log
