"""The weight policy: path selection, steering modes, uncertainty, staleness."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.domain import SteeringMode, SteeringRule, SteeringThresholds
from core.fluid import aggregate_mbps
from xapp.policy.baselines import proportional_weights
from xapp.policy.weight_policy import (
    PathView,
    PolicyConfig,
    PolicyInput,
    make_policy,
)

from .helpers import DL, estimate, paths

PAPER = {"nr": 342.0, "wifi": 1190.0, "lifi": 12.1}


def request(path_views: tuple[PathView, ...], **kwargs: object) -> PolicyInput:
    return PolicyInput("cpe-1", DL, 1.0, path_views, **kwargs)  # type: ignore[arg-type]


def propose(capacities: dict[str, float], rule: SteeringRule | None = None, **kw: object):  # type: ignore[no-untyped-def]
    proposal = make_policy("optimal").propose(
        request(paths(capacities), rule=rule or SteeringRule(), **kw)
    )
    assert proposal is not None
    return proposal


def test_load_balancing_with_exact_estimates_gives_the_optimum() -> None:
    proposal = propose(PAPER)
    assert dict(proposal.weights) == {"nr": 28, "wifi": 99, "lifi": 1}
    assert proposal.predicted_mbps == pytest.approx(1538.6, abs=0.1)
    assert proposal.usable == frozenset(PAPER)


@settings(max_examples=150, deadline=None)
@given(
    st.floats(min_value=1.0, max_value=5000.0),
    st.lists(st.floats(min_value=0.01, max_value=1.0), min_size=2, max_size=2),
)
def test_policy_reaches_97_percent_and_beats_proportional(largest: float, f: list[float]) -> None:
    caps = {"nr": largest * f[0], "wifi": largest, "lifi": largest * f[1]}
    proposal = propose(caps)
    chosen = [proposal.weights[a] for a in caps]
    values = list(caps.values())
    achieved = aggregate_mbps(chosen, values)
    assert achieved >= 0.97 * sum(values)
    assert achieved >= aggregate_mbps(list(proportional_weights(values)), values) * (1 - 1e-9)


def test_a_stale_estimate_puts_the_path_on_standby() -> None:
    views = (
        PathView("nr", estimate("nr", 300.0, at_s=0.0)),
        PathView("wifi", estimate("wifi", 900.0, at_s=-20.0)),  # older than stale_after_s
    )
    proposal = make_policy("optimal").propose(request(views))
    assert proposal is not None
    assert proposal.weights["wifi"] == 0
    assert proposal.weights["nr"] > 0
    assert "wifi" not in proposal.usable
    assert "no usable estimate for wifi" in proposal.reason


def test_an_unavailable_or_missing_path_gets_zero() -> None:
    views = (
        PathView("nr", estimate("nr", 300.0)),
        PathView("wifi", estimate("wifi", 0.0, available=False)),
        PathView("lifi", None),
    )
    proposal = make_policy("optimal").propose(request(views))
    assert proposal is not None
    assert dict(proposal.weights) == {"nr": 1, "wifi": 0, "lifi": 0}


def test_no_usable_path_means_no_proposal() -> None:
    views = (PathView("nr", None), PathView("wifi", estimate("wifi", 5.0, at_s=-100)))
    assert make_policy("optimal").propose(request(views)) is None


def test_a_path_below_the_floor_goes_to_standby() -> None:
    proposal = propose({"nr": 1000.0, "wifi": 1000.0, "lifi": 5.0})
    assert proposal.weights["lifi"] == 0
    relaxed = make_policy("optimal", PolicyConfig(min_share_of_largest=0.0)).propose(
        request(paths({"nr": 1000.0, "wifi": 1000.0, "lifi": 5.0}))
    )
    assert relaxed is not None
    assert relaxed.weights["nr"] == relaxed.weights["wifi"]


def test_an_uncertain_path_is_weighted_below_its_mean() -> None:
    certain = propose({"nr": 300.0, "wifi": 300.0})
    assert certain.weights["nr"] == certain.weights["wifi"]
    views = (
        PathView("nr", estimate("nr", 300.0, stddev_mbps=90.0)),
        PathView("wifi", estimate("wifi", 300.0)),
    )
    proposal = make_policy("optimal").propose(request(views))
    assert proposal is not None
    assert proposal.weights["nr"] < proposal.weights["wifi"]


def test_predictions_compare_current_and_proposed_under_the_same_beliefs() -> None:
    proposal = make_policy("optimal").propose(
        request(paths(PAPER), current={"nr": 1, "wifi": 1, "lifi": 1})
    )
    assert proposal is not None
    assert proposal.current_predicted_mbps == pytest.approx(36.3)
    assert proposal.predicted_mbps > 1500


def test_active_standby_uses_the_active_path_and_fails_over() -> None:
    rule = SteeringRule(SteeringMode.ACTIVE_STANDBY, preferred=("wifi", "nr"))
    assert dict(propose(PAPER, rule).weights) == {"nr": 0, "wifi": 1, "lifi": 0}
    views = (
        PathView("nr", estimate("nr", 342.0)),
        PathView("wifi", estimate("wifi", 0.0, available=False)),
        PathView("lifi", estimate("lifi", 12.1)),
    )
    proposal = make_policy("optimal").propose(request(views, rule=rule))
    assert proposal is not None
    assert dict(proposal.weights) == {"nr": 1, "wifi": 0, "lifi": 0}


def test_priority_based_overflows_only_when_the_priority_path_saturates() -> None:
    rule = SteeringRule(SteeringMode.PRIORITY_BASED, preferred=("lifi", "nr", "wifi"))
    light = propose(PAPER, rule, demand_mbps=5.0)
    assert dict(light.weights) == {"nr": 0, "wifi": 0, "lifi": 1}
    medium = propose(PAPER, rule, demand_mbps=200.0)
    assert medium.weights["wifi"] == 0
    assert medium.weights["nr"] > 0
    assert medium.weights["lifi"] > 0
    bulk = propose(PAPER, rule, demand_mbps=None)
    assert all(w > 0 for w in bulk.weights.values())


def test_smallest_delay_picks_the_lowest_rtt() -> None:
    views = tuple(
        PathView(a, estimate(a, c), rtt_ms=r)
        for (a, c), r in zip(PAPER.items(), [12.0, 3.0, 6.0], strict=True)
    )
    rule = SteeringRule(SteeringMode.SMALLEST_DELAY)
    proposal = make_policy("optimal").propose(request(views, rule=rule))
    assert proposal is not None
    assert dict(proposal.weights) == {"nr": 0, "wifi": 1, "lifi": 0}


def test_redundant_weights_every_usable_path_equally() -> None:
    proposal = propose(PAPER, SteeringRule(SteeringMode.REDUNDANT))
    assert dict(proposal.weights) == {"nr": 1, "wifi": 1, "lifi": 1}


def test_thresholds_steer_away_from_a_path_that_exceeds_them() -> None:
    views = (
        PathView("nr", estimate("nr", 342.0), rtt_ms=80.0),
        PathView("wifi", estimate("wifi", 1190.0), rtt_ms=3.0, loss_rate_permille=20),
        PathView("lifi", estimate("lifi", 12.1), rtt_ms=6.0),
    )
    rule = SteeringRule(thresholds=SteeringThresholds(rtt_ms=50, loss_rate_permille=10))
    proposal = make_policy("optimal").propose(request(views, rule=rule))
    assert proposal is not None
    assert dict(proposal.weights) == {"nr": 0, "wifi": 0, "lifi": 1}
    # When every path exceeds the thresholds, they are ignored rather than leaving nothing.
    strict = SteeringRule(thresholds=SteeringThresholds(rtt_ms=1))
    everyone = make_policy("optimal").propose(request(views, rule=strict))
    assert everyone is not None
    assert everyone.weights["wifi"] > 0


def test_baseline_policies_follow_the_published_rules() -> None:
    proportional = make_policy("proportional").propose(request(paths(PAPER)))
    assert proportional is not None
    assert dict(proportional.weights) == {"nr": 29, "wifi": 100, "lifi": 1}
    rr = make_policy("rr").propose(request(paths(PAPER)))
    assert rr is not None
    assert dict(rr.weights) == {"nr": 1, "wifi": 1, "lifi": 1}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_weight", 0),
        ("max_weight", 256),
        ("quantile", 1.0),
        ("outage_stall_s", -0.1),
        ("min_share_of_largest", 1.0),
        ("stale_after_s", 0.0),
    ],
)
def test_bad_configuration_is_rejected(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        PolicyConfig(**{field: value})  # type: ignore[arg-type]


def test_unknown_policy_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown policy 'best'"):
        make_policy("best")


def test_a_small_path_too_volatile_to_weigh_is_left_out() -> None:
    import numpy as np

    from xapp.policy.robust import robust_weights

    means = np.array([342.0, 1190.0, 12.1])
    # Every path known to under 2 %: LiFi earns its weight of 1 (0.8 % of the round).
    steady = robust_weights(means, np.array([1.0, 3.0, 0.2]), 100, 0.3)
    assert steady[2] == 1
    # LiFi at ±35 %: with weight 1 it would often be the round's bottleneck, costing far more
    # than the 0.8 % that leaving it out costs.
    volatile = robust_weights(means, np.array([1.0, 3.0, 4.2]), 100, 0.3)
    assert volatile[2] == 0
    assert volatile[0] > 0
    assert volatile[1] > 0


def test_a_small_path_that_goes_dark_often_is_left_out_when_going_dark_stalls_the_round() -> None:
    """LiFi blocked in one decision period of ten: weighted, each blockage stalls the round for
    MPTCP's 0.45 s, about 4 % of the aggregate, against the 0.8 % LiFi adds."""
    steady = tuple(PathView(a, estimate(a, c, stddev_mbps=0.01 * c)) for a, c in PAPER.items())
    blocked = tuple(
        PathView(p.access, p.estimate, outage_probability=0.1 if p.access == "lifi" else 0.0)
        for p in steady
    )
    policy = make_policy("optimal")
    kept = policy.propose(request(steady))
    assert kept is not None
    assert kept.weights["lifi"] == 1
    dropped = policy.propose(request(blocked))
    assert dropped is not None
    assert dropped.weights["lifi"] == 0
    assert dropped.weights["nr"] > 0
    assert dropped.weights["wifi"] > 0
    # The same risk with an agent that takes a dark path out at once: LiFi is worth its weight.
    quick = make_policy("optimal", PolicyConfig(outage_stall_s=0.0)).propose(request(blocked))
    assert quick is not None
    assert quick.weights["lifi"] == 1
    # A stall is a share of the time between decisions: 0.45 s of 10 s is little.
    slow = policy.propose(request(blocked, decision_interval_s=10.0))
    assert slow is not None
    assert slow.weights["lifi"] == 1


def test_the_risk_of_going_dark_is_learnt_from_how_often_a_usable_path_did() -> None:
    from xapp.policy.outage_risk import OutageRisk

    risk = OutageRisk(memory=40, prior=20)
    assert risk.probability("lifi") == 0.0
    states = [True] * 9 + [False, False, False] + [True] * 10
    probabilities = [risk.observe("lifi", usable) for usable in states]
    # 20 outage-free decisions assumed, 8 usable-to-usable steps seen, then one step into the
    # dark; the dark ones after it are not counted
    assert probabilities[9] == pytest.approx(1 / 29)
    assert probabilities[11] == pytest.approx(1 / 29)
    # back and usable again: the risk fades
    assert probabilities[-1] < 1 / 29
    assert risk.probability("nr") == 0.0
    with pytest.raises(ValueError, match="memory"):
        OutageRisk(memory=0)
    with pytest.raises(ValueError, match="prior"):
        OutageRisk(prior=-1)
