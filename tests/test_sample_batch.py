"""A step's columns read from the batches its samples came in (core/sample_batch.py) are the
columns read back from the samples themselves, bit for bit: the same groups in the same order,
the same places, fields and measurements (NaN where absent, a -0.0 kept), the same names; and
the E2 source's bounded backlog of pieces keeps and drops what a bounded queue of samples
does."""

from __future__ import annotations

import gc
import math
import weakref
from collections import deque
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.domain import Direction, KpiSample
from core.sample_batch import Pieces, SampleBacklog, SampleBatch, fixed_columns, holders_of
from core.slots import Slots
from tests.test_sample_rows import message_rows
from xapp.e2 import sample_rows
from xapp.e2.kpi_source import E2KpiSource
from xapp.e2.sample_rows import DirectionRows, batch_of, samples_of_rows_in_python
from xapp.estimators.columns import SampleColumns, SampleRings, StepSamples, as_step

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
) -> Sequence[KpiSample]:
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
    # (each key keyed by UE has its column too: no UE lists a key twice)
    assert sorted(group.measurements) == ["bin1", "bin2", "x", "y"]
    np.testing.assert_array_equal(group.measurements["bin1"], [2.0, 6.0])
    np.testing.assert_array_equal(group.measurements["bin2"], [math.nan, math.nan])
    np.testing.assert_array_equal(group.measurements["y"], [3.0, math.nan])
    assert group.names() == {"x", "bin1", "y"}
    twice = DirectionRows(
        Direction.DOWNLINK,
        values,
        [["x", "bin1", "bin1"], ["x", "bin2", "y"]],
        np.array([5.0, -0.0]),
        np.array([1, 0], dtype=np.int8),
    )
    listed_twice = _batch((["a", "b"], [twice]), "nr", None)
    assert isinstance(listed_twice, SampleBatch)
    (group_twice,) = listed_twice.groups
    assert sorted(group_twice.measurements) == ["x"]  # (a UE's own value read from it)
    assert group_twice.names() is None
    _assert_read_alike(StepSamples.joined([listed_twice]), StepSamples(list(listed_twice)))
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


@settings(max_examples=200, deadline=None)
@given(
    message_rows(),
    st.sampled_from(["nr", "wifi"]),
    st.booleans(),
    st.lists(
        st.one_of(
            st.integers(-30, 30).map(lambda i: ("index", i)),
            st.tuples(st.integers(-30, 30), st.integers(-30, 30), st.sampled_from([1, 2, -1])).map(
                lambda s: ("slice", slice(*s))
            ),
            st.lists(st.integers(0, 30), max_size=20).map(lambda rows: ("rows", rows)),
        ),
        max_size=8,
    ),
    st.sampled_from([0, 1, sample_rows.FEW]),
)
def test_a_batch_makes_each_sample_when_read_as_python_makes_it(
    rows: tuple[list[str], list[DirectionRows]],
    access: str,
    with_core: bool,
    reads: list[tuple[str, object]],
    few: int,
) -> None:
    """Read one by one, by slices or by rows, in any order, with the core or without, one at
    a time or together (``FEW``): each sample is the one the Python twin makes up front, made
    once (read again, the same object), and a list's errors are a list's."""
    ids, directions = rows
    expected = samples_of_rows_in_python(ids, access, 2.0, 1.0, 7.5, directions)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(sample_rows, "FEW", few)
        if not with_core:
            patched.setattr(sample_rows, "_core", None)
        batch = sample_rows.samples_of_rows(ids, access, 2.0, 1.0, 7.5, directions)
        if not isinstance(batch, SampleBatch):
            assert batch == expected  # (no sample at all)
            return
        first: dict[int, KpiSample] = {}
        for kind, what in reads:
            if kind == "index":
                assert isinstance(what, int)
                if not -len(expected) <= what < len(expected):
                    with pytest.raises(IndexError):
                        batch[what]
                    continue
                got, want, at = [batch[what]], [expected[what]], [what % len(expected)]
            elif kind == "slice":
                assert isinstance(what, slice)
                got, want = batch[what], expected[what]
                at = list(range(len(expected)))[what]
            else:
                at = [row for row in what if row < len(expected)]  # type: ignore[attr-defined]
                got, want = batch.made_at(at), [expected[row] for row in at]
            assert got == want
            for row, sample in zip(at, got, strict=True):
                assert first.setdefault(row, sample) is sample
        assert list(batch) == expected
        assert batch._unmade == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(message_rows(), st.booleans()), max_size=4),
    st.lists(st.integers(-40, 40), max_size=10),
)
def test_pieces_read_as_the_list_of_their_samples(
    messages: list[tuple[tuple[list[str], list[DirectionRows]], bool]], reads: list[int]
) -> None:
    """Batches and plain lists joined (``Pieces``, a step's ``StepSamples``): indexing, slicing,
    rows read together and every sample held where it is (``holders_of``) as the list of all
    the samples reads them."""
    pieces = [
        _batch(rows, "wifi", None) if as_batch else list(_batch(rows, "wifi", None))
        for rows, as_batch in messages
    ]
    every = [s for piece in pieces for s in piece]
    for joined in (Pieces(pieces), StepSamples.joined(pieces)):
        assert len(joined) == len(every)
        for at in reads:
            if -len(every) <= at < len(every):
                assert joined[at] is every[at]
            else:
                with pytest.raises(IndexError):
                    joined[at]
        assert joined[1::2] == every[1::2]
        rows = [at % len(every) for at in reads] if every else []
        assert Pieces.made_at(joined, rows) == [every[row] for row in rows]
        holders, places = holders_of(joined)
        assert [holder[row] for holder, row in zip(holders, places, strict=True)] == every
        assert joined == every


@settings(max_examples=100, deadline=None)
@given(st.lists(message_rows(), min_size=1, max_size=5), st.integers(1, 4))
def test_rings_keep_a_batchs_samples_unmade_and_give_them_back(
    messages: list[tuple[list[str], list[DirectionRows]]], depth: int
) -> None:
    """``SampleRings`` fed a step of batches, message after message (one per step), keeps
    where each sample is held, makes none of the newest, and gives back each path's history
    as rings fed the same samples made up front do."""
    lazy, eager = SampleRings(depth), SampleRings(depth)
    slots: Slots[tuple[str, str, Direction]] = Slots()
    batches = []
    for ids, directions in messages:
        unique = [f"{cpe}-{ue}" for ue, cpe in enumerate(ids)]  # (a path once per step)
        batch = _batch((unique, directions), "lifi", None)
        plain = list(_batch((unique, directions), "lifi", None))
        if not isinstance(batch, SampleBatch):
            continue
        batches.append(batch)
        step = StepSamples.joined([batch])
        places = slots.many(step.paths)
        for rings in (lazy, eager):
            rings.grow(len(slots))
        lazy.put(places, step)
        eager.put(places, plain)
    if batches:  # (the newest put's samples are kept unmade; older ones may be made)
        assert batches[-1]._unmade == len(batches[-1])
    for place in range(len(slots)):
        assert lazy.history(place) == eager.history(place)
        assert lazy.newest(place) == eager.newest(place)


def test_rings_let_go_of_the_batches_of_paths_gone_quiet() -> None:
    """A 1,000-CPE message's paths, then only one of them reporting: once their samples were
    not written over for ``depth`` puts, the quiet paths keep their samples (equal, read
    back) but no longer the batch they came in, which is freed."""
    depth = 3
    ues = 1000
    rows = [
        DirectionRows(
            Direction.UPLINK,
            np.arange(ues * 2, dtype=np.float64).reshape(ues, 2) + 1,
            [["x", "y"]] * ues,
            np.arange(ues, dtype=np.float64),
            np.ones(ues, dtype=np.int8),
        )
    ]
    ids = [f"cpe-{ue:04d}" for ue in range(ues)]
    rings = SampleRings(depth)
    slots: Slots[tuple[str, str, Direction]] = Slots()
    first = _batch((ids, rows), "wifi", None)
    assert isinstance(first, SampleBatch)
    expected = samples_of_rows_in_python(ids, "wifi", 3.25, 0.1, None, rows)
    gone = weakref.ref(first)
    step = StepSamples.joined([first])
    places = slots.many(step.paths)
    rings.grow(len(slots))
    rings.put(places, step)
    del first, step
    for _ in range(2 * depth):
        alone = _batch((ids[:1], [r._replace(values=r.values[:1]) for r in rows]), "wifi", None)
        alone_step = StepSamples.joined([alone])
        rings.put(slots.many(alone_step.paths), alone_step)
    gc.collect()
    assert gone() is None
    for place in places[1:].tolist():
        assert rings.history(place) == (expected[place],)
