"""The simulator's world, nodes and dataset, short of the end-to-end run."""

from __future__ import annotations

import csv
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from core.domain import Direction, KpiSample
from core.scenario.e2_identities import e2_cpes, node_name
from core.scenario.load import ScenarioError, load_scenario, parse_scenario
from core.standards import nr as nr_standard
from e2sim.kpis import NrTables, nr_report
from e2sim.node import SimulatedNode
from e2sim.world import SimWorld
from xapp.adapters.memory_store import MemoryStateStore
from xapp.e2.config import E2NodeConfig, E2Settings
from xapp.e2.indications import IndicationProcessor
from xapp.e2.stream import StandaloneE2Termination

RADIO = """\
version: 1
name: radio-walk
description: Radio conditions instead of capacities.
duration_s: 5
seed: 1
cpes:
  - id: cpe-1
    accesses:
      nr:
        downlink_mbps: 1
        radio: {sinr_db: [[0, 30], [4, 5]], cell_load: 0.5}
      wifi:
        downlink_mbps: 1
        radio: {distance_m: [[0, 1], [4, 40]]}
      lifi:
        downlink_mbps: 1
        radio: {sinr_db: 2.2}
"""


def scenario_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return path


def test_truth_matches_the_evaluators_and_kpis_agree_with_it() -> None:
    world = SimWorld(load_scenario("paper-static"))
    for access, expected in (("nr", 342.0), ("wifi", 1190.0), ("lifi", 12.1)):
        truth = world.truth(3, access)
        assert truth.capacity_dl_mbps[0] == pytest.approx(expected, rel=0.01)
        report = world.report(truth, 3)
        throughput = {"nr": "DRB.UEThpDl", "wifi": "WLAN.StaThpDl", "lifi": "LIFI.StaThpDl"}[access]
        assert report.values[throughput][0] / 1000 == pytest.approx(expected, rel=0.1)
    nr = world.report(world.truth(3, "nr"), 3)
    assert nr.labels["CARR.WBCQIDist"][0] == 16  # bin 16 = CQI 15 at 342 Mbit/s
    wifi = world.report(world.truth(3, "wifi"), 3)
    assert wifi.values["WLAN.StaMcsDl"][0] == 11
    assert wifi.values["WLAN.StaNssDl"][0] == 2


def test_radio_conditions_drive_the_capacity(tmp_path: Path) -> None:
    world = SimWorld(load_scenario(str(scenario_file(tmp_path, RADIO))))
    nr = [world.truth(t, "nr").capacity_dl_mbps[0] for t in range(5)]
    wifi = [world.truth(t, "wifi").capacity_dl_mbps[0] for t in range(5)]
    assert nr[0] == pytest.approx(171.0, rel=0.01)  # 342 at CQI 15, half the cell busy
    assert nr == sorted(nr, reverse=True)
    assert wifi[0] == pytest.approx(1190.0, rel=0.01)
    assert wifi[-1] < 0.2 * wifi[0]
    assert world.truth(0, "lifi").capacity_dl_mbps[0] == pytest.approx(12.1, rel=0.05)


def test_impossible_radio_state_names_the_path(tmp_path: Path) -> None:
    text = RADIO.replace("radio: {sinr_db: 2.2}", "radio: {sinr_db: -40}")
    with pytest.raises(ScenarioError, match=r"cpe-1\.accesses\.lifi\.radio: LiFi SNR -40 dB"):
        SimWorld(load_scenario(str(scenario_file(tmp_path, text))))
    negative = RADIO.replace("distance_m: [[0, 1], [4, 40]]", "distance_m: -3")
    with pytest.raises(ScenarioError, match="distance_m"):
        load_scenario(str(scenario_file(tmp_path, negative)))


def test_cell_level_subscription_gets_format1() -> None:
    scenario = load_scenario("paper-static")
    world = SimWorld(scenario)
    names = ("RRU.PrbAvailDl", "RRU.PrbTotDl", "DRB.UEThpDl")
    settings = E2Settings(
        nodes=(E2NodeConfig(node=node_name("nr"), access="nr", measurements=names, report="cell"),)
    )
    samples: list[KpiSample] = []
    lock = threading.Condition()

    def received(batch: list[KpiSample]) -> None:
        with lock:
            samples.extend(batch)
            lock.notify_all()

    processor = IndicationProcessor(e2_cpes(scenario))
    termination = StandaloneE2Termination(settings, processor, received, MemoryStateStore())  # type: ignore[arg-type]
    termination.start()
    node = SimulatedNode("nr", termination.address, [1])
    try:
        node.connect()
        active = node.client.wait_subscribed()
        assert active is not None
        assert active.style == 1
        assert node.send(time.time(), 1000, world.report(world.truth(0, "nr"), 0))
        with lock:
            lock.wait_for(lambda: samples, 10)
    finally:
        node.close()
        termination.stop()
    downlink = next(s for s in samples if s.direction == Direction.DOWNLINK)
    assert downlink.measurements["RRU.PrbAvailDl"] == 133.0
    assert downlink.throughput_mbps == pytest.approx(342.0, rel=0.1)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_dataset_command(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"data{suffix}"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "atsss",
            "e2sim",
            "dataset",
            "--scenario",
            "paper-dynamic",
            "--duration",
            "20",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "wrote 60 rows" in result.stdout
    if suffix == ".csv":
        with out.open() as handle:
            rows = list(csv.DictReader(handle))
        columns = set(rows[0])
    else:
        table = pq.read_table(out)
        rows = table.to_pylist()
        columns = set(table.column_names)
    assert {
        "time_s",
        "cpe_id",
        "access",
        "capacity_dl_mbps",
        "DRB.UEThpDl",
        "WLAN.StaAirtime",
        "LIFI.LinkState",
    } <= columns
    wifi = [float(r["capacity_dl_mbps"]) for r in rows if r["access"] == "wifi"]
    thp = [float(r["WLAN.StaThpDl"]) / 1000 for r in rows if r["access"] == "wifi"]
    assert np.allclose(thp, wifi, rtol=0.1)
    assert len(set(wifi)) >= 3  # the reconstructed walk changes the Wi-Fi capacity


def test_e2sim_bad_input_is_one_line() -> None:
    for args, expected in [
        (("e2sim", "run", "--scenario", "no-such"), "no-such"),
        (
            ("e2sim", "run", "--scenario", "paper-static", "--kpm-version", "v9"),
            "unknown E2SM-KPM version",
        ),
        (("e2sim", "run", "--scenario", "paper-static", "--connect", "nowhere"), "HOST:PORT"),
        (
            ("e2sim", "run", "--scenario", "paper-static", "--connect", "127.0.0.1:1"),
            "cannot reach the xApp",
        ),
        (("e2sim", "dataset", "--scenario", "paper-static", "--out", "x.txt"), ".csv or .parquet"),
        (
            ("e2sim", "run", "--scenario", "paper-static", "--traffic-follows-agents"),
            "needs --config",
        ),
    ]:
        result = subprocess.run(
            [sys.executable, "-m", "atsss", *args], capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("error: "), result.stderr
        assert expected in result.stderr, result.stderr


def test_runner_honours_the_subscribed_period_and_the_reporting_delay() -> None:
    from e2sim.runner import SimRunner
    from xapp.standalone import e2_node_configs

    scenario = load_scenario("paper-static")
    settings = E2Settings(nodes=e2_node_configs(("nr", "wifi", "lifi"), report_period_ms=2000))
    termination = StandaloneE2Termination(
        settings, IndicationProcessor(e2_cpes(scenario)), lambda batch: None, MemoryStateStore()
    )
    termination.start()
    try:
        fast = SimRunner(SimWorld(scenario), termination.address, speed=0).run(max_ticks=6)
        assert fast.indications == 3 * 3  # every second period, three nodes
        delayed = SimRunner(
            SimWorld(scenario), termination.address, speed=1, report_delay_s=0.3
        ).run(max_ticks=2)
        assert delayed.indications == 3
        assert delayed.wall_s >= 2.3
    finally:
        termination.stop()


def test_own_cells_report_the_rest_of_the_channel_as_others_load() -> None:
    """A station whose capacity needs 70 % of the channel: alone in its cell the node reported
    a 70 %-busy channel, so the idle 30 % read as capacity it never had. With own cells (how
    `bench loop` reports, and the models' training data now) the rest is others' load, and the
    reference the model features compute is the capacity, whatever the station carried."""
    from models.data import load
    from models.features import REFERENCE, build_features, feature_names

    scenario = parse_scenario(
        {
            "name": "w",
            "duration_s": 10,
            "cpes": [{"id": "c", "accesses": {"wifi": {"downlink_mbps": 150}}}],
        }
    )
    for utilisation in (1.0, 0.4):
        world = SimWorld(scenario, utilisation=utilisation, own_cells=True)
        report = world.report(world.truth(3, "wifi"), 3)
        used = float(report.values["WLAN.StaAirtime"][0])
        share = used / (100 * utilisation)  # of the channel its capacity needs
        assert share < 0.8
        busy = float(report.values["WLAN.ChannelUtilization"][0])
        assert busy == pytest.approx(used + 100 * (1 - share), abs=0.5)
        shared = SimWorld(scenario, utilisation=utilisation).report(world.truth(3, "wifi"), 3)
        assert float(shared.values["WLAN.ChannelUtilization"][0]) == pytest.approx(used, abs=0.5)
    path = Path(__file__).parent / "_own_cells.csv"
    try:
        from e2sim.dataset import write_dataset

        write_dataset(SimWorld(scenario, utilisation=0.4, own_cells=True), path)
        frame, _ = load([path], "wifi")
        reference = build_features(frame, "wifi")[:, feature_names("wifi").index(REFERENCE)]
        assert reference[1:] == pytest.approx(frame["target_mbps"].to_numpy()[:-1], rel=0.06)
    finally:
        path.unlink(missing_ok=True)


def test_nr_uplink_prbs_follow_the_uplink_and_only_served_ues_have_a_count() -> None:
    """A thousand stations on one gNB: what each used of the uplink PRBs follows its uplink
    capacity and what it carried; a station whose link is down is not served, so its PRB counts
    go out as noValue while the cell's counters stay."""

    tables = NrTables(nr_standard.NrCarrier())
    rng = np.random.default_rng(3)
    count = 1000
    capacity_ul = rng.uniform(2.0, 50.0, count)
    available = rng.uniform(size=count) > 0.1
    report = nr_report(
        tables,
        np.full(count, 200.0),
        capacity_ul,
        available,
        np.full(count, 20.0),
        1.0,
        rng,
        np.arange(count),
        True,
        utilisation_ul=0.5,
    )
    used = report.values["RRU.PrbUsedUl"]
    total = report.values["RRU.PrbTotUl"] / 100 * report.values["RRU.PrbAvailUl"]
    up = np.flatnonzero(available)
    # Each station alone in its cell: the PRBs it used carried half its capacity, and the free
    # ones would carry the other half at the same rate per PRB.
    carried = report.values["DRB.UEThpUl"][up] / 1000
    free = report.values["RRU.PrbAvailUl"][up] - (total[up] - used[up])
    estimate = carried * free / np.maximum(used[up], 1)
    assert np.median(np.abs(estimate / capacity_ul[up] - 1)) < 0.05
    down = int(np.flatnonzero(~available)[0])
    assert not report.measured("RRU.PrbUsedUl", down)
    assert not report.measured("RRU.PrbUsedDl", down)
    assert report.measured("RRU.PrbAvailUl", down)
    assert report.measured("RRU.PrbTotUl", down)
    assert report.measured("RRU.PrbUsedUl", int(up[0]))
