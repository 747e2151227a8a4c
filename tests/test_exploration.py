"""Exploration of paths known only from below (xapp/policy/exploration.py), alone and in the loop
on a scenario whose Wi-Fi access point reports no resource KPIs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.closed_loop import LoopSettings, evaluate
from bench.simulated import check_node_measurements
from core.domain import CapacityEstimate, Direction
from core.scenario.e2_identities import offered as offered_by
from core.scenario.e2_identities import scenario_deployment
from core.scenario.load import ScenarioError, load_scenario, parse_scenario
from e2sim.node import SimulatedNode
from xapp.policy.exploration import Exploration, ExplorationConfig

DL = Direction.DOWNLINK


def _estimate(
    access: str, mbps: float, at_s: float, lower_bound: bool = False, stddev: float = 5.0
) -> CapacityEstimate:
    return CapacityEstimate(
        "cpe-1", access, DL, mbps, stddev, "model", at_s, lower_bound=lower_bound
    )


def _views(
    exploration: Exploration,
    wifi_carried: float,
    nr_carried: float,
    weights: dict[str, int],
    now_s: float,
    lifi_carried: float | None = None,
) -> dict[str, CapacityEstimate | None]:
    """NR measured at 340 Mbit/s, Wi-Fi (and LiFi when given) known only from what it carried."""
    estimates = {
        "nr": _estimate("nr", 340.0, now_s),
        "wifi": _estimate("wifi", wifi_carried, now_s, lower_bound=True, stddev=50.0),
    }
    carried = {"nr": nr_carried, "wifi": wifi_carried}
    if lifi_carried is not None:
        estimates["lifi"] = _estimate("lifi", lifi_carried, now_s, lower_bound=True, stddev=5.0)
        carried["lifi"] = lifi_carried
    view = exploration.views("cpe-1", DL, estimates, carried, weights, now_s)
    assert view["nr"] == estimates["nr"]  # a measured path passes unchanged
    return view


def _wifi(
    exploration: Exploration,
    wifi_carried: float,
    nr_carried: float,
    weights: dict[str, int],
    now_s: float,
) -> float:
    return _mbps(_views(exploration, wifi_carried, nr_carried, weights, now_s), "wifi")


def _mbps(view: dict[str, CapacityEstimate | None], access: str) -> float:
    estimate = view[access]
    assert estimate is not None
    assert estimate.stddev_mbps == 0.0  # taken at face value, never hedged below the bound
    return estimate.capacity_mbps


def test_a_held_back_path_is_raised_faster_as_long_as_it_keeps_up() -> None:
    exploration = Exploration(ExplorationConfig(step=0.25, max_step=1.0))
    assert _wifi(exploration, 100.0, 340.0, {"nr": 34, "wifi": 10}, 1.0) == pytest.approx(125.0)
    # NR ran full (it set the pace), Wi-Fi's share grew and it carried what was asked: the
    # next step is twice as large (slow start), up to max_step
    assert _wifi(exploration, 125.0, 340.0, {"nr": 34, "wifi": 12}, 2.0) == pytest.approx(187.5)
    assert _wifi(exploration, 187.5, 340.0, {"nr": 34, "wifi": 18}, 3.0) == pytest.approx(375.0)
    assert _wifi(exploration, 375.0, 340.0, {"nr": 34, "wifi": 36}, 4.0) == pytest.approx(750.0)
    assert exploration.stats.raises == 4
    assert exploration.stats.overshoots == 0


def test_a_raise_the_path_cannot_keep_up_with_is_an_overshoot_and_exploring_pauses() -> None:
    exploration = Exploration(ExplorationConfig(step=0.25, pause_s=10.0))
    _views(exploration, 100.0, 340.0, {"nr": 34, "wifi": 10}, 1.0)
    # Wi-Fi's share grew, but it carried no more, and NR was held back: Wi-Fi set the pace
    assert _wifi(exploration, 100.0, 272.0, {"nr": 34, "wifi": 12}, 2.0) == 100.0
    assert exploration.stats.overshoots == 1
    # paused: NR sets the pace again, yet Wi-Fi stays at its bound until the pause ends, and
    # then starts again with the first, small step
    assert _wifi(exploration, 100.0, 340.0, {"nr": 34, "wifi": 10}, 5.0) == 100.0
    assert _wifi(exploration, 100.0, 340.0, {"nr": 34, "wifi": 10}, 12.5) == 125.0


def test_a_raise_under_way_ends_when_the_path_is_measured() -> None:
    """Wi-Fi raised at 1 s, then measured (its node's KPIs, no bound at all in the question):
    the raise ends. Known only from below again at 3 s, it is raised afresh, not judged
    against the old raise (which it would have fallen short of: an overshoot and a pause)."""
    exploration = Exploration(ExplorationConfig(step=0.25, pause_s=10.0))
    assert _wifi(exploration, 100.0, 340.0, {"nr": 34, "wifi": 10}, 1.0) == pytest.approx(125.0)
    measured = {"nr": _estimate("nr", 340.0, 2.0), "wifi": _estimate("wifi", 400.0, 2.0)}
    view = exploration.views("cpe-1", DL, measured, {"nr": 340.0, "wifi": 100.0}, None, 2.0)
    assert view == measured
    assert _wifi(exploration, 100.0, 340.0, {"nr": 34, "wifi": 10}, 3.0) == pytest.approx(125.0)
    assert exploration.stats.overshoots == 0
    assert exploration.stats.raises == 2


def test_a_raise_too_small_for_the_integer_weights_compounds_until_it_is_expressed() -> None:
    exploration = Exploration(ExplorationConfig(step=0.25, pause_s=10.0))
    _views(exploration, 6.0, 340.0, {"nr": 54, "wifi": 1}, 1.0)
    # weights unchanged: the raise did not reach the path, so ask for more, past twice what it
    # carried (one weight unit of 56 is that coarse)
    for k in range(2, 6):
        expected = 6.0 * 1.25**k
        assert _wifi(exploration, 6.0, 340.0, {"nr": 54, "wifi": 1}, float(k)) == (
            pytest.approx(expected)
        )
    assert exploration.stats.overshoots == 0


def test_a_dominant_path_compounds_at_most_to_twice_what_it_carried() -> None:
    exploration = Exploration(ExplorationConfig(step=0.25, pause_s=10.0))
    weights = {"nr": 1, "wifi": 9}
    _views(exploration, 900.0, 340.0, weights, 1.0)
    assert _wifi(exploration, 900.0, 340.0, weights, 2.0) == pytest.approx(900 * 1.25**2)
    assert _wifi(exploration, 900.0, 340.0, weights, 3.0) == pytest.approx(900 * 1.25**3)
    assert _wifi(exploration, 900.0, 340.0, weights, 4.0) == 900.0  # 1.25**4 > 2: pause


def test_two_paths_known_only_from_below_are_explored_one_at_a_time() -> None:
    exploration = Exploration(ExplorationConfig(step=0.25, pause_s=10.0))
    carried = {"wifi": 100.0, "lifi": 10.0}
    weights = {"nr": 34, "wifi": 10, "lifi": 1}
    view = _views(exploration, 100.0, 340.0, weights, 1.0, lifi_carried=10.0)
    raised = [a for a in carried if _mbps(view, a) > carried[a]]
    assert len(raised) == 1
    first = raised[0]
    other = "lifi" if first == "wifi" else "wifi"
    # the first one's share grew and it could not keep up (NR held back): an overshoot
    grown = dict(weights, **{first: weights[first] + 2})
    _views(exploration, 100.0, 272.0, grown, 2.0, lifi_carried=10.0)
    assert exploration.stats.overshoots == 1
    # now it is the other one's turn
    view = _views(exploration, 100.0, 340.0, weights, 3.0, lifi_carried=10.0)
    assert _mbps(view, other) == pytest.approx(carried[other] * 1.25)
    assert _mbps(view, first) == carried[first]


def test_without_a_measured_path_the_share_s_promise_is_the_yardstick() -> None:
    """NR carries nothing (weight 0): no measured path can say who set the pace, so what the
    grown share asked is compared with what the path carried."""
    exploration = Exploration(ExplorationConfig(step=0.25, pause_s=10.0))
    weights = {"nr": 0, "wifi": 10, "lifi": 10}
    view = _views(exploration, 100.0, 0.0, weights, 1.0, lifi_carried=100.0)
    first = next(a for a in ("wifi", "lifi") if _mbps(view, a) > 100.0)
    grown = dict(weights, **{first: 12})
    # its share grew by 12/22 over 10/20 (×1.09): asked 109, carried 100 → kept up
    _views(exploration, 100.0, 0.0, grown, 2.0, lifi_carried=100.0)
    assert exploration.stats.overshoots == 0
    # its share grew again, to 20/30 (×1.22): asked 122, carried 100: it could not keep up
    grown_more = dict(weights, **{first: 20})
    _views(exploration, 100.0, 0.0, grown_more, 3.0, lifi_carried=100.0)
    assert exploration.stats.overshoots == 1


def test_a_path_back_at_weight_zero_restarts_from_half_what_it_last_showed() -> None:
    exploration = Exploration(ExplorationConfig(step=0.25, pause_s=10.0, memory_s=60.0))
    # carrying alone, it showed its capacity
    assert _wifi(exploration, 1000.0, 0.0, {"nr": 0, "wifi": 10}, 1.0) == 1000.0
    # dead while weighted: not explored
    assert _wifi(exploration, 0.0, 340.0, {"nr": 34, "wifi": 10}, 2.0) == 0.0
    # back at weight 0: half of the 1000 it showed, raised
    assert _wifi(exploration, 0.0, 340.0, {"nr": 34, "wifi": 0}, 5.0) == pytest.approx(625.0)


def test_a_weighted_path_that_carried_nothing_is_dead_not_held_back() -> None:
    exploration = Exploration()
    assert _wifi(exploration, 0.0, 340.0, {"nr": 34, "wifi": 10}, 1.0) == 0.0
    assert exploration.stats.raises == 0


def test_a_path_held_at_weight_zero_starts_from_a_share_of_the_others() -> None:
    exploration = Exploration(ExplorationConfig(step=0.25, floor_share=0.02))
    assert _wifi(exploration, 0.0, 340.0, {"nr": 34, "wifi": 0}, 1.0) == pytest.approx(
        0.02 * 340.0 * 1.25
    )


def test_bad_exploration_settings_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="step"):
        ExplorationConfig(step=0)
    with pytest.raises(ValueError, match="shortfall"):
        ExplorationConfig(shortfall=1.0)
    with pytest.raises(ValueError, match="max_step"):
        ExplorationConfig(step=0.5, max_step=0.25)


def test_a_scenario_says_what_a_node_can_measure() -> None:
    scenario = load_scenario("wifi-basic-ap")
    offered = scenario.node_measurements["wifi"]
    assert "WLAN.StaAirtime" not in offered
    deployment = scenario_deployment(scenario)
    wifi_node = next(n for n in deployment.e2.nodes if n.access == "wifi")
    assert set(wifi_node.measurements) == offered
    nr_node = next(n for n in deployment.e2.nodes if n.access == "nr")
    assert "RRU.PrbUsedDl" in nr_node.measurements  # not named: the usual subscription
    # the simulated node offers only these in its E2 setup (a subscription to more is refused)
    node = SimulatedNode("wifi", ("127.0.0.1", 1), [1], offered=offered_by(scenario, "wifi"))
    assert set(node.client.offered) == offered
    with pytest.raises(ScenarioError, match="nodes names 'wimax'"):
        parse_scenario(
            {
                "name": "x",
                "duration_s": 10,
                "nodes": {"wimax": {"measurements": ["X"]}},
                "cpes": [{"id": "c", "accesses": {"nr": {"downlink_mbps": 10}}}],
            }
        )
    with pytest.raises(ValueError, match=r"WLAN\.Nope not a wifi measurement"):
        check_node_measurements("wifi", frozenset({"WLAN.StaThpDl", "WLAN.StaThpUl", "WLAN.Nope"}))
    with pytest.raises(ValueError, match=r"must include WLAN\.StaThpDl"):
        check_node_measurements("wifi", frozenset({"WLAN.StaThpUl", "WLAN.StaRssi"}))


def test_exploration_frees_a_path_known_only_from_below() -> None:
    """The Wi-Fi AP reports no airtime or PHY rate: the model knows Wi-Fi only from what it
    carried. Without exploration the loop holds Wi-Fi near nothing (NR alone, about a third of
    the capacity); with it the loop follows Wi-Fi down the walk and back up."""
    scenario = load_scenario("wifi-basic-ap")
    base = LoopSettings(estimators=("model-only",), contenders=("optimal", "report-oracle"))
    explored = evaluate(scenario, base)
    trapped = evaluate(scenario, replace(base, exploration=None))
    with_it = explored.results[0]
    without = trapped.results[0]
    assert without.efficiency < 0.5
    assert with_it.efficiency > 0.85
    assert with_it.efficiency > without.efficiency + 0.3
    assert with_it.exploration_raises is not None
    assert with_it.exploration_raises > 0
    assert without.exploration_raises is None
    # the cost stays bounded: after an overshoot exploring pauses, so at most one per pause
    pause_s = ExplorationConfig().pause_s
    assert (with_it.exploration_overshoots or 0) <= scenario.duration_s / pause_s + 1
