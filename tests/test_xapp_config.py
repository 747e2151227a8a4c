"""The deployment configuration: what a good one gives, and one line for each kind of bad one."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from core.deployment import DeploymentError, parse_deployment
from core.scenario.e2_identities import scenario_deployment
from core.scenario.load import load_scenario
from xapp.config import SCHEMA_PATH, config_path, controls_schema_text, load_xapp_config

ROOT = Path(__file__).resolve().parents[1]


def good() -> dict[str, Any]:
    return {
        "e2": {
            "nodes": [
                {"name": "gnb_001_001_00000001", "access": "nr", "measurements": ["DRB.UEThpDl"]},
                {"name": "ap-wifi", "access": "wifi", "measurements": ["WLAN.StaThpDl"]},
            ]
        },
        "cpes": [
            {
                "id": "cpe-1",
                "accesses": {
                    "nr": {"ue_id": "gnb-du:1"},
                    "wifi": {"station_mac": "02:00:00:00:00:01", "address": "10.2.0.1"},
                },
                "agent": {"url": "http://cpe-1.example:8700"},
            },
            {"id": "cpe-2", "accesses": {"nr": {"ue_id": "gnb-du:2"}}},
        ],
        "agents": {"proxy": {"url": "https://proxy:8700"}},
    }


def test_a_good_configuration_gives_the_loop_its_cpes() -> None:
    deployment = parse_deployment(good(), "f.json")
    cpes = {c.cpe_id: c for c in deployment.domain_cpes()}
    assert cpes["cpe-1"].accesses["wifi"].e2_node_id == "ap-wifi"
    assert cpes["cpe-1"].accesses["wifi"].station_mac == "02:00:00:00:00:01"
    assert cpes["cpe-1"].accesses["wifi"].local_ip == "10.2.0.1"
    assert cpes["cpe-2"].accesses["nr"].ue_id == "gnb-du:2"


def edited(change: Any) -> dict[str, Any]:
    document = copy.deepcopy(good())
    change(document)
    return document


BAD = [
    (lambda d: d.update(colour="blue"), "colour: unknown key"),
    (lambda d: d["cpes"][0].update(agnet={}), "cpes.0.agnet: unknown key"),
    (
        lambda d: d["cpes"][1]["accesses"].update(lifi={"ue_id": "x"}),
        "cpes.1.accesses.lifi: no E2 node serves 'lifi'",
    ),
    (
        lambda d: d["cpes"][1]["accesses"]["nr"].update(ue_id="gnb-du:1"),
        "cpes.1.accesses.nr: ue_id gnb-du:1 on gnb_001_001_00000001 is already the identity "
        "of cpe-1",
    ),
    (
        lambda d: d["cpes"][1]["accesses"]["nr"].pop("ue_id"),
        "cpes.1.accesses.nr: give ue_id or station_mac",
    ),
    (
        lambda d: d["cpes"][0]["agent"].update(url="cpe-1:8700"),
        "cpes.0.agent.url: expected an http:// or https:// URL, got 'cpe-1:8700'",
    ),
    (
        lambda d: d["e2"]["nodes"][0].update(kpm_version="v2.02"),
        "e2.nodes.0.kpm_version: Input should be 'auto', 'v2.03', 'v3.00', 'flexric-v2.03' or "
        "'flexric-v3.00', got 'v2.02'",
    ),
    (
        lambda d: d["cpes"][0]["accesses"]["wifi"].update(station_mac="02:00"),
        "cpes.0.accesses.wifi.station_mac: expected a MAC address",
    ),
    (lambda d: d["cpes"].append(dict(d["cpes"][1])), "cpes: the id 'cpe-2' appears twice"),
    (lambda d: d.update(policy={"outage_stall_s": -1}), "policy.outage_stall_s:"),
    (lambda d: d.update(exploration={"step": 0}), "exploration.step:"),
    (
        lambda d: d.update(exploration={"step": 0.5, "max_step": 0.25}),
        "exploration: max_step (0.25) must be ≥ step (0.5)",
    ),
]


def test_the_outage_stall_reaches_the_policy() -> None:
    from xapp.service import live_settings

    assert live_settings(parse_deployment(good(), "f.json")).policy.outage_stall_s == 0.45
    quick = parse_deployment(edited(lambda d: d.update(policy={"outage_stall_s": 0.1})), "f.json")
    assert live_settings(quick).policy.outage_stall_s == 0.1


def test_the_push_limit_reaches_the_loop_with_the_policys_default_and_null_lifts_it() -> None:
    from xapp.policy.hysteresis import DEFAULT_MAX_PUSHES_PER_S
    from xapp.service import live_settings

    by_default = live_settings(parse_deployment(good(), "f.json")).max_pushes_per_s
    assert by_default == DEFAULT_MAX_PUSHES_PER_S == 2.0
    lifted = parse_deployment(edited(lambda d: d.update(policy={"max_pushes_per_s": None})), "f")
    assert live_settings(lifted).max_pushes_per_s is None
    limited = parse_deployment(edited(lambda d: d.update(policy={"max_pushes_per_s": 2})), "f.json")
    assert live_settings(limited).max_pushes_per_s == 2
    with pytest.raises(DeploymentError, match=r"policy\.max_pushes_per_s"):
        parse_deployment(edited(lambda d: d.update(policy={"max_pushes_per_s": 0})), "f.json")


def test_exploration_reaches_the_loop_and_can_be_switched_off() -> None:
    from xapp.service import live_settings

    default = live_settings(parse_deployment(good(), "f.json")).exploration
    assert default is not None
    assert (default.step, default.max_step, default.pause_s) == (0.25, 1.0, 10.0)
    slow = parse_deployment(edited(lambda d: d.update(exploration={"pause_s": 60})), "f.json")
    assert live_settings(slow).exploration.pause_s == 60  # type: ignore[union-attr]
    off = parse_deployment(edited(lambda d: d.update(exploration={"enabled": False})), "f.json")
    assert live_settings(off).exploration is None


@pytest.mark.parametrize(("change", "message"), BAD)
def test_a_bad_configuration_is_named_by_file_and_key(change: Any, message: str) -> None:
    with pytest.raises(DeploymentError) as caught:
        parse_deployment(edited(change), "f.json")
    assert str(caught.value).startswith(f"f.json: {message}"), str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_measurement_the_catalogue_does_not_have(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(edited(lambda d: d["e2"]["nodes"][1].update(measurements=["X.Y"]))))
    with pytest.raises(DeploymentError, match=r"c.json: e2.nodes.1.measurements.0: 'X.Y' is not"):
        load_xapp_config(path)


def test_serve_exits_2_with_one_line_on_a_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(edited(lambda d: d["cpes"][0]["agent"].update(url="nope"))))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "atsss",
            "xapp",
            "serve",
            "--config",
            str(path),
            "--e2",
            "standalone",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {path}: cpes.0.agent.url: expected an http:// or https:// URL, got 'nope'"
    ]


def test_the_descriptor_itself_is_a_configuration(tmp_path: Path, monkeypatch: Any) -> None:
    descriptor = {"name": "atsss-xapp", "version": "0.1.0", "controls": good()}
    (tmp_path / "config-file.json").write_text(json.dumps(descriptor))
    monkeypatch.delenv("CONFIG_FILE", raising=False)
    monkeypatch.setenv("XAPP_DESCRIPTOR_PATH", str(tmp_path))
    assert len(load_xapp_config(config_path(None)).cpes) == 2
    monkeypatch.setenv("CONFIG_FILE", str(tmp_path / "config-file.json"))
    assert config_path(None) == tmp_path / "config-file.json"
    monkeypatch.delenv("CONFIG_FILE")
    monkeypatch.delenv("XAPP_DESCRIPTOR_PATH")
    with pytest.raises(DeploymentError, match="give --config FILE"):
        config_path(None)


def test_the_shipped_schema_is_the_configuration_s_and_accepts_a_simulated_one() -> None:
    assert SCHEMA_PATH.read_text() == controls_schema_text(), (
        "xapp/config.schema.json is stale: atsss xapp schema > xapp/config.schema.json"
    )
    schema = json.loads(SCHEMA_PATH.read_text())
    simulated = scenario_deployment(
        load_scenario("paper-static"), cpe_agents={"cpe-1": "http://a:1"}
    )
    jsonschema.validate(simulated.model_dump(mode="json"), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(edited(lambda d: d.update(colour="blue")), schema)


def test_the_simulator_refuses_a_configuration_that_names_its_nodes_otherwise(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(good()))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "atsss",
            "e2sim",
            "run",
            "--scenario",
            "paper-static",
            "--config",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "the simulated wifi node is gnb_001_001_00000002" in done.stderr
