"""The estimators in the closed loop (simulated time, simulated KPIs of what the weights let
each path carry): recovery from wrong weights, outages, and the probe share."""

from __future__ import annotations

import numpy as np
import pytest

from bench.closed_loop import LoopSettings, evaluate
from core.domain import Direction
from core.scenario.load import load_scenario
from core.scenario.truth import sample_truth

TRUE_RATIO = 342.0 / 1190.0  # nr : wifi in paper-static


def test_fused_estimator_recovers_from_a_tenfold_underweighted_fast_path() -> None:
    """Start at 3-99-1 (NR given a tenth of its share): what NR carries is a tenth of its
    capacity, so a throughput-reading estimator would keep it there. The fused one must
    restore the right weights within a few reporting periods."""
    scenario = load_scenario("paper-static").cut(12.0)
    settings = LoopSettings(
        estimators=("fused",),
        contenders=("optimal",),
        initial_weights={"nr": 3, "wifi": 99, "lifi": 1},
    )
    report = evaluate(scenario, settings)
    weights = report.trace.weights["optimal"]
    times = report.trace.times_s
    assert weights[0].tolist() == [3, 99, 1]
    later = times >= 4.0  # three reporting periods, plus the control delay
    ratios = weights[later, 0] / weights[later, 1]
    assert np.all(np.abs(ratios / TRUE_RATIO - 1) < 0.2), ratios
    carried = report.trace.carried_mbps["optimal"][later].sum(axis=1)
    capacity = report.trace.capacity_mbps[later].sum(axis=1)
    assert np.all(carried >= 0.9 * capacity)


def test_the_model_alone_escapes_the_trap_from_a_tenfold_underweighted_fast_path() -> None:
    """Before: the models read throughput history, so alone they kept NR at a tenth of its
    share (efficiency 0.01). Their features now read the rate per PRB the path used and the
    PRBs free to it, which do not depend on the weights."""
    scenario = load_scenario("paper-static").cut(12.0)
    settings = LoopSettings(
        estimators=("model-only",),
        contenders=("optimal",),
        initial_weights={"nr": 3, "wifi": 99, "lifi": 1},
    )
    report = evaluate(scenario, settings)
    weights = report.trace.weights["optimal"]
    later = report.trace.times_s >= 4.0
    ratios = weights[later, 0] / weights[later, 1]
    assert np.all(np.abs(ratios / TRUE_RATIO - 1) < 0.25), ratios
    carried = report.trace.carried_mbps["optimal"][later].sum(axis=1)
    capacity = report.trace.capacity_mbps[later].sum(axis=1)
    assert np.all(carried >= 0.9 * capacity)


@pytest.mark.parametrize("estimator", ["fused", "kpi-only"])
def test_an_access_that_disappears_gets_weight_zero_within_one_reporting_period(
    estimator: str,
) -> None:
    scenario = load_scenario("paper-interruption").cut(46.0)
    settings = LoopSettings(estimators=(estimator,), contenders=("optimal",))
    report = evaluate(scenario, settings)
    truth = sample_truth(scenario, Direction.DOWNLINK, settings.step_s)
    weights = report.trace.weights["optimal"]
    period_ticks = round(settings.reporting_period_s / settings.step_s)
    delay_ticks = round(settings.control_delay_s / settings.step_s)
    checked = 0
    for a, access in enumerate(truth.accesses):
        up = truth.available[:, 0, a]
        for k in np.flatnonzero(up[:-1] & ~up[1:]) + 1:  # the first tick it is down
            if weights[k - 1, a] == 0:
                continue  # it carried nothing anyway
            # the next report comes at most one period later; the push lands after the delay
            deadline = k + period_ticks + delay_ticks
            if deadline >= len(weights):
                continue
            assert weights[deadline, a] == 0, (access, float(truth.times_s[k]))
            checked += 1
    assert checked >= 3


def test_a_report_carries_the_period_it_covers_not_the_tick_it_is_sent_at() -> None:
    """LiFi goes down at 5.0 s, exactly when a report is sent. That report covers [4, 5), in
    which LiFi was up; only the next one (6.0 s) can say it is down."""
    scenario = load_scenario("paper-interruption").cut(8.0)
    settings = LoopSettings(
        estimators=("oracle-noise",), estimator_noise=0.0, contenders=("optimal",)
    )
    report = evaluate(scenario, settings)
    lifi = report.trace.accesses.index("lifi")
    times = report.trace.times_s
    weights = report.trace.weights["optimal"][:, lifi]
    assert report.trace.capacity_mbps[times >= 5.0, lifi].max() == 0.0
    assert (weights[(times > 5.1) & (times < 6.0)] > 0).all()
    assert (weights[times > 6.1] == 0).all()


@pytest.mark.parametrize("scenario_name", ["lifi-blockage", "paper-interruption"])
def test_fused_probes_little_and_probe_only_pays_for_its_probes(scenario_name: str) -> None:
    scenario = load_scenario(scenario_name).cut(60.0)
    settings = LoopSettings(estimators=("fused", "probe-only"), contenders=("optimal",))
    report = evaluate(scenario, settings)
    fused = report.result("optimal/fused")
    probe_only = report.result("optimal/probe-only")
    assert fused.probe_traffic_fraction is not None
    assert probe_only.probe_traffic_fraction is not None
    assert fused.probe_traffic_fraction < 0.02
    assert probe_only.probe_traffic_fraction > fused.probe_traffic_fraction
    assert fused.efficiency > probe_only.efficiency
