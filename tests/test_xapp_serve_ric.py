"""`atsss xapp serve` in RIC mode, as a cluster runs it: RMR through a stand-in of ricxappframe's
rmr module (librmr's functions over loopback TCP, with RMR's route-table readiness and receive
timeouts), subscriptions through a stand-in submgr that really subscribes at the E2 nodes,
registration with a stand-in appmgr, SDL in a real Redis, the simulator's nodes behind a
stand-in E2 termination."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from bench.live_system import (
    Agent,
    Xapp,
    agent_process,
    free_ports,
    start_simulator,
    start_xapp,
    wait_until,
    write_xapp_config,
)
from tests.ric_standin import RicStandIn, point_at_stand_ins
from tests.rmr_standin import RmrPeer, route_table
from tests.servers import redis_server

pytestmark = pytest.mark.slow

RIC_HEALTH_CHECK_REQ, RIC_HEALTH_CHECK_RESP, RIC_INDICATION = 100, 101, 12050
NODES = 3


@dataclass
class RicSystem:
    ric: RicStandIn
    xapp: Xapp
    rmr_port: int
    redis_port: int
    cpe: Agent
    proxy: Agent

    def get(self, path: str) -> Any:
        return httpx.get(self.xapp.http_url + path, timeout=5).json()

    def nodes(self) -> dict[str, dict[str, Any]]:
        return {n["node"]: n for n in self.get("/v1/nodes")}

    def metrics(self) -> str:
        return httpx.get(self.xapp.http_url + "/metrics", timeout=5).text


@contextlib.contextmanager
def ric_system(
    tmp_path: Path,
    *,
    seed_table: bool = True,
    first_node_unreachable: bool = False,
    quiet_periods: int = 3,
) -> Iterator[RicSystem]:
    rmr_port, http_port = free_ports(2)
    ric = RicStandIn()
    with (
        redis_server() as redis_port,
        ric.running(rmr_port) as (e2t_port, platform_port),
        agent_process(tmp_path, "cpe-1", "cpe", ["cpe-1"]) as cpe,
        agent_process(tmp_path, "proxy", "proxy", ["cpe-1"]) as proxy,
    ):
        config = write_xapp_config(tmp_path, "paper-static", {"cpe-1": cpe.url}, proxy.url)
        point_at_stand_ins(config, platform_port, http_port, rmr_port)
        document = json.loads(config.read_text())
        document["e2"]["quiet_periods"] = quiet_periods
        document["operator_api"] = {"anonymous_reads": True}  # the test reads /v1/nodes
        descriptor = tmp_path / "config-file.json"
        descriptor.write_text(
            json.dumps({"name": "atsss-xapp", "version": "0.1.0", "controls": document})
        )
        simulator = start_simulator(tmp_path, "paper-static", e2t_port, 90)
        wait_until(lambda: len(ric.nodes) == NODES, 30, "the simulated nodes at the E2 termination")
        if first_node_unreachable:  # 503 for good: no E2 connection to it, as the submgr says
            ric.unreachable.add(sorted(ric.nodes)[0])
        seed = tmp_path / "routes.rt"
        seed.write_text(route_table((RIC_HEALTH_CHECK_RESP, f"127.0.0.1:{rmr_port}")))
        env = {
            "ATSSS_RMR_LIBRARY": "tests.rmr_standin",
            "DBAAS_SERVICE_HOST": "127.0.0.1",
            "DBAAS_SERVICE_PORT": str(redis_port),
            "CONFIG_FILE": str(descriptor),
            "HOSTNAME": "atsss-xapp-0",
            "RMR_SEED_RT": str(seed) if seed_table else "",
            "RMR_RTG_SVC": "",
        }
        xapp = start_xapp(tmp_path, descriptor, env, mode="ric", http_port=http_port)
        try:
            yield RicSystem(ric, xapp, rmr_port, redis_port, cpe, proxy)
        finally:
            simulator.kill()
            simulator.wait()
            if xapp.process.poll() is None:
                xapp.process.kill()
            xapp.process.wait()


def test_serve_in_ric_mode_and_stop_within_five_seconds(tmp_path: Path) -> None:
    with ric_system(tmp_path) as system:
        ric, xapp = system.ric, system.xapp
        wait_until(xapp.ready, 30, "readiness:\n" + xapp.log())
        wait_until(lambda: len(ric.active_subscriptions()) == NODES, 15, "three subscriptions")
        wait_until(lambda: ric.forwarded > 0, 10, "indications over RMR")
        wait_until(
            lambda: (
                system.proxy.weights("downlink", "cpe-1") is not None
                and system.cpe.weights("uplink", "cpe-1") is not None
            ),
            15,
            "weights at both agents:\n" + xapp.log(),
        )
        assert len(ric.registered) == 1
        registration = ric.registered[0]
        assert registration["appName"] == "atsss-xapp-0"
        assert registration["appInstanceName"] == "atsss-xapp"
        assert registration["httpEndpoint"].endswith(f":{xapp.http_url.rsplit(':', 1)[1]}")
        assert json.loads(registration["config"])["controls"]["e2"]["rmr_port"] == system.rmr_port

        peer = RmrPeer(system.rmr_port)
        peer.send(RIC_HEALTH_CHECK_REQ, "", b"ping")
        assert peer.receive() == (RIC_HEALTH_CHECK_RESP, b"OK\n")

        # Every node reports: its state and the age of its last report, in the API and /metrics.
        wait_until(
            lambda: all(n["state"] == "active" for n in system.nodes().values()), 10, "active"
        )
        metrics = system.metrics()
        for node in system.nodes():
            assert f'atsss_e2_node_state{{node="{node}",state="active"}} 1.0' in metrics
            assert re.search(rf'atsss_e2_node_report_age_seconds{{node="{node}"}} \d', metrics)

        # 200 undecodable messages: counted, and a handful of log lines at most.
        before = xapp.log()
        for index in range(200):
            peer.send(RIC_INDICATION, "gnb-rogue" if index % 2 else "", b"\x00\x05garbage")
        wait_until(
            lambda: 'atsss_e2_rejected_total{cause="e2ap-malformed"} 200.0' in system.metrics(),
            10,
            "the bad messages counted",
        )
        new_lines = xapp.log()[len(before) :].splitlines()
        about_them = [line for line in new_lines if "garbage" in line or "malformed" in line]
        assert len(about_them) <= 3, about_them
        assert not [line for line in new_lines if "pycrate" in line], new_lines

        keys = redis.Redis(port=system.redis_port).keys("*subscription/*")
        assert len(keys) == NODES, keys
        code, seconds = xapp.terminate_within(5)
        assert code == 0, xapp.log()
        assert seconds < 5, f"stop took {seconds:.1f} s"
        print(f"\nstop: {seconds:.2f} s after SIGTERM")  # the figure docs/service.md quotes
        assert peer.closed_by_the_xapp(5), "RMR still open after the stop"
        peer.close()
        assert len(ric.deleted) == NODES, "every subscription deleted at shutdown"
        assert ric.active_subscriptions() == []
        assert [d["appInstanceName"] for d in ric.deregistered] == ["atsss-xapp"]
        assert [d["appName"] for d in ric.deregistered] == ["atsss-xapp-0"]
        log = xapp.log()
        assert "Cannot Read config file" not in log
        lines = [line for line in log.splitlines() if line.startswith("{")]
        assert lines, "no JSON log lines in RIC mode"
        for line in lines:
            record = json.loads(line)
            assert {"ts", "crit", "id", "mdc", "msg"} <= set(record)


def test_a_lost_subscription_heals(tmp_path: Path) -> None:
    with ric_system(tmp_path, quiet_periods=2) as system:
        ric, xapp = system.ric, system.xapp
        wait_until(xapp.ready, 30, "readiness:\n" + xapp.log())
        wait_until(
            lambda: (
                all(n["state"] == "active" for n in system.nodes().values())
                and all(n["last_report_age_s"] is not None for n in system.nodes().values())
            ),
            20,
            "every node active and reporting",
        )
        node = sorted(system.nodes())[0]
        ric.forget(node)  # the platform lost it; nobody tells the xApp
        lost_at = time.monotonic()
        forwarded = ric.forwarded_by_node.get(node, 0)
        wait_until(
            lambda: system.nodes()[node]["resubscriptions"] >= 1,
            10,
            "the quiet node subscribed again:\n" + xapp.log(),
        )
        resubscribed_s = time.monotonic() - lost_at
        assert "no indication for 2 reporting periods" in xapp.log()
        wait_until(lambda: ric.forwarded_by_node.get(node, 0) > forwarded, 10, "indications again")
        print(  # the figures docs/service.md quotes
            f"\nlost subscription: subscribed again after {resubscribed_s:.1f} s, "
            f"reporting again after {time.monotonic() - lost_at:.1f} s (quiet bound 2 s)"
        )
        wait_until(lambda: system.nodes()[node]["state"] == "active", 10, "active again")
        assert xapp.ready()
        metrics = system.metrics()
        assert f'atsss_e2_node_state{{node="{node}",state="active"}} 1.0' in metrics
        assert re.search(rf'atsss_e2_node_report_age_seconds{{node="{node}"}} \d', metrics)

        # The E2 manager says a node connected again: subscribed again at once, not after
        # the quiet bound.
        other = sorted(system.nodes())[1]
        count = system.nodes()[other]["resubscriptions"]
        published_at = time.monotonic()
        redis.Redis(port=system.redis_port).publish(
            "{e2Manager},RAN_CONNECTION_STATUS_CHANGE", f"{other}_CONNECTED"
        )
        wait_until(
            lambda: system.nodes()[other]["resubscriptions"] > count,
            1.5,
            "a resubscription on the E2 manager's word:\n" + xapp.log(),
            interval_s=0.05,
        )
        print(f"E2 manager's event: subscribed again after {time.monotonic() - published_at:.2f} s")
        wait_until(lambda: system.nodes()[other]["state"] == "active", 10, "active again")
        code, _ = xapp.terminate_within(5)
        assert code == 0


def test_ready_without_one_node_and_says_what_it_waits_for(tmp_path: Path) -> None:
    with ric_system(tmp_path, seed_table=False, first_node_unreachable=True) as system:
        ric, xapp = system.ric, system.xapp
        (first,) = ric.unreachable
        # No route table: alive, not ready, and the log says what is missing within 10 s.
        wait_until(lambda: "RMR not ready" in xapp.log(), 10, "a line on the missing table")
        assert "RMR_SEED_RT is not set" in xapp.log()
        answer = httpx.get(xapp.http_url + "/ric/v1/health/ready", timeout=5)
        assert answer.status_code == 503
        assert any("RMR_SEED_RT" in reason for reason in answer.json()["waiting_for"])
        assert httpx.get(xapp.http_url + "/ric/v1/health/alive", timeout=5).status_code == 200

        peer = RmrPeer(system.rmr_port)  # the route manager sends the table
        peer.send_route_table(route_table((RIC_HEALTH_CHECK_RESP, "127.0.0.1:1")))
        wait_until(xapp.ready, 15, "readiness with one node unreachable:\n" + xapp.log())
        wait_until(
            lambda: system.nodes()[first]["state"] == "failed", 30, "the node reported failed"
        )
        assert "503" in system.nodes()[first]["cause"]
        others = [n for name, n in system.nodes().items() if name != first]
        wait_until(
            lambda: all(system.nodes()[n["node"]]["state"] == "active" for n in others),
            15,
            "the other nodes active",
        )
        assert xapp.ready()
        metrics = system.metrics()
        assert f'atsss_e2_node_state{{node="{first}",state="failed"}} 1.0' in metrics
        peer.close()
        code, seconds = xapp.terminate_within(5)
        assert code == 0
        assert seconds < 5
