"""The live simulator's traffic follows the weights the agents hold (e2sim/traffic.py); a
dry-run agent probes from the simulator's truth; the simulator and the evaluators take one
truth (e2sim.world.scenario_truth)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from pydantic import ValidationError

from agent.api import create_app
from agent.backends.dry_run import DryRunBackend
from agent.config import AgentConfig
from agent.service import WeightService
from core.deployment import load_deployment
from core.domain import Direction
from core.scenario.load import load_scenario
from core.scenario.truth import sample_truth
from e2sim.traffic import AgentWeights, WeightedTraffic, WeightTimeline, utilisation_under_weights
from e2sim.world import SimWorld, scenario_truth
from tests.servers import uvicorn_thread

ACCESSES = ("nr", "wifi", "lifi")
TOKEN = "traffic-token"


def shares(weights: dict[str, int] | None, capacity: list[float], up: list[bool]) -> list[float]:
    found = utilisation_under_weights(
        [weights], ACCESSES, np.array([capacity]), np.array([up], dtype=bool)
    )
    return [round(float(v), 4) for v in found[0]]


def test_weights_matching_the_capacities_saturate_every_path() -> None:
    assert shares({"nr": 1, "wifi": 3, "lifi": 0}, [100, 300, 10], [True] * 3) == [1, 1, 0]


def test_the_slowest_path_per_weight_sets_what_every_path_carries() -> None:
    # round rate min(100/1, 300/1, 10/1) = 10: each path carries 10
    assert shares(None, [100, 300, 10], [True] * 3) == [0.1, 0.0333, 1.0]
    assert shares({"nr": 1, "wifi": 1, "lifi": 0}, [100, 300, 10], [True] * 3) == [1, 0.3333, 0]


def test_a_connection_whose_weighted_paths_are_down_falls_back_to_the_rest() -> None:
    # weighted wifi is down: MPTCP carries on over nr and lifi, round robin
    assert shares({"nr": 0, "wifi": 5, "lifi": 0}, [100, 300, 10], [True, False, True]) == [
        0.1,
        0.0,
        1.0,
    ]


def test_a_push_within_the_period_counts_for_the_part_after_it() -> None:
    timeline = WeightTimeline()
    timeline.record("cpe-1", Direction.UPLINK, 100.5, {"nr": 1, "wifi": 3, "lifi": 0})
    traffic = WeightedTraffic(timeline, ["cpe-1"], ACCESSES)
    found = traffic.utilisation(
        Direction.UPLINK,
        100.0,
        1.0,
        np.array([[100.0, 300.0, 10.0]]),
        np.ones((1, 3), dtype=bool),
        np.ones((1, 3), dtype=bool),
    )
    # first half round robin (nr 0.1, wifi 1/30), second half matched (1, 1)
    assert found[0, 0] == pytest.approx(0.55)
    assert found[0, 1] == pytest.approx((1 / 30 + 1) / 2)
    assert found[0, 2] == pytest.approx(0.5)


@pytest.fixture
def dry_run_agent(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A CPE agent on the dry-run backend under uvicorn, probing from ``truth.jsonl``."""
    (tmp_path / "token").write_text(TOKEN + "\n")
    truth = tmp_path / "truth.jsonl"
    config = AgentConfig.model_validate(
        {
            "role": "cpe",
            "cpe_id": "cpe-1",
            "accesses": {a: {"interface": f"{a}0", "address": "127.0.0.1"} for a in ACCESSES},
            "state_file": str(tmp_path / "state.json"),
            "backend": "dry-run",
            "watch_carrier": False,
            "probe_truth": str(truth),
        }
    )
    app = create_app(WeightService(config, DryRunBackend()), TOKEN)
    with uvicorn_thread(app) as port:
        yield f"http://127.0.0.1:{port}", tmp_path


def test_the_weights_an_agent_holds_are_read_into_the_timeline(
    dry_run_agent: tuple[str, Path],
) -> None:
    url, folder = dry_run_agent
    headers = {"Authorization": f"Bearer {TOKEN}"}
    deployment_file = folder / "deployment.json"
    deployment_file.write_text(
        json.dumps(
            {
                "e2": {"nodes": [{"name": "gnb", "access": "nr", "measurements": ["DRB.UEThpUl"]}]},
                "cpes": [
                    {"id": "cpe-1", "accesses": {"nr": {"ue_id": "1"}}, "agent": {"url": url}}
                ],
                "agents": {"token_file": str(folder / "token")},
            }
        )
    )
    held = AgentWeights(load_deployment(deployment_file), interval_s=0.02)
    held.start()
    try:
        before = time.time()
        answer = httpx.put(
            f"{url}/v1/weights/uplink",
            json={"weights": {"nr": 2, "wifi": 5, "lifi": 1}, "sequence": 1},
            headers=headers,
        )
        assert answer.status_code == 200, answer.text
        deadline = time.monotonic() + 10
        while held.weights_at("cpe-1", Direction.UPLINK, time.time()) is None:
            assert time.monotonic() < deadline, "the agent's set never reached the timeline"
            time.sleep(0.02)
        assert held.weights_at("cpe-1", Direction.UPLINK, time.time()) == {
            "nr": 2,
            "wifi": 5,
            "lifi": 1,
        }
        # placed at the time the agent applied it, not when it was read
        assert held.weights_at("cpe-1", Direction.UPLINK, before - 1) is None
        # the CPE's agent serves its downlink too where there is no proxy: nothing held there
        assert held.weights_at("cpe-1", Direction.DOWNLINK, time.time()) is None
    finally:
        held.close()


def _truth_line(unix_s: float, access: str, dl: float, ul: float, up: bool) -> str:
    return json.dumps(
        {
            "time_s": 0.0,
            "unix_s": unix_s,
            "cpe_id": "cpe-1",
            "access": access,
            "capacity_dl_mbps": dl,
            "capacity_ul_mbps": ul,
            "available": up,
        }
    )


def test_a_dry_run_probe_measures_the_truth_over_its_seconds(
    dry_run_agent: tuple[str, Path],
) -> None:
    url, folder = dry_run_agent
    now = time.time()
    lines = [_truth_line(now - 5 + k, "nr", 300.0 + k, 60.0, True) for k in range(10)]
    lines += [_truth_line(now - 5 + k, "lifi", 10.0, 5.0, k < 3) for k in range(10)]
    (folder / "truth.jsonl").write_text("\n".join(lines) + "\n")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    downlink = httpx.post(
        f"{url}/v1/probes",
        json={"access": "nr", "seconds": 0.2, "reverse": True},
        headers=headers,
        timeout=10,
    )
    assert downlink.status_code == 200, downlink.text
    probe = downlink.json()["probe"]
    assert probe["direction"] == "downlink"
    assert probe["method"] == "truth"
    assert 304.0 <= probe["path_mbps"] <= 306.0  # the periods the probe's seconds fall in
    uplink = httpx.post(
        f"{url}/v1/probes", json={"access": "nr", "seconds": 0.1}, headers=headers, timeout=10
    )
    assert uplink.json()["probe"]["path_mbps"] == pytest.approx(60.0)
    down = httpx.post(
        f"{url}/v1/probes", json={"access": "lifi", "seconds": 0.1}, headers=headers, timeout=10
    )
    assert down.status_code == 502
    assert "no route" in down.json()["detail"]


def test_probe_truth_is_for_the_dry_run_backend_only() -> None:
    with pytest.raises(ValidationError, match="dry-run backend only"):
        AgentConfig.model_validate(
            {
                "role": "cpe",
                "accesses": {"nr": {"interface": "nr0", "address": "127.0.0.1"}},
                "backend": "wrr",
                "probe_truth": "/tmp/truth.jsonl",
            }
        )


def test_the_evaluators_take_a_radio_path_s_capacity_as_the_simulator_does() -> None:
    """paper-dynamic's Wi-Fi has a radio section (the AP walked away): its capacity is the
    radio model's everywhere, not the series beside it."""
    scenario = load_scenario("paper-dynamic").cut(60)
    world = SimWorld(scenario, 1.0)
    wifi = scenario.access_names.index("wifi")
    for direction, simulated in (
        (Direction.DOWNLINK, world.downlink.capacity_mbps),
        (Direction.UPLINK, world.uplink_mbps),
    ):
        evaluated = scenario_truth(scenario, direction, 1.0).capacity_mbps
        assert np.allclose(evaluated[:, :, wifi], simulated[:, :, wifi])
    series = sample_truth(scenario, Direction.DOWNLINK, 1.0).capacity_mbps[:, 0, wifi]
    radio = world.downlink.capacity_mbps[:, 0, wifi]
    assert abs(series[50] - radio[50]) > 100  # the two differ: the radio one is the truth
