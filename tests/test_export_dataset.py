"""Probe results stored in SDL with their KPIs, exported in the training command's format."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.simulated import SimulatedKpis, SimulatedProber
from core.domain import Direction
from core.scenario.load import load_scenario
from core.scenario.truth import sample_truth
from models.data import TARGET, load
from models.features import build_features
from xapp.adapters.sdl_store import SdlStateStore
from xapp.estimators.probe import ProbeEstimator, ProbeSettings

DL = Direction.DOWNLINK


def collect_probe_records(store: SdlStateStore, seconds: int) -> SimulatedProber:
    """Probe-only estimation over simulated KPIs and probes of paper-static, saturating."""
    scenario = load_scenario("paper-static").cut(float(seconds))
    truth = sample_truth(scenario, DL, 1.0)
    kpis = SimulatedKpis(truth, DL, seed=1)
    prober = SimulatedProber(truth, seed=1)
    estimator = ProbeEstimator(prober, ProbeSettings(routine_gap_s=5.0), records=store)
    for k in range(1, len(truth.times_s)):
        now = float(truth.times_s[k])
        usable = truth.usable_mbps[k - 1]
        estimator.update(kpis.samples(k, now, 1.0, usable, usable), now)
    return prober


def test_probe_records_round_trip_through_sdl_and_export_for_training(
    redis_port: int, tmp_path: Path
) -> None:
    store = SdlStateStore()
    collect_probe_records(store, 30)
    records = store.load_probe_records()
    store.close()
    assert len(records) >= 12  # three paths, one probe each every 5 s at most, one at a time
    assert all(r.history for r in records)
    assert {r.outcome.request.access for r in records} == {"nr", "wifi", "lifi"}

    out = tmp_path / "field.csv"
    done = subprocess.run(
        [sys.executable, "-m", "atsss", "xapp", "export-dataset", "--out", str(out)],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "labelled rows" in done.stderr

    for access, true_mbps in (("nr", 342.0), ("wifi", 1190.0), ("lifi", 12.1)):
        frame, _ = load([out], access)
        labelled = frame[frame[TARGET].notna()]
        probes = [r for r in records if r.outcome.request.access == access]
        assert len(labelled) == len(probes)
        assert sorted(labelled[TARGET]) == pytest.approx(
            sorted(r.outcome.capacity_mbps or 0.0 for r in probes), rel=1e-3
        )
        assert np.median(labelled[TARGET]) == pytest.approx(true_mbps, rel=0.35)
        features = build_features(frame, access)
        assert features.shape[0] == len(frame)
        assert not np.isnan(features[frame[TARGET].notna().to_numpy()][:, :1]).all()


def test_export_without_records_says_so(redis_port: int, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "atsss",
            "xapp",
            "export-dataset",
            "--out",
            str(tmp_path / "x.csv"),
            "--namespace",
            "empty",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "no probe records" in done.stderr
