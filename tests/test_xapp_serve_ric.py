"""`atsss xapp serve` in RIC mode: RMR through a stand-in with RMRXapp's API, subscriptions
through a stand-in submgr that really subscribes at the E2 nodes, registration with a stand-in
appmgr, SDL in a real Redis, the simulator's nodes behind a stand-in E2 termination."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from bench.live_system import (
    agent_process,
    free_ports,
    start_simulator,
    start_xapp,
    wait_until,
    write_xapp_config,
)
from tests.ric_standin import RicStandIn, point_at_stand_ins
from tests.rmr_standin import RmrPeer
from tests.servers import redis_server

pytestmark = pytest.mark.slow

RIC_HEALTH_CHECK_REQ, RIC_HEALTH_CHECK_RESP = 100, 101


def test_serve_in_ric_mode(tmp_path: Path) -> None:
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
        descriptor = tmp_path / "config-file.json"
        descriptor.write_text(
            json.dumps({"name": "atsss-xapp", "version": "0.1.0", "controls": document})
        )
        simulator = start_simulator(tmp_path, "paper-static", e2t_port, 40)
        wait_until(lambda: len(ric.nodes) == 3, 30, "the simulated nodes at the E2 termination")
        env = {
            "ATSSS_RMR_XAPP": "tests.rmr_standin:LoopbackRMRXapp",
            "DBAAS_SERVICE_HOST": "127.0.0.1",
            "DBAAS_SERVICE_PORT": str(redis_port),
            "CONFIG_FILE": str(descriptor),
            "HOSTNAME": "atsss-xapp-0",
        }
        xapp = start_xapp(tmp_path, descriptor, env, mode="ric", http_port=http_port)
        try:
            wait_until(xapp.ready, 30, "readiness:\n" + xapp.log())
            assert len(ric.active_subscriptions()) == 3
            wait_until(lambda: ric.forwarded > 0, 10, "indications over RMR")
            wait_until(
                lambda: (
                    proxy.weights("downlink", "cpe-1") is not None
                    and cpe.weights("uplink", "cpe-1") is not None
                ),
                10,
                "weights at both agents:\n" + xapp.log(),
            )
            wait_until(lambda: ric.registered, 15, "registration with the appmgr")
            registration = ric.registered[0]
            assert registration["appName"] == "atsss-xapp-0"
            assert registration["appInstanceName"] == "atsss-xapp"
            assert registration["httpEndpoint"] == f"127.0.0.1:{http_port}"
            assert json.loads(registration["config"])["controls"]["e2"]["rmr_port"] == rmr_port

            peer = RmrPeer(rmr_port)
            peer.send(RIC_HEALTH_CHECK_REQ, "", b"ping")
            assert peer.receive() == (RIC_HEALTH_CHECK_RESP, b"OK\n")
            peer.close()

            keys = redis.Redis(port=redis_port).keys("*subscription/*")
            assert len(keys) == 3, keys
            code, seconds = xapp.terminate_within(5)
            assert code == 0, xapp.log()
            assert seconds < 5
            assert len(ric.deleted) == 3, "every subscription deleted at shutdown"
            assert ric.active_subscriptions() == []
            assert [d["appInstanceName"] for d in ric.deregistered] == ["atsss-xapp"]
        finally:
            simulator.kill()
            simulator.wait()
            if xapp.process.poll() is None:
                xapp.process.kill()
            xapp.process.wait()
