"""A step's columns read from the batches its samples came in (core/sample_batch.py) are the
columns read back from the samples themselves, bit for bit: the same groups in the same order,
the same places, fields and measurements (NaN where absent, a -0.0 kept), the same names; and
the E2 source's bounded backlog of pieces keeps and drops what a bounded queue of samples
does."""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.domain import Direction, KpiSample
from core.sample_batch import Pieces, SampleBacklog, SampleBatch, fixed_columns
from tests.test_sample_rows import message_rows
from xapp.e2 import sample_rows
from xapp.e2.kpi_source import E2KpiSource
from xapp.e2.sample_rows import DirectionRows, batch_of, samples_of_rows_in_python
from xapp.estimators.columns import SampleColumns, StepSamples, as_step

FIELDS = (
    "throughput_mbps",
    "available",
    "rtt_ms",
    "loss_rate_permille",
    "time_s",
    "period_s",
    "received_s",
)


def _same(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal arrays, NaN for NaN and the sign of each zero alike."""
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    if got.dtype.kind == "f":
        assert (np.signbit(got) == np.signbit(expected)).all()


def _assert_read_alike(from_batches: StepSamples, from_samples: StepSamples) -> None:
    assert list(from_batches) == list(from_samples)
    made, read = from_batches.columns, from_samples.columns
    assert made.count == read.count
    assert list(made.groups) == list(read.groups)  # (in the order first met)
    for key, group in read.groups.items():
        ours = made.groups[key]
        _same(made.places[key], read.places[key])
        assert [id(s) for s in ours.samples] == [id(s) for s in group.samples]
        _same(ours.throughput, group.throughput)
        _same(ours.down, group.down)
        _same(ours.time_s, group.time_s)
        assert ours.names() == group.names()
        for name in sorted(group.names() | {"never-sent"}):
            _same(ours.column(name), group.column(name))
    _same(made.time_s, read.time_s)
    _same(made.throughput, read.throughput)
    for name in FIELDS:
        _same(from_batches.field(name), from_samples.field(name))
    assert from_batches.paths == from_samples.paths


def _batch(
    rows: tuple[list[str], list[DirectionRows]], access: str, received_s: float | None
) -> list[KpiSample]:
    ids, directions = rows
    return sample_rows.samples_of_rows(ids, access, 3.25, 0.1, received_s, directions)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            message_rows(),
            st.sampled_from(["nr", "wifi", "lifi"]),
            st.sampled_from([None, 12.5]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_a_steps_columns_from_its_batches_are_those_of_its_samples(
    messages: list[tuple[tuple[list[str], list[DirectionRows]], str, float | None]],
) -> None:
    pieces = [_batch(rows, access, received_s) for rows, access, received_s in messages]
    for piece in pieces:
        assert isinstance(piece, SampleBatch) or not piece
    step = StepSamples.joined(pieces)
    assert step._batches or not any(pieces)
    _assert_read_alike(step, StepSamples([s for piece in pieces for s in piece]))


@settings(max_examples=100, deadline=None)
@given(message_rows(), st.sampled_from(["nr", "wifi"]))
def test_the_python_twins_batch_reads_alike(
    rows: tuple[list[str], list[DirectionRows]], access: str
) -> None:
    """Without the C core: the same batch, read the same."""
    ids, directions = rows
    made = samples_of_rows_in_python(ids, access, 1.5, 1.0, None, directions)
    batch = batch_of(made, ids, access, 1.5, 1.0, None, directions)
    _assert_read_alike(StepSamples.joined([batch]), StepSamples(made))


@settings(max_examples=100, deadline=None)
@given(message_rows(), st.integers(0, 3))
def test_a_step_with_a_piece_that_is_no_batch_reads_its_samples(
    rows: tuple[list[str], list[DirectionRows]], at: int
) -> None:
    """A loose sample among the batches (a report read as records): every column is read
    from the samples, the same as ever."""
    batch = _batch(rows, "nr", None)
    loose = [KpiSample("cpe-9", "nr", Direction.DOWNLINK, 3.25, 0.1, 7.0, measurements={"a": 1})]
    pieces = [batch, batch]
    pieces.insert(min(at, 2), loose)
    step = StepSamples.joined(pieces)
    assert not step._batches
    _assert_read_alike(step, StepSamples([s for piece in pieces for s in piece]))


def test_a_measurement_keyed_per_ue_is_read_from_the_samples() -> None:
    """A CQI bin's key differs by UE: no fixed column for it, nor for a key that is also met
    at another place; the fixed keys have theirs."""
    values = np.array([[1.0, 2.0, 3.0], [4.0, math.nan, 6.0]])
    keys = [["x", "bin1", "y"], ["x", "bin2", "bin1"]]
    fixed, every = fixed_columns(values, keys)
    assert fixed == {"x": 0}
    assert every == {"x", "y", "bin1", "bin2"}
    repeated, _ = fixed_columns(values, [["x", "y", "x"]] * 2)
    assert repeated == {"y": 1}
    with pytest.raises(ValueError, match="one key per measurement"):
        fixed_columns(values, [["x", "y", "z"], ["x", "y"]])
    rows = DirectionRows(
        Direction.DOWNLINK, values, keys, np.array([5.0, -0.0]), np.array([1, 0], dtype=np.int8)
    )
    batch = _batch((["a", "b"], [rows]), "nr", None)
    assert isinstance(batch, SampleBatch)
    (group,) = batch.groups
    assert sorted(group.measurements) == ["x"]
    _assert_read_alike(StepSamples.joined([batch]), StepSamples(list(batch)))


def test_a_direction_given_twice_makes_no_batch() -> None:
    """(the E2 reader gives each direction once; anything else is read from the samples)"""
    rows = DirectionRows(
        Direction.UPLINK, np.ones((1, 1)), [["x"]], np.ones(1), np.ones(1, dtype=np.int8)
    )
    made = _batch((["a"], [rows, rows]), "wifi", None)
    assert not isinstance(made, SampleBatch)
    assert len(made) == 2


def _sample(n: int) -> KpiSample:
    return KpiSample(f"cpe-{n}", "wifi", Direction.UPLINK, float(n), 1.0)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 12),
    st.lists(
        st.one_of(
            st.integers(0, 6).map(lambda n: ("keep", n)),
            st.integers(1, 12).map(lambda n: ("resize", n)),
            st.just(("take", 0)),
        ),
        max_size=25,
    ),
)
def test_the_backlog_keeps_what_a_bounded_queue_keeps(
    bound: int, actions: list[tuple[str, int]]
) -> None:
    """Against ``deque(maxlen=...)``, the E2 source's queue before: the same samples in the
    same order, the same dropped count (a smaller bound drops without counting)."""
    backlog, dropped, made = SampleBacklog(bound), 0, 0
    reference: deque[KpiSample] = deque(maxlen=bound)
    for action, n in actions:
        if action == "keep":
            piece = [_sample(made + i) for i in range(n)]
            made += n
            dropped += max(0, len(reference) + n - (reference.maxlen or 0))
            reference.extend(piece)
            backlog.keep(piece)
        elif action == "resize":
            reference = deque(reference, maxlen=n)
            backlog.resize(n)
        else:
            taken = backlog.take()
            assert isinstance(taken, Pieces)
            assert list(taken) == list(reference)
            assert [s for piece in taken.pieces for s in piece] == list(taken)
            reference.clear()
        assert len(backlog) == len(reference)
        assert backlog.dropped == dropped
    assert list(backlog.take()) == list(reference)


def test_the_e2_source_hands_the_loop_its_batches() -> None:
    """Two messages decoded, one read: the step reads its columns from both batches; a
    backlog over its bound drops the oldest samples (counted), the rest read as samples."""
    directions = [
        DirectionRows(
            Direction.DOWNLINK,
            np.array([[1.0], [2.0]]),
            [["x"]] * 2,
            np.array([3.0, 4.0]),
            np.array([-1, 1], dtype=np.int8),
        )
    ]
    first, second = (_batch((["a", "b"], directions), access, 1.0) for access in ("nr", "wifi"))
    source = E2KpiSource(max_samples=10)
    source.add(first)
    source.add(second)
    step = as_step(source.poll(5.0))
    assert [start for start, _ in step._batches] == [0, 2]
    _assert_read_alike(step, StepSamples([*first, *second]))
    small = E2KpiSource(max_samples=3)
    small.add(first)
    small.add(second)
    step = as_step(small.poll(5.0))
    assert list(step) == [first[1], *second]
    assert small.dropped == 1
    assert not step._batches  # (a batch cut short is plain samples)
    _assert_read_alike(step, StepSamples([first[1], *second]))
    assert isinstance(SampleColumns(step), SampleColumns)
