"""Outage by silence when each node's reports come on their own.

The live loop feeds each node's indication to the estimators as it arrives, so a CPE's NR
samples and its Wi-Fi samples of one period reach the silence tracker in separate calls. The
tracker used to look for "another access carried" within one call only: live, a dead Wi-Fi
path stayed usable while the simulated loop (every node's samples in one call) dropped it, and
the two disagreed by up to 0.028 of efficiency on paper-interruption's downlink.
"""

from __future__ import annotations

import pytest

from core.domain import Direction, KpiSample
from xapp.estimators.outage import SilenceTracker

DL = Direction.DOWNLINK
CPES = [f"cpe-{i}" for i in range(1000)]
# Every CPE's weights in force: Wi-Fi carries everything, NR is on weight 0.
WEIGHTS = {"nr": 0, "wifi": 1}


def node_report(access: str, time_s: float, carried: dict[str, float]) -> list[KpiSample]:
    return [KpiSample(cpe, access, DL, time_s, 1.0, throughput_mbps=carried[cpe]) for cpe in CPES]


@pytest.mark.parametrize("wifi_first", [True, False])
def test_a_dead_path_is_silent_whichever_node_reports_first(wifi_first: bool) -> None:
    tracker = SilenceTracker(lambda cpe_id, direction: WEIGHTS)
    dead = set(CPES[::3])
    # The weighted Wi-Fi path of a third of the fleet died: it carried nothing, and MPTCP fell
    # back to NR, which carried what it could. The others carried on Wi-Fi as weighted.
    wifi = node_report("wifi", 31.0, {c: 0.0 if c in dead else 900.0 for c in CPES})
    nr = node_report("nr", 31.0, {c: 12.0 if c in dead else 0.0 for c in CPES})
    for batch in (wifi, nr) if wifi_first else (nr, wifi):
        tracker.update(batch)
    assert {p[0] for p in tracker.silent()} == dead
    assert all(p[1] == "wifi" for p in tracker.silent())
    assert tracker.silent_since(("cpe-0", "wifi", DL)) == 31.0
    # NR is on weight 0: carrying nothing there says nothing.
    assert tracker.silent_since(("cpe-1", "nr", DL)) is None


def test_silence_needs_another_access_carrying_in_the_same_period() -> None:
    tracker = SilenceTracker(lambda cpe_id, direction: WEIGHTS)
    # An idle application: nothing carried anywhere in period 31.
    tracker.update(node_report("wifi", 31.0, dict.fromkeys(CPES, 0.0)))
    # NR carried in period 30 (an older report, come late): not the same period.
    tracker.update(node_report("nr", 30.0, dict.fromkeys(CPES, 5.0)))
    assert tracker.silent() == set()
    # In period 32 NR carried and Wi-Fi did not: silent from then; carrying again ends it.
    tracker.update(node_report("nr", 32.0, dict.fromkeys(CPES, 5.0)))
    tracker.update(node_report("wifi", 32.0, dict.fromkeys(CPES, 0.0)))
    assert len(tracker.silent()) == len(CPES)
    tracker.update(node_report("wifi", 33.0, dict.fromkeys(CPES, 800.0)))
    assert tracker.silent() == set()
