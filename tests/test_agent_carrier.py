"""The agent's own reaction to an access losing carrier: at once, shown beside the xApp's set."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.backends.dry_run import DryRunBackend
from agent.carrier import CarrierWatcher
from agent.config import AgentConfig
from agent.service import WeightService, WeightUpdate
from core.domain import Direction
from core.scenario.e2_identities import e2_cpes
from core.scenario.load import load_scenario
from tests.helpers import estimate, host_network
from tests.servers import free_port
from tests.test_agent_api import TOKEN, agent
from tests.test_control_loop import TableEstimator
from xapp.adapters.agent_http import AgentEndpoint
from xapp.live import LiveControl, LiveSettings

UP = Direction.UPLINK


def cpe_service(tmp_path: Path, **extra: object) -> tuple[WeightService, DryRunBackend]:
    config = AgentConfig.model_validate(
        {
            "role": "cpe",
            "accesses": {
                "nr": {"interface": "nr0", "address": "10.1.0.1"},
                "wifi": {"interface": "wifi0", "address": "10.2.0.1"},
            },
            "state_file": str(tmp_path / "state.json"),
            **extra,
        }
    )
    backend = DryRunBackend()
    return WeightService(config, backend, lambda address: True), backend


def test_a_lost_carrier_puts_the_path_on_standby_and_back(tmp_path: Path) -> None:
    service, backend = cpe_service(tmp_path)
    service.apply(WeightUpdate("cpe-1", UP, {"nr": 3, "wifi": 1}, 5))
    lost = service.set_carrier("nr", False)
    assert lost is not None
    assert lost.event == "carrier lost"
    assert backend.held == {("cpe-1", "nr"): 0, ("cpe-1", "wifi"): 1}
    assert service.effective("cpe-1") == {"nr": 0, "wifi": 1}
    applied = service.applied("cpe-1")
    assert applied is not None
    assert applied.weights == {"nr": 3, "wifi": 1}  # the xApp's set stays as it was
    assert applied.sequence == 5
    assert service.set_carrier("nr", False) is None  # no change, no action
    # A set from the xApp while nr is still down keeps nr on standby.
    service.apply(WeightUpdate("cpe-1", UP, {"nr": 4, "wifi": 2}, 6))
    assert backend.held == {("cpe-1", "nr"): 0, ("cpe-1", "wifi"): 2}
    back = service.set_carrier("nr", True)
    assert back is not None
    assert backend.held == {("cpe-1", "nr"): 4, ("cpe-1", "wifi"): 2}
    assert [a.sequence for a in service.local_actions] == [1, 2]


def test_losing_every_path_changes_nothing_and_wait_mode_waits_for_the_xapp(
    tmp_path: Path,
) -> None:
    service, backend = cpe_service(tmp_path, carrier_return="wait")
    service.apply(WeightUpdate("cpe-1", UP, {"nr": 3, "wifi": 0}, 1))
    service.set_carrier("nr", False)
    assert backend.held == {("cpe-1", "nr"): 3, ("cpe-1", "wifi"): 0}  # nothing else to use
    service.apply(WeightUpdate("cpe-1", UP, {"nr": 3, "wifi": 1}, 2))
    assert backend.held == {("cpe-1", "nr"): 0, ("cpe-1", "wifi"): 1}
    service.set_carrier("nr", True)
    assert backend.held == {("cpe-1", "nr"): 0, ("cpe-1", "wifi"): 1}  # waits for the xApp
    service.apply(WeightUpdate("cpe-1", UP, {"nr": 5, "wifi": 1}, 3))
    assert backend.held == {("cpe-1", "nr"): 5, ("cpe-1", "wifi"): 1}


def test_the_watcher_reads_carrier_and_ignores_interfaces_that_do_not_exist(
    tmp_path: Path,
) -> None:
    device = tmp_path / "class" / "net" / "nr0"
    device.mkdir(parents=True)
    (device / "carrier").write_text("1\n")
    seen: list[tuple[str, bool]] = []
    now = [0.0]
    watcher = CarrierWatcher(
        {"nr": "nr0", "wifi": "absent0"},
        lambda a, up: seen.append((a, up)),
        tmp_path,
        return_settle_s=0.3,
        clock=lambda: now[0],
    )
    watcher.check()
    assert seen == []  # up at the first look: nothing to do
    (device / "carrier").write_text("0\n")
    watcher.check()
    (device / "carrier").unlink()  # unreadable: administratively down
    watcher.check()
    (device / "carrier").write_text("1\n")
    watcher.check()
    assert seen == [("nr", False)]  # back, but not for long enough yet
    now[0] = 0.2
    (device / "carrier").write_text("0\n")  # a flap: the return starts over
    watcher.check()
    (device / "carrier").write_text("1\n")
    now[0] = 0.3
    watcher.check()
    now[0] = 0.5
    watcher.check()
    assert seen == [("nr", False)]
    now[0] = 0.61
    watcher.check()
    assert seen == [("nr", False), ("nr", True)]


@contextlib.contextmanager
def veth_pairs(count: int) -> Iterator[list[tuple[str, str, str]]]:
    """(our end, peer end, our address) per pair, in this namespace; always removed."""
    tag = os.getpid() % 10000
    pairs = [(f"ac{tag}a{i}", f"ac{tag}b{i}", f"10.{77 + i}.{tag % 250}.1") for i in range(count)]
    try:
        for ours, peer, address in pairs:
            subprocess.run(
                ["ip", "link", "add", ours, "type", "veth", "peer", "name", peer], check=True
            )
            subprocess.run(["ip", "addr", "add", f"{address}/24", "dev", ours], check=True)
            subprocess.run(["ip", "link", "set", ours, "up"], check=True)
            subprocess.run(["ip", "link", "set", peer, "up"], check=True)
        yield pairs
    finally:
        for ours, _, _ in pairs:
            subprocess.run(["ip", "link", "del", ours], check=False, capture_output=True)


def wait_for(predicate: object, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(os.geteuid() != 0, reason="creating veth pairs needs root")
@host_network
def test_the_agent_reacts_to_a_real_link_going_down_and_up(tmp_path: Path) -> None:
    with veth_pairs(2) as pairs:
        (nr, nr_peer, nr_address), (wifi, _, wifi_address) = pairs
        port = free_port()
        (tmp_path / "token").write_text(TOKEN + "\n")
        config = tmp_path / "agent.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "role": "cpe",
                    "accesses": {
                        "nr": {"interface": nr, "address": nr_address},
                        "wifi": {"interface": wifi, "address": wifi_address},
                    },
                    "listen": f"127.0.0.1:{port}",
                    "token_file": str(tmp_path / "token"),
                    "state_file": str(tmp_path / "state.json"),
                    "backend": "dry-run",
                }
            )
        )
        with agent(config, port) as client:
            body = {"cpe_id": "cpe-1", "weights": {"nr": 28, "wifi": 99}, "sequence": 1}
            assert client.put("/v1/weights/uplink", json=body).status_code == 200

            def effective() -> dict[str, int]:
                held = client.get("/v1/weights/uplink", params={"cpe_id": "cpe-1"}).json()
                return dict(held["effective"])

            assert effective() == {"nr": 28, "wifi": 99}
            subprocess.run(["ip", "link", "set", nr_peer, "down"], check=True)
            assert wait_for(lambda: effective() == {"nr": 0, "wifi": 99})
            health = client.get("/v1/health").json()
            assert health["carrier_down"] == ["nr"]
            assert health["local_actions"][-1]["event"] == "carrier lost"
            subprocess.run(["ip", "link", "set", nr_peer, "up"], check=True)
            assert wait_for(lambda: effective() == {"nr": 28, "wifi": 99})
            held = client.get("/v1/weights/uplink", params={"cpe_id": "cpe-1"}).json()
            assert held["applied"]["sequence"] == 1  # the xApp's sequence is untouched


def test_the_events_endpoint_long_polls_and_starts_over_for_an_earlier_run(
    tmp_path: Path,
) -> None:
    service, _ = cpe_service(tmp_path)
    service.apply(WeightUpdate("cpe-1", UP, {"nr": 3, "wifi": 1}, 5))
    assert service.actions_after(0, 0.0) == (0, [])
    started = time.monotonic()
    assert service.actions_after(0, 0.3) == (0, [])  # nothing happened: held open, then empty
    assert time.monotonic() - started >= 0.25
    service.set_carrier("nr", False)
    latest, actions = service.actions_after(0, 5.0)
    assert latest == 1
    assert [(a.access, a.carrier_up) for a in actions] == [("nr", False)]
    service.set_carrier("nr", True)
    assert [a.sequence for a in service.actions_after(1, 5.0)[1]] == [2]
    # A number from an earlier run of the agent (above the latest): all of this run's are news.
    assert [a.sequence for a in service.actions_after(40, 5.0)[1]] == [1, 2]


@pytest.mark.skipif(os.geteuid() != 0, reason="creating veth pairs needs root")
@host_network
def test_the_xapp_hears_of_a_real_carrier_loss_at_once_and_decides_for_it(
    tmp_path: Path,
) -> None:
    """The agent's local action reaches the xApp as an event; the xApp's next set excludes the
    lost path at once (no report needed) and gives it back its weight when the carrier is."""
    with veth_pairs(3) as pairs:
        port = free_port()
        (tmp_path / "token").write_text(TOKEN + "\n")
        config = tmp_path / "agent.yaml"
        accesses = {
            name: {"interface": ours, "address": address}
            for name, (ours, _, address) in zip(("nr", "wifi", "lifi"), pairs, strict=True)
        }
        config.write_text(
            yaml.safe_dump(
                {
                    "role": "cpe",
                    "accesses": accesses,
                    "listen": f"127.0.0.1:{port}",
                    "token_file": str(tmp_path / "token"),
                    "state_file": str(tmp_path / "state.json"),
                    "backend": "dry-run",
                }
            )
        )
        cpes = e2_cpes(load_scenario("paper-static"))
        url = f"http://127.0.0.1:{port}"
        settings = LiveSettings(
            cpe_agents={"cpe-1": AgentEndpoint(url, TOKEN)},
            directions=(Direction.UPLINK,),
            period_s=3600.0,  # no periodic step during the test: only the events decide
        )
        control = LiveControl(cpes, settings)
        now = time.time()
        control.estimator = TableEstimator(  # type: ignore[assignment]
            {
                "nr": estimate("nr", 90.0, at_s=now),
                "wifi": estimate("wifi", 900.0, at_s=now),
                "lifi": estimate("lifi", 10.0, at_s=now),
            }
        )
        with agent(config, port) as client:
            control.prepare()
            control.step(time.time())

            def held() -> dict[str, Any]:
                answer = client.get("/v1/weights/uplink", params={"cpe_id": "cpe-1"}).json()
                return dict(answer)

            first = held()["applied"]
            assert first["weights"]["nr"] > 0
            control.start()
            try:
                time.sleep(0.5)  # the watcher's first answer: where the agent's numbering is
                subprocess.run(["ip", "link", "set", pairs[0][1], "down"], check=True)
                assert wait_for(lambda: held()["applied"]["weights"]["nr"] == 0), held()
                lost = held()["applied"]
                assert lost["sequence"] == first["sequence"] + 1
                assert control.last_access_event["cpe-1"]["carrier"] == "down"
                subprocess.run(["ip", "link", "set", pairs[0][1], "up"], check=True)
                assert wait_for(lambda: held()["applied"]["weights"]["nr"] > 0), held()
                assert held()["applied"]["weights"] == first["weights"]
                assert control.access_events == 2
                assert control.steps == 1  # no report, no periodic step: the events decided
            finally:
                control.stop()
