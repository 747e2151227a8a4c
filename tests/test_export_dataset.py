"""Probe results stored in SDL with their KPIs, exported in the training command's format."""

from __future__ import annotations

import json
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
from models.runtime import OnnxCapacityModel
from xapp.adapters.sdl_store import SdlStateStore
from xapp.estimators.model import ModelEstimator
from xapp.estimators.probe import ProbeEstimator, ProbeSettings
from xapp.estimators.saturation import SaturationLabeller

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


def test_saturated_periods_kept_in_sdl_become_training_data(
    redis_port: int, tmp_path: Path
) -> None:
    """The field's own saturated periods, labelled by the xApp, exported and trained on."""
    scenario = load_scenario("paper-static").cut(60.0)
    truth = sample_truth(scenario, DL, 1.0)
    kpis = SimulatedKpis(truth, DL, seed=3)
    store = SdlStateStore()
    labeller = SaturationLabeller(store, every_s=1.0, per_path=45)
    for k in range(1, len(truth.times_s)):
        usable = truth.usable_mbps[k - 1]
        labeller.update(kpis.samples(k, float(truth.times_s[k]), 1.0, usable, usable))
    periods = store.load_saturated_periods()
    store.close()
    per_access = {a: sum(p.history[-1].access == a for p in periods) for a in truth.accesses}
    assert per_access == {"nr": 45, "wifi": 45, "lifi": 45}  # the newest 45 of each path

    out = tmp_path / "field.csv"
    exported = subprocess.run(
        [sys.executable, "-m", "atsss", "xapp", "export-dataset", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert exported.returncode == 0, exported.stderr
    assert "0 probe records and 135 saturated periods → 135 labelled rows" in exported.stderr
    frame, _ = load([out], "wifi")
    labelled = frame[frame[TARGET].notna()]
    assert len(labelled) == 45
    assert np.median(labelled[TARGET]) == pytest.approx(1190.0, rel=0.1)

    trained = subprocess.run(
        [
            *(sys.executable, "-m", "atsss", "train", "--access", "wifi", "--data", str(out)),
            *("--out", str(tmp_path / "models"), "--quick", "--folds", "2", "--json"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert trained.returncode == 0, trained.stderr[-2000:]
    card = json.loads((tmp_path / "models" / "wifi.card.json").read_text())
    assert card["access"] == "wifi"
    # A running xApp takes it as the operator API's reload does (ModelEstimator.swap), and it
    # answers from the next period on.
    estimator = ModelEstimator()
    estimator.swap("wifi", OnnxCapacityModel(tmp_path / "models" / "wifi.card.json"))
    described = next(m for m in estimator.describe() if m["access"] == "wifi")
    assert described["card"] == str(tmp_path / "models" / "wifi.card.json")
    for k in range(1, 15):
        usable = truth.usable_mbps[k - 1]
        estimator.update(kpis.samples(k, float(truth.times_s[k]), 1.0, usable, usable), float(k))
    estimate = estimator.estimate("cpe-1", "wifi", DL, 14.0)
    assert estimate is not None
    assert estimate.capacity_mbps == pytest.approx(1190.0, rel=0.15)
