"""The connection model: stalls on a weighted dead path, recovery, fallback to backups."""

import numpy as np
import pytest

from bench.connection import subflows_in_round
from core.domain import Direction
from core.fluid import carried_mbps
from core.scenario.load import parse_scenario
from core.scenario.truth import Truth, sample_truth


def truth_with_outage() -> Truth:
    scenario = parse_scenario(
        {
            "name": "t",
            "duration_s": 10,
            "cpes": [
                {
                    "id": "c",
                    "accesses": {
                        "nr": {"downlink_mbps": 100},
                        "wifi": {
                            "downlink_mbps": 300,
                            "availability": {"outages": [[2, 5]]},
                            "reconnect_s": 0.5,
                        },
                    },
                }
            ],
        }
    )
    return sample_truth(scenario, Direction.DOWNLINK, 0.1)


def test_a_dead_subflow_stays_in_the_round_until_detected_and_returns_after_reconnect() -> None:
    truth = truth_with_outage()
    in_round = subflows_in_round(truth, detection_s=0.45)[:, 0, 1]
    t = truth.times_s
    assert in_round[t < 2].all()
    assert in_round[(t >= 2) & (t < 2.449)].all()  # not yet noticed
    assert not in_round[(t >= 2.5) & (t < 5.5 - 1e-9)].any()  # down, then reconnecting
    assert in_round[t >= 5.5 - 1e-9].all()


def test_weighted_dead_path_stalls_and_standby_avoids_it() -> None:
    caps = np.array([[100.0, 0.0]])
    in_round = np.array([[True, True]])
    stalled = carried_mbps(np.array([[1, 3]]), caps, in_round)
    assert stalled.sum() == 0.0
    standby = carried_mbps(np.array([[1, 0]]), caps, in_round)
    assert standby.sum() == pytest.approx(100.0)


def test_backup_subflows_carry_when_no_weighted_one_is_left() -> None:
    caps = np.array([[100.0, 300.0]])
    carried = carried_mbps(np.array([[0, 5]]), caps, np.array([[True, False]]))
    assert carried[0].tolist() == pytest.approx([100.0, 0.0])
