"""Hysteresis: push only what is worth pushing."""

import dataclasses
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from xapp.policy.hysteresis import LAST_TOKEN, Hysteresis, PushBudget

H = Hysteresis(min_gain=0.02)
CURRENT = {"nr": 29, "wifi": 100, "lifi": 1}
MIN_GAIN = 0.01  # (the hysteresis's default)


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


ACCESSES = ("nr", "wifi", "lifi")


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.tuples(*[st.integers(0, 3)] * 3),
            st.tuples(*[st.integers(0, 3)] * 3),
            st.floats(0.0, 2000.0),
            st.floats(0.0, 2000.0),
            st.booleans(),
        ),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from([0.0, 0.01, 0.02]),
)
def test_rows_held_at_once_are_those_decide_holds_with_the_same_reason(
    rows: list[tuple[tuple[int, ...], tuple[int, ...], float, float, bool]], min_gain: float
) -> None:
    """``held_many`` (a fleet's rows at once) against ``decide``, row by row: each row it
    holds, decide holds with the reason the loop gives it; each it finds pushed for a gain
    alone, decide pushes for that gain with that reason; of the others, decide pushes for
    something that cannot wait or gives a reason of its own."""
    hysteresis = Hysteresis(min_gain=min_gain)
    current = np.array([r[0] for r in rows], dtype=np.int64)
    proposed = np.array([r[1] for r in rows], dtype=np.int64)
    predicted = np.array([r[2] for r in rows])
    before = np.array([r[3] for r in rows])
    cannot_wait = np.array([r[4] for r in rows])
    held, unchanged, gain, for_gain = hysteresis.held_many(
        current, proposed, predicted, before, cannot_wait
    )
    for row, (now, new, mbps, before_mbps, urgent) in enumerate(rows):
        decision = hysteresis.decide(
            dict(zip(ACCESSES, now, strict=True)),
            dict(zip(ACCESSES, new, strict=True)),
            predicted_mbps=mbps,
            current_predicted_mbps=before_mbps,
            override_changed=urgent,  # one of the changes that cannot wait
        )
        if held[row]:
            assert not decision.push
            expected = "unchanged" if unchanged[row] else hysteresis.too_small(float(gain[row]))
            assert decision.reason == expected
        elif for_gain[row]:
            assert decision.push
            assert decision.for_gain
            assert decision.gain == float(gain[row])
            assert decision.reason == hysteresis.gain_reason(float(gain[row]))
        else:
            assert not decision.for_gain
            assert decision.push or decision.reason.startswith("current weights")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(allow_nan=True), st.floats(allow_nan=True)), max_size=30),
    st.sampled_from([0.0, 0.05, 0.123456, 1.0]),
    st.text(max_size=12),
)
def test_reasons_worded_together_are_those_worded_one_by_one(
    pairs: list[tuple[float, float]], min_gain: float, proposed_for: str
) -> None:
    """The held and pushed rows' reasons are worded many at once (in C, by one format each):
    the same words as each one's, whatever the figures (NaN, infinities, -0.0, huge)."""
    hysteresis = Hysteresis(min_gain=min_gain)
    firsts, seconds = [a for a, _ in pairs], [b for _, b in pairs]
    assert hysteresis.too_small_many(firsts) == [hysteresis.too_small(g) for g in firsts]
    assert hysteresis.out_of_reach_many(firsts, seconds) == [
        hysteresis.out_of_reach(a, b) for a, b in pairs
    ]
    assert hysteresis.gain_reasons(firsts, [proposed_for] * len(firsts)) == [
        f"{hysteresis.gain_reason(g)}: {proposed_for}" for g in firsts
    ]
    assert hysteresis.out_of_reach(0.0123, 0.05) == "held back: at most 1.2% to gain, 5.0% needed"
    assert hysteresis.gain_reason(0.0456) == "predicted gain 4.6%"


def budget_after(events: list[tuple[float, str]], rate: float) -> tuple[PushBudget, float]:
    """A budget started empty at 100 s, after these (gap, event) pushes, refunds and refills
    (anything else: time passes), and the time then."""
    budget = PushBudget.empty(rate, now_s=100.0)
    now_s = 100.0
    for gap_s, event in events:
        now_s += gap_s
        if event == "spend":
            budget.refill(now_s)
            budget.spend()
        elif event == "refund":
            budget.refund()
        elif event == "refill":
            budget.refill(now_s)
    return budget, now_s


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.floats(0.0, 3.0), st.sampled_from(["spend", "refund", "refill", "none"])),
            max_size=30,
        ),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([0.01, 0.1, 0.5, 2.0, 7.0]),
    st.lists(st.floats(-1.0, 30.0), max_size=5),
)
def test_budgets_as_rows_need_what_each_one_needs(
    histories: list[list[tuple[float, str]]], rate: float, probes_s: list[float]
) -> None:
    """``needed_many`` over budgets as rows (a fleet's step reads them so) answers what each
    budget's ``needed_at`` answers, infinite where ``spent_at``, whatever the pushes, refunds
    and refills before, at any time: at the instant its last token comes back too, and for no
    budget at all (NaN)."""
    budgets, ends = [], []
    for events in histories:
        budget, now_s = budget_after(events, rate)
        budgets.append(budget)
        ends.append(now_s)
    budgets.append(PushBudget(rate, LAST_TOKEN, 100.0, 100.0))  # its last token, exactly
    rows = np.array([b.as_row() for b in budgets] + [(math.nan,) * 5])
    # (the rows a fleet's step makes of its budgets at once: the same numbers, NaN for none)
    at_once = PushBudget.rows_of([*budgets, None])
    assert np.array_equal(at_once, rows, equal_nan=True)
    assert np.array_equal(PushBudget.rows_of([None, *budgets])[1:], rows[:-1])
    times = [end + probe for end in ends for probe in probes_s]
    # the instant each budget gets its last token back, and a hair either side
    for budget in budgets:
        back_s = budget.at_s + (LAST_TOKEN - budget.tokens) / budget.rate_per_s
        times += [back_s, math.nextafter(back_s, math.inf), math.nextafter(back_s, -math.inf)]
    for now_s in times:
        # the gain a push would need: as each budget's, and as admit holds one to after a
        # refill (infinite where it is spent); none for no budget
        needed = [b.needed_at(now_s, MIN_GAIN) for b in budgets]
        assert PushBudget.needed_many(rows, now_s, MIN_GAIN)[:-1].tolist() == needed
        assert math.isnan(PushBudget.needed_many(rows, now_s, MIN_GAIN)[-1])
        for budget, gain in zip(budgets, needed, strict=True):
            refilled = dataclasses.replace(budget)
            refilled.refill(now_s)
            threshold = refilled.gain_needed(MIN_GAIN)
            assert gain == (math.inf if threshold is None else max(MIN_GAIN, threshold))
            assert (gain == math.inf) == budget.spent_at(now_s)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(
                st.tuples(st.floats(0.0, 3.0), st.sampled_from(["spend", "refund", "refill"])),
                max_size=20,
            ),
            st.floats(-0.5, 3.0),
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from([0.01, 0.5, 2.0, 7.0]),
    st.floats(-1.0, 5.0),
)
def test_budgets_judged_at_once_refill_and_refuse_as_each_one_does(
    histories: list[tuple[list[tuple[float, str]], float]], rate: float, later_s: float
) -> None:
    """``judged_many`` (a fleet's pushes for a gain judged at once) leaves each budget as its
    ``refill`` does and answers what its ``refusal`` answers: spent, held back, or going."""
    budgets, twins, gains = [], [], []
    end_s = 100.0
    for events, gain in histories:
        budget, now_s = budget_after(events, rate)
        end_s = max(end_s, now_s)
        budgets.append(budget)
        twins.append(dataclasses.replace(budget))
        gains.append(gain)
    now_s = end_s + later_s
    one_by_one = []
    for twin, gain in zip(twins, gains, strict=True):
        twin.refill(now_s)
        one_by_one.append(twin.refusal(gain, MIN_GAIN))
    assert PushBudget.judged_many(budgets, now_s, gains, MIN_GAIN) == one_by_one
    assert budgets == twins
