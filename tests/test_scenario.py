"""Scenario files: the shipped ones load, bad ones get one clear line, truth is reproducible."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from core.domain import Direction, SteeringMode
from core.scenario.load import ScenarioError, load_scenario, parse_scenario, shipped_scenarios
from core.scenario.truth import sample_truth

SHIPPED = sorted(shipped_scenarios())


def minimal(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "name": "t",
        "duration_s": 10,
        "cpes": [
            {"id": "c", "accesses": {"nr": {"downlink_mbps": 100}, "wifi": {"downlink_mbps": 50}}}
        ],
    }
    data.update(overrides)
    return data


def test_every_shipped_scenario_is_there_and_loads() -> None:
    assert set(SHIPPED) >= {
        "paper-static",
        "paper-static-lowlatency",
        "paper-dynamic",
        "paper-interruption",
        "lifi-blockage",
        "many-cpes",
        "raca-static",
        "raca-driving",
        "raca-driving-b",
    }
    for name in SHIPPED:
        scenario = load_scenario(name)
        assert scenario.description, f"{name} needs a description"


def test_many_cpes_expands_to_a_thousand_with_their_own_scales() -> None:
    scenario = load_scenario("many-cpes")
    assert len(scenario.cpes) == 1000
    assert scenario.cpes[0].cpe.cpe_id == "cpe-0000"
    assert len({c.capacity_scale["wifi"] for c in scenario.cpes}) > 900


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def problem(tmp_path: Path, data: object) -> str:
    path = write(tmp_path, data)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(str(path))
    message = str(caught.value)
    assert message.startswith(str(path))
    assert "\n" not in message
    return message


def test_unknown_key_names_the_key_and_the_allowed_ones(tmp_path: Path) -> None:
    data = minimal()
    data["cpes"][0]["accesses"]["nr"]["bandwidth"] = 5  # type: ignore[index]
    message = problem(tmp_path, data)
    assert "cpes[0].accesses.nr.bandwidth: unknown key" in message
    assert "downlink_mbps" in message


def test_negative_capacity_is_named(tmp_path: Path) -> None:
    data = minimal()
    data["cpes"][0]["accesses"]["wifi"]["downlink_mbps"] = -5  # type: ignore[index]
    message = problem(tmp_path, data)
    assert "cpes[0].accesses.wifi.downlink_mbps" in message
    assert "≥ 0" in message
    assert "-5" in message


def test_time_going_backwards_is_named(tmp_path: Path) -> None:
    data = minimal()
    data["cpes"][0]["accesses"]["nr"]["downlink_mbps"] = [[0, 1], [5, 2], [3, 4]]  # type: ignore[index]
    message = problem(tmp_path, data)
    assert "cpes[0].accesses.nr.downlink_mbps" in message
    assert "times must increase" in message


def test_an_access_the_cpe_does_not_have_is_named(tmp_path: Path) -> None:
    data = minimal()
    data["cpes"][0]["steering"] = {"mode": "ACTIVE_STANDBY", "preferred": ["lifi"]}  # type: ignore[index]
    message = problem(tmp_path, data)
    assert "cpes[0]" in message
    assert "'lifi'" in message
    assert "does not have" in message


def test_unknown_access_technology_is_named_and_can_be_added(tmp_path: Path) -> None:
    data = minimal()
    data["cpes"][0]["accesses"]["sat"] = {"downlink_mbps": 20}  # type: ignore[index]
    message = problem(tmp_path, data)
    assert "cpes[0].accesses.sat: unknown access 'sat'" in message
    data["access_technologies"] = [{"name": "sat", "label": "Satellite"}]
    scenario = parse_scenario(data)
    assert scenario.access_names == ("nr", "wifi", "sat")


def test_other_mistakes_are_named(tmp_path: Path) -> None:
    assert "duration_s: required key is missing" in problem(tmp_path, {"name": "x", "cpes": []})
    bad_mode = minimal()
    bad_mode["cpes"][0]["steering"] = {"mode": "FASTEST"}  # type: ignore[index]
    assert "cpes[0].steering.mode" in problem(tmp_path, bad_mode)
    many = minimal()
    many["cpes"][0]["count"] = 3  # type: ignore[index]
    assert "{index}" in problem(tmp_path, many)


def test_not_yaml_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(str(path))
    with pytest.raises(ScenarioError, match="no such file"):
        load_scenario(str(tmp_path / "missing.yaml"))


def test_cli_reports_a_bad_scenario_in_one_line_with_exit_code_2(tmp_path: Path) -> None:
    data = minimal()
    data["cpes"][0]["accesses"]["nr"]["downlink_mbps"] = -1  # type: ignore[index]
    path = write(tmp_path, data)
    for args in (["scenario", "check", str(path)], ["bench", "loop", "--scenario", str(path)]):
        run = subprocess.run(
            [sys.executable, "-m", "atsss", *args], capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 2, run.stderr
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1, run.stderr
        assert lines[0].startswith(f"error: {path}: cpes[0].accesses.nr.downlink_mbps")
        assert "Traceback" not in run.stderr


def test_steering_is_read() -> None:
    data = minimal()
    data["cpes"][0]["steering"] = {  # type: ignore[index]
        "mode": "PRIORITY_BASED",
        "preferred": ["wifi"],
        "thresholds": {"rtt_ms": 40},
    }
    rule = parse_scenario(data).cpes[0].rule
    assert rule.mode is SteeringMode.PRIORITY_BASED
    assert rule.preferred == ("wifi",)
    assert rule.thresholds.rtt_ms == 40


def test_truth_follows_points_periodic_outages_and_is_reproducible() -> None:
    data = minimal(duration_s=30)
    nr = data["cpes"][0]["accesses"]["nr"]  # type: ignore[index]
    nr["downlink_mbps"] = [[0, 100], [10, 200]]
    nr["availability"] = {"periodic": {"up_s": 10, "down_s": 5}}
    wifi = data["cpes"][0]["accesses"]["wifi"]  # type: ignore[index]
    wifi["downlink_mbps"] = {"value": 50, "jitter": {"std_ratio": 0.2, "correlation_s": 1}}
    wifi["availability"] = {"random": {"mean_up_s": 3, "mean_down_s": 1}}
    scenario = parse_scenario(data)
    truth = sample_truth(scenario, Direction.DOWNLINK, 0.1)
    assert truth.capacity_mbps.shape == (300, 1, 2)
    assert truth.capacity_mbps[50, 0, 0] == pytest.approx(150.0)
    assert truth.capacity_mbps[200, 0, 0] == pytest.approx(200.0)
    assert truth.available[:100, 0, 0].all()
    assert not truth.available[100:150, 0, 0].any()
    assert truth.available[150:250, 0, 0].all()
    wifi_caps = truth.capacity_mbps[:, 0, 1]
    assert 0.05 < wifi_caps.std() / wifi_caps.mean() < 0.4
    assert 0.4 < truth.available[:, 0, 1].mean() < 0.95
    again = sample_truth(parse_scenario(data), Direction.DOWNLINK, 0.1)
    assert np.array_equal(truth.capacity_mbps, again.capacity_mbps)
    assert np.array_equal(truth.available, again.available)


def test_uplink_needs_uplink_figures() -> None:
    scenario = parse_scenario(minimal())
    with pytest.raises(ScenarioError, match="uplink_mbps"):
        sample_truth(scenario, Direction.UPLINK, 0.1)
    uplink = sample_truth(load_scenario("paper-static"), Direction.UPLINK, 0.5)
    assert uplink.capacity_mbps[0, 0].tolist() == [90.0, 900.0, 10.0]


def nr_capacity(value: object) -> dict[str, object]:
    return minimal(cpes=[{"id": "c", "accesses": {"nr": {"downlink_mbps": value}}}])


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_refused(tmp_path: Path, value: float) -> None:
    assert "finite" in problem(tmp_path, nr_capacity(value))
    assert "finite" in problem(tmp_path, minimal(duration_s=value))


def test_what_a_scenario_may_ask_for_is_bounded(tmp_path: Path) -> None:
    many = minimal(
        cpes=[{"id": "c-{index}", "count": 100_000, "accesses": {"nr": {"downlink_mbps": 1}}}]
    )
    assert "at most 10000" in problem(tmp_path, many)
    long = minimal(
        duration_s=86_400,
        cpes=[{"id": "c-{index}", "count": 1000, "accesses": {"nr": {"downlink_mbps": 1}}}],
    )
    assert "CPE-seconds" in problem(tmp_path, long)


def test_hostile_yaml_gets_one_short_line_quickly(tmp_path: Path) -> None:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(9)
    )
    path = tmp_path / "laughs.yaml"
    path.write_text(laughs)
    with pytest.raises(ScenarioError, match="aliases are expanded"):
        load_scenario(str(path))
    path.write_bytes(b"\xff\xfe name: t")
    with pytest.raises(ScenarioError, match=r"not UTF-8 text \(byte 0\)"):
        load_scenario(str(path))
    path.write_text("a: " + "[" * 5000 + "]" * 5000)
    with pytest.raises(ScenarioError, match="nested too deeply"):
        load_scenario(str(path))
    message = problem(tmp_path, minimal(name=["x" * 1000] * 1000))
    assert len(message) < 500


TRACE = (
    "Timestamp,NetworkMode,State,DL_bitrate,CQI,SNR,RSRP\n"
    "2020.01.01_10.00.00,LTE,D,5000,7,3,-110\n"
    "2020.01.01_10.00.01,5G,D,100000,12,15,-90\n"
    "2020.01.01_10.00.02,5G,D,-,12,15,-90\n"
    "2020.01.01_10.00.03,5G,I,0,12,15,-90\n"
    "2020.01.01_10.00.04,5G,D,50000,9,8,-97\n"
    "2020.01.01_10.00.04,5G,D,60000,9,8,-97\n"
    "2020.01.01_10.00.05,5G,D,200000,15,25,-80\n"
)


def measured_scenario(tmp_path: Path, **measured: object) -> dict[str, object]:
    (tmp_path / "trace.csv").write_text(TRACE)
    spec = {"file": "trace.csv", "column": "DL_bitrate", "unit": "kbit/s"} | measured
    return minimal(
        duration_s=6,
        cpes=[
            {
                "id": "c",
                "accesses": {
                    "nr": {
                        "downlink_mbps": {"measured": spec},
                        "reported": {
                            "cqi": {"measured": spec | {"column": "CQI", "unit": "as-is"}},
                            "sinr_db": {"measured": spec | {"column": "SNR", "unit": "as-is"}},
                        },
                    },
                    "wifi": {"downlink_mbps": 50},
                },
            }
        ],
    )


def test_a_series_read_from_a_measurement_file(tmp_path: Path) -> None:
    data = measured_scenario(tmp_path, where={"NetworkMode": "5G", "State": "D"}, start_s=1)
    scenario = parse_scenario(data, "t.yaml", base=tmp_path)
    nr = scenario.cpes[0].paths["nr"]
    # the LTE, idle and empty rows are out, of a repeated second the last row stands, kbit/s
    # become Mbit/s, and t = 0 is one second into the trace
    assert nr.downlink_mbps.points == [(0.0, 100.0), (3.0, 60.0), (4.0, 200.0)]
    assert nr.downlink_mbps.interpolation == "step"
    truth = sample_truth(scenario, Direction.DOWNLINK, 1.0)
    assert truth.capacity_mbps[:, 0, 0].tolist() == [100, 100, 100, 60, 200, 200]


def test_the_simulated_node_reports_the_measured_radio(tmp_path: Path) -> None:
    from e2sim.world import SimWorld

    data = measured_scenario(tmp_path, where={"NetworkMode": "5G", "State": "D"}, start_s=1)
    world = SimWorld(parse_scenario(data, "t.yaml", base=tmp_path))
    report = world.report(world.truth(4, "nr"), 4)
    # CQI 15 and SINR 25 dB as measured, not what inverting 200 Mbit/s would give
    assert int(report.labels["CARR.WBCQIDist"][0]) == 15 + 1
    assert float(report.values["L1M.SS-SINR"][0]) == 25.0
    report = world.report(world.truth(3, "nr"), 3)
    assert int(report.labels["CARR.WBCQIDist"][0]) == 9 + 1


@pytest.mark.parametrize(
    ("measured", "expected"),
    [
        ({"column": "DL_rate"}, "has no column 'DL_rate'"),
        ({"file": "nowhere.csv"}, "nowhere.csv not found (looked in"),
        ({"unit": "furlongs"}, "measured.unit"),
        ({"time_format": "%H:%M"}, "reads as '%H:%M'"),
        ({"where": {"State": "X"}}, "no row of"),
    ],
)
def test_a_bad_measured_series_is_named(
    tmp_path: Path, measured: dict[str, object], expected: str
) -> None:
    data = measured_scenario(tmp_path, **measured)
    with pytest.raises(ScenarioError, match=r"cpes\[0\]\.accesses\.nr\.downlink_mbps") as error:
        parse_scenario(data, "t.yaml", base=tmp_path)
    assert expected in str(error.value)


def test_a_shipped_scenario_without_its_trace_is_named_listed_and_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine without the real 5G dataset: the raca-* scenarios say what they need, `scenario
    list` still lists everything, and `bench loop` over every shipped scenario skips them."""
    from typer.testing import CliRunner

    import core.scenario.measured as measured
    from atsss.cli import app
    from core.scenario.load import MeasurementMissingError

    monkeypatch.setattr(measured, "SHARED_DATASETS", tmp_path)
    monkeypatch.setenv("ATSSS_DATASETS", str(tmp_path))
    with pytest.raises(MeasurementMissingError, match="ATSSS_DATASETS"):
        load_scenario("raca-static")
    runner = CliRunner()
    listed = runner.invoke(app, ["scenario", "list"])
    assert listed.exit_code == 0, listed.output
    flat = " ".join(listed.output.split())
    assert "raca-static │ no" in flat
    assert "paper-static │ yes" in flat
    assert "needs" in flat
    assert "raca5g-download/" in flat
    run = runner.invoke(app, ["bench", "loop", "--duration", "2", "--policy", "oracle", "--json"])
    assert run.exit_code == 0, run.output
    assert "skipped raca-static" in " ".join(run.output.split())
    assert '"scenario": "paper-static"' in run.output
    # asked for by name: exit 1 (this machine lacks something) and one line naming the trace,
    # the dataset and where to get it
    asked = runner.invoke(app, ["bench", "loop", "--scenario", "raca-driving", "--duration", "2"])
    assert asked.exit_code == 1
    (line,) = asked.output.strip().splitlines()
    assert "raca5g-download/driving/B_2019.12.16_14.23.32.csv not found" in line
    assert "Raca et al. 5G dataset" in line
    assert "https://github.com/uccmisl/5Gdataset" in line


def test_a_scenarios_variability_is_one_world_whatever_grid_reads_it() -> None:
    """1 s and 100 ms reports (and `bench loop`'s 10 ms steps) face the same fluctuations: a
    coarse grid reads the mean of the world's 100 ms ticks, a fine one reads each tick held."""
    scenario = load_scenario("paper-dynamic")  # NR: 342 Mbit/s with 3 % jitter over 5 s
    nr = scenario.access_names.index("nr")
    tenth = sample_truth(scenario, Direction.DOWNLINK, 0.1).capacity_mbps[:, 0, nr]
    second = sample_truth(scenario, Direction.DOWNLINK, 1.0).capacity_mbps[:, 0, nr]
    hundredth = sample_truth(scenario, Direction.DOWNLINK, 0.01).capacity_mbps[:, 0, nr]
    assert tenth.std() > 0.01 * 342  # the jitter is there to be seen
    np.testing.assert_allclose(second, tenth.reshape(-1, 10).mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(hundredth.reshape(-1, 10), np.repeat(tenth[:, None], 10, axis=1))
    # A grid that is not a multiple of the clock still reads each step's mean.
    quarter = sample_truth(scenario, Direction.DOWNLINK, 0.25).capacity_mbps[:, 0, nr]
    np.testing.assert_allclose(quarter.reshape(-1, 4).mean(axis=1), second, rtol=1e-12)
