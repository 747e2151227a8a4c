"""What the live loop keeps and says of a fleet's step outcomes (xapp/push_record.py) and what
the service's metrics count of them (xapp/metrics.py), against the outcome-by-outcome reading
they replaced, on a step of 1,000 CPEs."""

from __future__ import annotations

import logging
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram

from core.domain import Direction, SteeringMode, WeightSet
from xapp.control_loop import ControlDelay, StepOutcome
from xapp.metrics import StageHistogram, XappMetrics
from xapp.push_record import PUSH_LINES_PER_STEP, PushRecord, pushes_and_failures

CPES = 1000


def fleet_step(seed: int, cpes: int = CPES) -> list[StepOutcome]:
    """A step's outcomes: about four in ten pushed (most with a delay), a few failed, the rest
    held with a reason."""
    rng = random.Random(seed)
    outcomes = []
    for n in range(cpes):
        for direction in (Direction.DOWNLINK, Direction.UPLINK):
            cpe_id = f"cpe-{n:04d}"
            roll = rng.random()
            if roll < 0.4:
                pushed = WeightSet(
                    cpe_id,
                    direction,
                    {"nr": rng.randint(0, 100), "wifi": rng.randint(1, 100)},
                    SteeringMode.LOAD_BALANCING,
                    rng.randint(1, 1000),
                    "predicted gain 12.0%",
                )
                delay = ControlDelay(0.01, rng.random()) if rng.random() < 0.9 else None
                outcomes.append(StepOutcome(cpe_id, direction, pushed, pushed.reason, delay))
            elif roll < 0.42:
                reason = "push failed: agent at http://a answered 503"
                outcomes.append(StepOutcome(cpe_id, direction, None, reason))
            else:
                reason = rng.choice(["unchanged", "predicted gain 1.0% below 5.0%", "pushed?"])
                outcomes.append(StepOutcome(cpe_id, direction, None, reason))
    return outcomes


def test_a_fleet_s_step_is_kept_as_each_outcome_was() -> None:
    """Counts, last pushes, times in force and delays over two steps, as the live loop kept
    them outcome by outcome (the second step's pushes and failures replace the first's)."""
    record = PushRecord()
    reference_last: dict[tuple[str, Direction], dict[str, object]] = {}
    reference_at: dict[tuple[str, Direction], float] = {}
    delays = []
    for now_s, seed in ((10.0, 1), (11.0, 2)):
        outcomes = fleet_step(seed)
        pushes = record.take(outcomes, now_s)
        assert pushes == [o for o in outcomes if o.pushed is not None]
        for o in outcomes:
            key = (o.cpe_id, o.direction)
            if o.pushed is not None:
                reference_at[key] = now_s
                reference_last[key] = {
                    "time_s": now_s,
                    "result": "applied",
                    "sequence": o.pushed.sequence,
                    "weights": dict(o.pushed.weights),
                    "reason": o.reason,
                }
                if o.delay is not None:
                    delays.append(o.delay)
            elif o.reason.startswith("push failed"):
                reference_last[key] = {"time_s": now_s, "result": "failed", "reason": o.reason}
    everything = fleet_step(1) + fleet_step(2)
    assert record.pushes == sum(o.pushed is not None for o in everything) > 700
    assert record.push_failures == sum(o.reason.startswith("push failed") for o in everything)
    assert record.last_push == reference_last
    assert record.applied_at_s == reference_at
    assert record.take_delays() == delays
    assert record.take_delays() == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["push", "fail", "held", "held-failing-word"]), max_size=40))
def test_pushes_and_failures_are_sifted_in_order(kinds: list[str]) -> None:
    weights = WeightSet("c", Direction.UPLINK, {"nr": 1}, SteeringMode.LOAD_BALANCING, 1)
    outcomes = [
        StepOutcome(
            f"c{n}",
            Direction.UPLINK,
            weights if kind == "push" else None,
            {
                "push": "push failed? no: a gain",
                "fail": "push failed: timeout",
                "held": "unchanged",
                "held-failing-word": "held back: a push failed before",
            }[kind],
        )
        for n, kind in enumerate(kinds)
    ]
    pushes, failures = pushes_and_failures(outcomes)
    assert pushes == [o for o in outcomes if o.pushed is not None]
    assert failures == [
        o for o in outcomes if o.pushed is None and o.reason.startswith("push failed")
    ]


@pytest.mark.parametrize("level", [logging.INFO, logging.DEBUG, logging.WARNING])
def test_a_fleet_s_pushes_are_logged_a_few_a_step_at_info(
    level: int, caplog: pytest.LogCaptureFixture
) -> None:
    """At INFO a step's first pushes have their lines and the rest one line (the
    ``ATSSS_LOG_LEVEL=DEBUG`` hint in it); at DEBUG every push has its line; at WARNING none.
    A step with a few pushes (a CPE or a few) has a line for each at INFO."""
    outcomes = fleet_step(3)
    pushes = [o for o in outcomes if o.pushed is not None]
    few = [o for o in fleet_step(4, cpes=10) if o.pushed is not None][:5]
    logger = logging.getLogger("xapp.live")
    with caplog.at_level(level, logger="xapp.live"):
        assert logger.isEnabledFor(level)
        PushRecord().take(outcomes, 1.0)
        PushRecord().take(few, 1.0)
    lines = [r.getMessage() for r in caplog.records if r.name == "xapp.live"]
    pushed_lines = [line for line in lines if line.startswith("pushed ")]
    if level == logging.WARNING:
        assert lines == []
    elif level == logging.DEBUG:
        assert len(pushed_lines) == len(pushes) + len(few)
        assert not any("more pushes" in line for line in lines)
    else:
        assert len(pushed_lines) == PUSH_LINES_PER_STEP + len(few)
        more = len(pushes) - PUSH_LINES_PER_STEP
        assert f"... and {more} more pushes this step (ATSSS_LOG_LEVEL=DEBUG logs each)" in lines
    if level != logging.WARNING:
        first = pushes[0]
        assert first.pushed is not None
        assert pushed_lines[0] == (
            f"pushed {first.cpe_id} {first.direction.value} {dict(first.pushed.weights)}: "
            f"{first.reason}"
        )


@pytest.mark.parametrize("via_cpe", [False, True])
def test_a_step_s_pushes_are_counted_per_role_as_one_by_one(via_cpe: bool) -> None:
    """One increment per role and result a step, the same counts as one per outcome; a
    control delay observed per push that has one."""
    registry = CollectorRegistry()
    metrics = XappMetrics(registry, None)
    outcomes = fleet_step(5)
    metrics.observe_step(0.2, outcomes, downlink_via_cpe=via_cpe)
    metrics.observe_step(0.1, outcomes[:7], downlink_via_cpe=via_cpe)
    counted: dict[tuple[str, str], int] = {}
    delays = 0
    for o in outcomes + outcomes[:7]:
        role = "cpe" if o.direction == Direction.UPLINK or via_cpe else "proxy"
        if o.pushed is not None:
            counted[(role, "applied")] = counted.get((role, "applied"), 0) + 1
            delays += o.delay is not None
        elif o.reason.startswith("push failed"):
            counted[(role, "failed")] = counted.get((role, "failed"), 0) + 1
    for (role, result), count in counted.items():
        value = registry.get_sample_value(
            "atsss_weight_pushes_total", {"role": role, "result": result}
        )
        assert value == count
    assert (
        registry.get_sample_value(
            "atsss_weight_pushes_total", {"role": "proxy", "result": "applied"}
        )
        is None
    ) == via_cpe
    for stage in ("decided", "applied"):
        observed = registry.get_sample_value("atsss_control_delay_seconds_count", {"stage": stage})
        assert observed == delays
    assert registry.get_sample_value("atsss_decision_seconds_count") == 2


BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.one_of(
                st.floats(allow_nan=True, allow_infinity=True),
                st.sampled_from([*BUCKETS, 0.0, -0.0]),
                st.floats(min_value=0, max_value=12),
            ),
            max_size=30,
        ),
        max_size=4,
    )
)
def test_a_stage_histogram_exposes_what_prometheus_histogram_does(
    steps: list[list[float]],
) -> None:
    """``StageHistogram.observe_many`` of a step's values against ``Histogram.observe`` of
    each: the same samples on a scrape (buckets, counts, sums bit for bit; NaN counted in no
    bucket, as there), but Histogram's creation times; both stages from the start."""
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    histogram = StageHistogram("delay_seconds", "d", ("decided", "applied"), BUCKETS)
    ours.register(histogram)
    reference = Histogram("delay_seconds", "d", ["stage"], buckets=BUCKETS, registry=theirs)
    for stage in ("decided", "applied"):
        reference.labels(stage)
    for values in steps:
        histogram.observe_many("decided", values)
        histogram.observe_many("applied", values[::-1])
        for value in values:
            reference.labels("decided").observe(value)
        for value in values[::-1]:
            reference.labels("applied").observe(value)
    assert _samples(ours) == _samples(theirs)


def _samples(registry: CollectorRegistry) -> list[tuple[str, dict[str, str], str]]:
    """What a scrape reads, but the creation times (repr: NaN and -0.0 told apart)."""
    return [
        (s.name, s.labels, repr(s.value))
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    ]


def test_last_pushes_are_read_whole_while_a_step_replaces_them() -> None:
    """A fleet's last pushes read from another thread (the operator API) while a step keeps
    its own: what a read took is whole (a copy of the outcomes kept when it was taken)."""
    record = PushRecord()
    record.take(fleet_step(6), 1.0)
    before = record.last_push.items()
    keys = iter(record.last_push)
    record.take(fleet_step(7), 2.0)
    assert {push["time_s"] for _, push in before} == {1.0}
    assert len(list(keys)) == len(before)
    assert {push["time_s"] for _, push in record.last_push.items()} == {1.0, 2.0}


def test_a_step_sifted_once_is_counted_and_kept_as_sifted_twice() -> None:
    """The service sifts a step's outcomes once for the metrics and the record
    (``pushes_and_failures``): the same counts, delays and last pushes as each sifting
    them on its own."""
    outcomes = fleet_step(8)
    sifted = pushes_and_failures(outcomes)
    registries = CollectorRegistry(), CollectorRegistry()
    records = PushRecord(), PushRecord()
    for registry, record, handed in zip(registries, records, (sifted, None), strict=True):
        XappMetrics(registry, None).observe_step(0.3, outcomes, True, handed)
        record.take(outcomes, 4.0, handed)
    assert _samples(registries[0]) == _samples(registries[1])
    assert registries[0].get_sample_value(
        "atsss_weight_pushes_total", {"role": "cpe", "result": "applied"}
    )
    assert records[0].last_push == records[1].last_push
    assert records[0].take_delays() == records[1].take_delays()
