"""The control loop's contract with its ports: what it pushes, when, and what it remembers."""

import threading
import time
from collections.abc import Sequence

import pytest

from core.domain import (
    AccessIdentity,
    CapacityEstimate,
    Cpe,
    Direction,
    KpiSample,
    Override,
    SteeringMode,
    SteeringRule,
    WeightSet,
)
from xapp.adapters.memory_store import MemoryStateStore
from xapp.control_loop import ControlLoop
from xapp.policy.hysteresis import Hysteresis, PushBudget
from xapp.policy.weight_policy import make_policy
from xapp.ports import WeightPushError

from .helpers import DL, estimate

CPE = Cpe("cpe-1", {a: AccessIdentity(a) for a in ("nr", "wifi", "lifi")})


class TableEstimator:
    """Answers from a table the test edits; records what the loop fed it."""

    name = "table"

    def __init__(self, table: dict[str, CapacityEstimate]) -> None:
        self.table = table
        self.fed: list[KpiSample] = []

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        self.fed.extend(samples)

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        return self.table.get(access)


class QueueSource:
    def __init__(self) -> None:
        self.queue: list[KpiSample] = []

    def poll(self, now_s: float) -> Sequence[KpiSample]:
        out, self.queue = self.queue, []
        return out


class RecordingSink:
    def __init__(self) -> None:
        self.pushed: list[WeightSet] = []
        self.fail = False

    def push(self, weight_set: WeightSet) -> None:
        if self.fail:
            raise WeightPushError("agent unreachable")
        self.pushed.append(weight_set)


def make_loop(
    table: dict[str, CapacityEstimate],
) -> tuple[ControlLoop, RecordingSink, MemoryStateStore, QueueSource, TableEstimator]:
    sink, store, source = RecordingSink(), MemoryStateStore(), QueueSource()
    estimator = TableEstimator(table)
    loop = ControlLoop(
        cpes=[CPE],
        directions=[DL],
        source=source,
        estimator=estimator,
        policy=make_policy("optimal"),
        sink=sink,
        store=store,
    )
    return loop, sink, store, source, estimator


def paper_table(now_s: float = 0.0) -> dict[str, CapacityEstimate]:
    return {
        "nr": estimate("nr", 342.0, at_s=now_s),
        "wifi": estimate("wifi", 1190.0, at_s=now_s),
        "lifi": estimate("lifi", 12.1, at_s=now_s),
    }


def test_first_step_pushes_and_stores_the_optimum() -> None:
    loop, sink, store, _, _ = make_loop(paper_table())
    outcomes = loop.step(0.0)
    assert len(sink.pushed) == 1
    pushed = sink.pushed[0]
    assert dict(pushed.weights) == {"nr": 28, "wifi": 99, "lifi": 1}
    assert pushed.sequence == 1
    assert pushed.mode is SteeringMode.LOAD_BALANCING
    assert store.load_weights("cpe-1", DL) == pushed
    assert outcomes[0].pushed == pushed


def test_unchanged_estimates_push_nothing_more() -> None:
    loop, sink, _, _, _ = make_loop(paper_table())
    loop.step(0.0)
    loop.step(1.0)
    loop.step(2.0)
    assert len(sink.pushed) == 1


def test_kpi_samples_reach_the_estimator() -> None:
    loop, _, _, source, estimator = make_loop(paper_table())
    sample = KpiSample("cpe-1", "nr", DL, 1.0, 1.0, throughput_mbps=100.0, rtt_ms=12.0)
    source.queue.append(sample)
    loop.step(1.0)
    assert estimator.fed == [sample]


def test_a_lost_path_is_pushed_with_the_next_sequence_number() -> None:
    table = paper_table()
    loop, sink, _, _, _ = make_loop(table)
    loop.step(0.0)
    table["lifi"] = estimate("lifi", 0.0, available=False, at_s=1.0)
    loop.step(1.0)
    assert len(sink.pushed) == 2
    assert sink.pushed[1].weights["lifi"] == 0
    assert sink.pushed[1].sequence == 2
    assert "lost" in sink.pushed[1].reason


def test_a_failed_push_keeps_the_old_weights_and_is_retried() -> None:
    table = paper_table()
    loop, sink, store, _, _ = make_loop(table)
    loop.step(0.0)
    table["wifi"] = estimate("wifi", 100.0, at_s=1.0)
    sink.fail = True
    outcome = loop.step(1.0)[0]
    assert outcome.pushed is None
    assert "push failed" in outcome.reason
    assert store.load_weights("cpe-1", DL) == sink.pushed[0]
    sink.fail = False
    loop.step(2.0)
    assert len(sink.pushed) == 2
    assert sink.pushed[1].sequence == 2


def test_no_usable_estimate_changes_nothing() -> None:
    loop, sink, _, _, _ = make_loop({})
    outcome = loop.step(0.0)[0]
    assert sink.pushed == []
    assert "no usable estimate" in outcome.reason


def test_an_operator_override_wins_and_its_removal_returns_to_the_policy() -> None:
    loop, sink, store, _, _ = make_loop(paper_table())
    loop.step(0.0)
    store.save_override(Override("cpe-1", DL, weights={"nr": 1, "wifi": 2}, revision=1))
    loop.step(1.0)
    assert dict(sink.pushed[-1].weights) == {"nr": 1, "wifi": 2, "lifi": 0}
    assert "override by operator" in sink.pushed[-1].reason
    store.delete_override("cpe-1", DL)
    loop.step(2.0)
    assert dict(sink.pushed[-1].weights) == {"nr": 28, "wifi": 99, "lifi": 1}
    assert len(sink.pushed) == 3


def test_a_mode_override_changes_the_mode() -> None:
    loop, sink, store, _, _ = make_loop(paper_table())
    loop.step(0.0)
    rule = SteeringRule(SteeringMode.ACTIVE_STANDBY, preferred=("nr",))
    store.save_override(Override("cpe-1", DL, rule=rule, revision=1))
    loop.step(1.0)
    assert sink.pushed[-1].mode is SteeringMode.ACTIVE_STANDBY
    assert dict(sink.pushed[-1].weights) == {"nr": 1, "wifi": 0, "lifi": 0}


def test_an_override_needs_something_and_fixed_weights_stand_alone() -> None:
    with pytest.raises(ValueError, match="sets weights, a rule, excluded accesses or a freeze"):
        Override("cpe-1", DL)
    with pytest.raises(ValueError, match="fixed weights leave no room"):
        Override("cpe-1", DL, weights={"nr": 1}, frozen=True)


def test_a_cpe_whose_accesses_report_one_by_one_is_not_decided_before_they_have() -> None:
    nr = estimate("nr", 342.0, at_s=0.0)
    loop, sink, _, source, estimator = make_loop({"nr": nr})
    source.queue = [KpiSample("cpe-1", "nr", DL, 0.0, 1.0, throughput_mbps=300.0)]
    (first,) = loop.step(1.0)
    assert first.pushed is None
    assert "waiting for wifi, lifi to report" in first.reason
    estimator.table.update(
        {"wifi": estimate("wifi", 1190.0, at_s=1.0), "lifi": estimate("lifi", 12.1, at_s=1.0)}
    )
    (second,) = loop.step(2.0)
    assert second.pushed is not None
    assert second.pushed.weights["wifi"] > second.pushed.weights["nr"] > 0
    assert sink.pushed == [second.pushed]


def test_an_access_that_never_reports_is_left_out_after_the_warm_up() -> None:
    loop, _, _, source, _ = make_loop({"nr": estimate("nr", 342.0, at_s=0.0)})
    source.queue = [KpiSample("cpe-1", "nr", DL, 0.0, 1.0, throughput_mbps=300.0)]
    assert loop.step(1.0)[0].pushed is None
    (later,) = loop.step(4.5)
    assert later.pushed is not None
    assert later.pushed.weights == {"nr": 1, "wifi": 0, "lifi": 0}


class AgentLikeSink(RecordingSink):
    """Refuses sequences it has seen, as an agent does, and says what it holds."""

    def __init__(self, holds: WeightSet) -> None:
        super().__init__()
        self.holds = holds

    def push(self, weight_set: WeightSet) -> None:
        if weight_set.sequence <= self.holds.sequence:
            raise WeightPushError("409: sequence not after", held=self.holds)
        self.holds = weight_set
        self.pushed.append(weight_set)


def test_after_a_refused_sequence_the_loop_continues_from_the_agents() -> None:
    loop, _, store, _, _ = make_loop(paper_table())
    held = WeightSet("cpe-1", DL, {"nr": 1, "wifi": 1, "lifi": 1}, SteeringMode.LOAD_BALANCING, 7)
    sink = AgentLikeSink(held)
    loop._sink = sink
    first = loop.step(0.0)
    assert first[0].pushed is None
    assert store.load_weights("cpe-1", DL) == held
    second = loop.step(1.0)
    assert second[0].pushed is not None
    assert second[0].pushed.sequence == 8
    assert sink.holds.sequence == 8


def test_an_agents_carrier_events_are_decided_on_at_once_and_reports_take_over_again() -> None:
    """Lost: the path gets no weight before any report says so. Back: it starts from what it
    carried before the outage, until a report of a whole period after the return speaks."""
    table = paper_table()
    loop, sink, _, source, _ = make_loop(table)

    def report(access: str, end_s: float) -> None:
        source.queue.append(KpiSample("cpe-1", access, DL, end_s, 1.0, throughput_mbps=1.0))

    loop.step(0.0)
    assert dict(sink.pushed[-1].weights) == {"nr": 28, "wifi": 99, "lifi": 1}

    # The report at 1.0 still shows Wi-Fi well; the agent's event says otherwise at 1.3.
    table["wifi"] = estimate("wifi", 1190.0, at_s=1.0)
    loop.step(1.0)
    loop.access_event("cpe-1", "wifi", False, 1.3)
    outcome = loop.decide_now({"cpe-1"}, 1.3)
    assert outcome[0].pushed is not None
    assert outcome[0].pushed.weights["wifi"] == 0
    assert outcome[0].pushed.weights["nr"] > 0
    # The next report covers the time before the loss too and shows Wi-Fi partly usable:
    # the agent's word stands until a report of a period that began after it.
    table["wifi"] = estimate("wifi", 600.0, at_s=2.0)
    report("wifi", 2.0)
    loop.step(2.0)
    assert sink.pushed[-1].weights["wifi"] == 0

    # Back at 4.4; the report at 4.0 said it was down and nothing newer says otherwise.
    table["wifi"] = estimate("wifi", 0.0, available=False, at_s=4.0)
    loop.step(4.0)
    loop.access_event("cpe-1", "wifi", True, 4.4)
    back = loop.decide_now({"cpe-1"}, 4.4)[0].pushed
    assert back is not None
    assert dict(back.weights) == {"nr": 28, "wifi": 99, "lifi": 1}  # from before the outage
    assert "appeared" in back.reason or "wifi" in back.reason

    # The report of 4-5 s began before the return; the one of 5-6 s speaks, whatever it says.
    table["wifi"] = estimate("wifi", 300.0, at_s=5.0)
    report("wifi", 5.0)
    loop.step(5.0)
    assert sink.pushed[-1].weights["wifi"] == 99
    table["wifi"] = estimate("wifi", 300.0, at_s=6.0)
    report("wifi", 6.0)
    loop.step(6.0)
    assert sink.pushed[-1].weights["wifi"] < 99


def test_only_the_agent_ends_a_carrier_loss() -> None:
    """A node reports cell counters for a station it lost, and a model can read them as an
    idle path: the agent, which sees the carrier, is the one to say the path is back."""
    # NR, not LiFi: a path that just went dark is riskier to weigh, and LiFi's 0.8 % of the
    # capacity would not pay for that risk (test_weight_policy); NR's 22 % does.
    table = paper_table()
    loop, sink, _, source, _ = make_loop(table)
    loop.step(0.0)
    loop.access_event("cpe-1", "nr", False, 0.5)
    loop.decide_now({"cpe-1"}, 0.5)
    assert sink.pushed[-1].weights["nr"] == 0
    for t in (1.0, 2.0, 3.0):
        table["nr"] = estimate("nr", 342.0, at_s=t)
        source.queue.append(KpiSample("cpe-1", "nr", DL, t, 1.0, throughput_mbps=0.0))
        loop.step(t)
        assert sink.pushed[-1].weights["nr"] == 0
    assert loop.carrier_down("cpe-1") == ["nr"]
    loop.access_event("cpe-1", "nr", True, 3.2)
    loop.decide_now({"cpe-1"}, 3.2)
    assert sink.pushed[-1].weights["nr"] > 0
    assert loop.carrier_down("cpe-1") == []


def test_an_event_for_a_cpe_not_decided_here_changes_nothing() -> None:
    loop, sink, _, _, _ = make_loop(paper_table())
    loop.step(0.0)
    loop.access_event("cpe-9", "wifi", False, 0.5)
    assert loop.decide_now({"cpe-9"}, 0.5) == []
    assert len(sink.pushed) == 1


class SlowSink(RecordingSink):
    """An agent that takes ``seconds`` to answer."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def push(self, weight_set: WeightSet) -> None:
        time.sleep(self.seconds)
        super().push(weight_set)


def test_a_push_says_its_control_delay_from_the_report_s_arrival() -> None:
    """Report arrival → decision → the agent's answer, measured on the monotonic clock: the
    figures the simulated loop's control delay stands for."""
    loop, _, _, source, _ = make_loop(paper_table())
    loop._sink = sink = SlowSink(0.05)
    arrived = time.monotonic()
    source.queue.append(
        KpiSample("cpe-1", "wifi", DL, 1.0, 1.0, throughput_mbps=500.0, received_s=arrived)
    )
    time.sleep(0.02)  # the step comes a little after the report
    (outcome,) = loop.step(1.0)
    assert outcome.pushed is not None
    assert sink.pushed
    delay = outcome.delay
    assert delay is not None
    assert 0.02 <= delay.decided_s < delay.applied_s
    assert delay.applied_s >= delay.decided_s + 0.05  # the agent's answer is part of it


def test_a_push_without_a_report_s_arrival_has_no_delay() -> None:
    """The simulated loop's reports carry no arrival time, nor does an override's own set."""
    loop, _, store, source, _ = make_loop(paper_table())
    source.queue.append(KpiSample("cpe-1", "wifi", DL, 1.0, 1.0, throughput_mbps=500.0))
    (first,) = loop.step(1.0)
    assert first.pushed is not None
    assert first.delay is None
    source.queue.append(
        KpiSample("cpe-1", "wifi", DL, 2.0, 1.0, throughput_mbps=500.0, received_s=time.monotonic())
    )
    store.save_override(Override("cpe-1", DL, weights={"nr": 1, "wifi": 1, "lifi": 1}))
    (overridden,) = loop.step(2.0)
    assert overridden.pushed is not None
    assert overridden.delay is None


def test_pushes_are_limited_per_cpe_and_direction_and_urgent_ones_never_held_back() -> None:
    """With at most 2 pushes a second, decisions every 100 ms that each see a large gain push
    at most 2 a second over a minute, first weights included; a lost path is pushed at once
    all the same, and the pushes for a gain after it wait until the budget has refilled."""
    loop, sink, _, _, estimator = make_loop(paper_table())
    loop._hysteresis = Hysteresis(0.01, max_pushes_per_s=2.0)
    pushed_at = []
    ticks = 600
    for tick in range(ticks):
        now = tick * 0.1
        # NR alternates between two capacities far enough apart that each is a gain
        nr = 342.0 if tick % 2 else 600.0
        estimator.table = {**paper_table(now), "nr": estimate("nr", nr, at_s=now)}
        for outcome in loop.step(now):
            if outcome.pushed is not None:
                pushed_at.append(now)
            else:
                assert "held back" in outcome.reason or "unchanged" in outcome.reason, outcome
    span_s = ticks * 0.1
    # every push counted, the first weights too: the limit holds over the whole span
    assert len(pushed_at) <= 2.0 * span_s + 1, len(pushed_at)
    # the budget refills: pushes go on to the end, not a burst and then nothing
    assert len([t for t in pushed_at if t >= span_s / 2]) >= 2.0 * span_s / 2 - 2
    # a path lost is not a gain: it goes at once, even with the budget spent
    budget = loop._budgets[("cpe-1", DL)]
    budget.refill(60.0)  # (as of now: a decision held back needs no refill, none was made)
    budget.tokens = 0.0
    estimator.table = {
        **paper_table(60.0),
        "wifi": estimate("wifi", 0.0, at_s=60.0, available=False),
    }
    (lost,) = loop.step(60.0)
    assert lost.pushed is not None, lost.reason
    assert "lost" in lost.reason
    assert len(sink.pushed) == len(pushed_at) + 1
    # ... and it was borrowed: half a second later a gain still waits for the budget
    assert budget.tokens < 0
    estimator.table = {
        **paper_table(60.5),
        "wifi": estimate("wifi", 0.0, at_s=60.5, available=False),
        "nr": estimate("nr", 900.0, at_s=60.5),
    }
    (waiting,) = loop.step(60.5)
    assert waiting.pushed is None
    assert "held back" in waiting.reason, waiting.reason


def test_the_push_budget_starts_empty_keeps_large_gains_and_holds_back_small_ones() -> None:
    """Empty at first (a full bucket let 20 s of pushes more through than the limit), it fills
    at the limit's rate; half spent, it still lets a large gain through and holds back a small
    one; spent, it holds back every gain until it refills."""
    budget = PushBudget.empty(2.0, now_s=0.0)
    size = PushBudget.size_for(2.0)
    assert budget.gain_needed(0.01) is None
    # Young, it judges what is left against what it has earned: two seconds in, with the first
    # weights spent, 3 of 4 tokens are left, and a gain of 1.4 % goes (not 1 % × 40 / 3).
    budget.spend()
    budget.refill(2.0)
    assert budget.gain_needed(0.01) == pytest.approx(0.01 * 4 / 3)
    budget.spend()
    budget.refill(1000.0)
    assert budget.tokens == size
    assert budget.gain_needed(0.01) == pytest.approx(0.01)
    for _ in range(int(size / 2)):
        budget.spend()
    needed = budget.gain_needed(0.01)
    assert needed is not None
    assert 0.015 < needed < 0.03
    for _ in range(int(size / 2)):
        budget.spend()
    assert budget.gain_needed(0.01) is None
    budget.refill(1000.5)  # one push's worth at 2 a second
    assert budget.gain_needed(0.01) == pytest.approx(0.01 * size)
    budget.spend()
    budget.spend()  # a push that could not wait: in debt
    assert budget.tokens == pytest.approx(-1.0)
    budget.refund()
    assert budget.tokens == pytest.approx(0.0)


def test_the_push_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_pushes_per_s must be > 0"):
        Hysteresis(0.01, max_pushes_per_s=0.0)


class LaneSink(RecordingSink):
    """A proxy-like sink (its sets travel in batches) that notes which threads push."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def batched(self, cpe_id: str, direction: Direction) -> bool:
        return True

    def push(self, weight_set: WeightSet) -> None:
        self.threads.append(threading.current_thread().name)
        super().push(weight_set)


def test_batched_pushes_have_their_lane_and_urgent_ones_keep_theirs() -> None:
    """A step's pushes to a proxy go through the batched lane; a push decided at once (an
    agent's event) through the urgent lane, not behind a step's thousands."""
    loop, _, _, _, _ = make_loop(paper_table())
    loop._sink = sink = LaneSink()
    loop._push_wait_s = 5.0
    loop.step(0.0)
    assert sink.threads
    assert all(t.startswith("batched-push") for t in sink.threads)
    sink.threads.clear()
    loop.access_event("cpe-1", "wifi", False, 1.0)
    loop.decide_now({"cpe-1"}, 1.0)
    assert sink.threads
    assert all(t.startswith("urgent-push") for t in sink.threads)
    loop.close()
