"""End to end: `atsss xapp run` and `atsss e2sim run` as real processes over the E2 stream."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from core.domain import Direction, KpiSample
from tests.servers import free_port
from xapp.estimators.kpi import estimate_from_sample

SCENARIO = """\
version: 1
name: three-cpes
description: Three CPEs with all three accesses, for the end-to-end test.
duration_s: 8
seed: 3
cpes:
  - id: cpe-{index}
    count: 3
    accesses:
      nr: {downlink_mbps: 342, uplink_mbps: 56, scale: [0.5, 1.0]}
      wifi:
        downlink_mbps: 1190
        uplink_mbps: 900
        scale: [0.2, 1.0]
        availability: {outages: [[5, 7]]}
      lifi:
        downlink_mbps: 12.1
        uplink_mbps: 6
        availability: {outages: [[3, 5]]}
"""


def atsss(*args: str) -> list[str]:
    return [sys.executable, "-m", "atsss", *args]


def kpi_sample(written: dict[str, Any], direction: Direction) -> KpiSample:
    """A sample as `xapp run --samples` wrote it, back into the estimators' form."""
    return KpiSample(
        written["cpe_id"],
        written["access"],
        direction,
        written["time_s"],
        written["period_s"],
        throughput_mbps=written["throughput_mbps"],
        measurements=written["measurements"],
    )


@pytest.mark.parametrize("version", ["v3.00", "v2.03"])
def test_simulator_and_standalone_xapp(tmp_path: Path, version: str) -> None:
    scenario = tmp_path / "three.yaml"
    scenario.write_text(SCENARIO)
    port = free_port()
    samples_file, truth_file = tmp_path / "samples.jsonl", tmp_path / "truth.jsonl"
    xapp = subprocess.Popen(
        atsss(
            "xapp",
            "run",
            "--scenario",
            str(scenario),
            "--listen",
            f"127.0.0.1:{port}",
            "--duration",
            "40",
            "--samples",
            str(samples_file),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:  # wait until it listens
            line = xapp.stderr.readline() if xapp.stderr else ""
            if "listening for E2 nodes" in line:
                break
            assert time.monotonic() < deadline, line
            assert xapp.poll() is None, line
        sim = subprocess.run(
            atsss(
                "e2sim",
                "run",
                "--scenario",
                str(scenario),
                "--connect",
                f"127.0.0.1:{port}",
                "--speed",
                "4",
                "--kpm-version",
                version,
                "--truth",
                str(truth_file),
                "--json",
            ),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert sim.returncode == 0, sim.stderr
        summary = json.loads(sim.stdout)
        assert summary["subscribed"] == {"nr": True, "wifi": True, "lifi": True}
        assert summary["indications"] == 8 * 3
        time.sleep(1.0)
    finally:
        xapp.terminate()
        out, _ = xapp.communicate(timeout=30)
    assert xapp.returncode == 0
    received = json.loads(out.strip().splitlines()[-1])
    assert received["cpes"] == 3
    assert set(received["by_access"]) == {"nr", "wifi", "lifi"}

    truth = defaultdict(list)
    for line in truth_file.read_text().splitlines():
        row = json.loads(line)
        truth[(row["cpe_id"], row["access"])].append(row)
    got = defaultdict(list)
    for line in samples_file.read_text().splitlines():
        sample = json.loads(line)
        if sample["direction"] == "downlink":
            got[(sample["cpe_id"], sample["access"])].append(sample)
    assert set(got) == {(f"cpe-{i}", a) for i in range(3) for a in ("nr", "wifi", "lifi")}
    for key, samples in got.items():
        assert len(samples) == 8, key
        expected = [r["capacity_dl_mbps"] if r["available"] else 0.0 for r in truth[key]]
        measured = [s["throughput_mbps"] for s in samples]
        assert measured == pytest.approx(expected, rel=0.1, abs=0.01), key
    lifi_states = [s["available"] for s in got[("cpe-0", "lifi")]]
    assert lifi_states == [True, True, True, False, False, True, True, True]
    # A Wi-Fi station whose link is down has no radio measurements (noValue over E2), so the
    # KPI estimator cannot mistake the lowest PHY rate for headroom on a dead path.
    for i in range(3):
        for sample, row in zip(got[(f"cpe-{i}", "wifi")], truth[(f"cpe-{i}", "wifi")], strict=True):
            assert ("WLAN.StaPhyRateDl" in sample["measurements"]) == row["available"]
            estimate = estimate_from_sample(kpi_sample(sample, Direction.DOWNLINK))
            assert estimate is not None
            assert estimate.lower_bound == (not row["available"])
    # NR's uplink has PRB counters of its own over E2: the KPI estimator reads its capacity,
    # not only the lower bound its throughput is.
    uplink = defaultdict(list)
    for line in samples_file.read_text().splitlines():
        sample = json.loads(line)
        if sample["direction"] == "uplink" and sample["access"] == "nr":
            uplink[sample["cpe_id"]].append(sample)
    for i in range(3):
        for sample, row in zip(uplink[f"cpe-{i}"], truth[(f"cpe-{i}", "nr")], strict=True):
            assert "RRU.PrbUsedUl" in sample["measurements"]
            estimate = estimate_from_sample(kpi_sample(sample, Direction.UPLINK))
            assert estimate is not None
            assert not estimate.lower_bound
            assert estimate.capacity_mbps == pytest.approx(row["capacity_ul_mbps"], rel=0.1)
