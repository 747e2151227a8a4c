"""Hysteresis: push only what is worth pushing."""

from xapp.policy.hysteresis import Hysteresis

H = Hysteresis(min_gain=0.02)
CURRENT = {"nr": 29, "wifi": 100, "lifi": 1}


def test_first_weights_are_always_pushed() -> None:
    assert H.decide(None, CURRENT).push


def test_identical_weights_are_not_pushed() -> None:
    assert not H.decide(CURRENT, dict(CURRENT), override_changed=True).push


def test_small_gain_is_not_pushed_and_large_gain_is() -> None:
    proposed = {"nr": 28, "wifi": 99, "lifi": 1}
    small = H.decide(CURRENT, proposed, predicted_mbps=1010, current_predicted_mbps=1000)
    assert not small.push
    assert "below" in small.reason
    large = H.decide(CURRENT, proposed, predicted_mbps=1030, current_predicted_mbps=1000)
    assert large.push


def test_a_marginal_path_moving_to_standby_is_a_gain_question() -> None:
    proposed = {"nr": 29, "wifi": 100, "lifi": 0}
    decision = H.decide(CURRENT, proposed, predicted_mbps=1001, current_predicted_mbps=1000)
    assert not decision.push


def test_a_weighted_path_that_is_lost_is_pushed_at_once() -> None:
    proposed = {"nr": 29, "wifi": 100, "lifi": 0}
    decision = H.decide(
        CURRENT, proposed, predicted_mbps=1000, current_predicted_mbps=1000, lost={"lifi"}
    )
    assert decision.push
    assert "lifi" in decision.reason


def test_a_path_that_appears_is_pushed() -> None:
    current = {"nr": 1, "wifi": 0}
    decision = H.decide(
        current,
        {"nr": 1, "wifi": 3},
        predicted_mbps=1,
        current_predicted_mbps=1,
        appeared={"wifi"},
    )
    assert decision.push


def test_mode_and_override_changes_are_pushed() -> None:
    proposed = {"nr": 1, "wifi": 0, "lifi": 0}
    assert H.decide(CURRENT, proposed, mode_changed=True).push
    assert H.decide(CURRENT, proposed, override_changed=True).push


def test_current_weights_that_carry_nothing_are_replaced() -> None:
    assert H.decide(CURRENT, {"nr": 1}, predicted_mbps=5, current_predicted_mbps=0).push
