"""`atsss bench predictability`: what weights from the last report can reach, by construction."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from bench.predictability import _carried, predictability
from core.scenario.load import parse_scenario


def scenario(nr: dict[str, object]) -> object:
    return parse_scenario(
        {
            "name": "square",
            "duration_s": 20,
            "cpes": [
                {
                    "id": "cpe-1",
                    "accesses": {
                        "nr": {"downlink_mbps": 100, **nr},
                        "wifi": {"downlink_mbps": 100},
                    },
                }
            ],
        }
    )


def test_the_slowest_path_for_its_weight_sets_the_pace_and_unweighted_paths_carry_nothing() -> None:
    ticks = np.array([10.0, 100.0, 50.0]).reshape(1, 1, 1, 3)
    assert _carried(np.array([[[1.0, 1.0, 0.0]]]), ticks)[0, 0] == pytest.approx(20.0)
    assert _carried(np.array([[[1.0, 10.0, 0.0]]]), ticks)[0, 0] == pytest.approx(110.0)
    assert _carried(np.zeros((1, 1, 3)), ticks)[0, 0] == 0.0


def test_steady_capacities_leave_nothing_to_predict() -> None:
    result = predictability(scenario({}))  # type: ignore[arg-type]
    assert result.last_report == pytest.approx(1.0)
    assert result.hedged_hindsight == pytest.approx(1.0)


def test_an_access_flapping_every_period_defeats_the_last_report_and_hedging_halves_loss() -> None:
    """NR up for one period, down the next: the last report always says the opposite. Weighted
    while gone, NR stalls the round (0 of 100 carried); left out while back, Wi-Fi alone carries
    100 of 200: a third. Hedged in hindsight, NR is left out after a period up: two thirds."""
    flapping = {"availability": {"periodic": {"up_s": 1, "down_s": 1}}}
    result = predictability(scenario(flapping))  # type: ignore[arg-type]
    assert result.instant == pytest.approx(1.0)
    assert result.period_mean == pytest.approx(1.0)
    assert result.last_report == pytest.approx(1 / 3, abs=0.02)
    assert result.hedged_hindsight == pytest.approx(2 / 3, abs=0.02)
    assert result.lag1_correlation["nr"] == pytest.approx(-1.0)
    assert result.half_gap_target == pytest.approx((1 + result.last_report) / 2)


def test_the_command_prints_json_and_names_a_bad_period() -> None:
    run = [sys.executable, "-m", "atsss", "bench", "predictability", "--scenario", "paper-static"]
    done = subprocess.run([*run, "--json"], capture_output=True, text=True, check=True)
    (row,) = json.loads(done.stdout)
    assert row["scenario"] == "paper-static"
    assert row["last_report"] == pytest.approx(1.0)
    bad = subprocess.run(
        [*run, "--reporting-period-ms", "150"], capture_output=True, text=True, check=False
    )
    assert bad.returncode != 0
    assert "whole number of steps" in bad.stderr
    assert "Traceback" not in bad.stderr
