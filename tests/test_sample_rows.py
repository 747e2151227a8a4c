"""The samples of a message read as columns: the C core (`xapp/_samples.c`) against its
Python twin, field for field, key for key and in the same order, on generated rows of every
shape the E2 reader hands over (one or two directions, values absent, keys that differ by UE
or repeat, throughputs and link states said or not)."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import math
import os
import tracemalloc
from pathlib import Path
from typing import cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.domain import Direction, KpiSample
from core.sample_batch import SampleBatch
from models.runtime import every_table_made
from xapp.e2 import sample_rows
from xapp.e2.sample_rows import DirectionRows, samples_of_rows_in_python
from xapp.estimators.columns import SampleColumns

core = sample_rows._core


def test_the_core_was_built() -> None:
    """`pip install` builds it wherever a compiler is, and the setup script installs one."""
    if os.environ.get("ATSSS_PURE_PYTHON") == "1":
        pytest.skip("ATSSS_PURE_PYTHON=1 leaves the core out on purpose")
    assert core is not None, "xapp._samples was not built: is a C compiler there?"
    source = Path(__file__).resolve().parents[1] / "xapp" / "_samples.c"
    assert hashlib.sha256(source.read_bytes()).hexdigest() == core.SOURCE_SHA256, (
        "xapp._samples was built from another source: it did not compile "
        "(pip install -v -e . says why)"
    )


needs_core = pytest.mark.skipif(
    core is None, reason="the core is not built (test_the_core_was_built says why)"
)


def _in_c(*args: object) -> list[KpiSample]:
    made: list[KpiSample] = core.samples_of_rows(KpiSample, *args)
    return made


def _fields(sample: KpiSample) -> list[tuple[str, object, type]]:
    """Every field with its value and type, in the object's own order; the measurements as
    their items in order (a NaN compares by its text: NaN never equals itself)."""
    out: list[tuple[str, object, type]] = []
    for field in dataclasses.fields(sample):
        value = given = getattr(sample, field.name)
        if field.name == "measurements":
            value = [(key, repr(v), type(v)) for key, v in given.items()]
        elif isinstance(value, float) and math.isnan(value):
            value = "nan"
        out.append((field.name, value, type(given)))
    return out


values = st.one_of(
    st.just(math.nan), st.floats(-1e9, 1e9), st.sampled_from([0.0, -0.0, 1e-300, 5e-324, 1e300])
)


@st.composite
def message_rows(draw: st.DrawFn) -> tuple[list[str], list[DirectionRows]]:
    ues = draw(st.integers(0, 12))
    ids = [f"cpe-{draw(st.integers(0, 5))}-{ue}" for ue in range(ues)]
    directions = []
    for direction in draw(
        st.sampled_from(
            [[Direction.DOWNLINK], [Direction.UPLINK], [Direction.DOWNLINK, Direction.UPLINK]]
        )
    ):
        measured = draw(st.integers(1, 5))
        shared = draw(
            st.lists(
                st.sampled_from(["a", "b", "c", "d.bin1", "d.bin2"]),
                min_size=measured,
                max_size=measured,
            )
        )
        keys = [shared] * ues
        if draw(st.booleans()):  # one measurement's key differs by UE (a CQI bin)
            place = draw(st.integers(0, measured - 1))
            keys = [[*k[:place], f"bin{ue % 3}", *k[place + 1 :]] for ue, k in enumerate(keys)]
        table = np.array(
            [[draw(values) for _ in range(measured)] for _ in range(ues)], dtype=np.float64
        ).reshape(ues, measured)
        throughput = np.array([draw(values) for _ in range(ues)], dtype=np.float64)
        link = np.array([draw(st.sampled_from([-1, 0, 1])) for _ in range(ues)], dtype=np.int8)
        directions.append(DirectionRows(direction, table, keys, throughput, link))
    return ids, directions


@needs_core
@settings(max_examples=400, deadline=None)
@given(message_rows(), st.sampled_from([None, 12.5]), st.sampled_from(["nr", "wifi", "lifi"]))
def test_the_core_makes_the_samples_python_makes(
    rows: tuple[list[str], list[DirectionRows]], received_s: float | None, access: str
) -> None:
    ids, directions = rows
    expected = samples_of_rows_in_python(ids, access, 3.25, 0.1, received_s, directions)
    made = _in_c(ids, access, 3.25, 0.1, received_s, directions)
    assert [type(s) for s in made] == [KpiSample] * len(expected)
    assert [_fields(s) for s in made] == [_fields(s) for s in expected]


def test_a_row_without_values_makes_no_sample_and_absent_values_no_key() -> None:
    """The E2 reader's rule, in both twins: a UE with nothing measured in a direction says
    nothing of it; one with some values absent carries those it has."""
    table = np.array([[1.0, math.nan], [math.nan, math.nan], [math.nan, 4.0]])
    rows = DirectionRows(
        Direction.DOWNLINK,
        table,
        [["x", "y"]] * 3,
        np.array([5.0, math.nan, math.nan]),
        np.array([1, -1, 0], dtype=np.int8),
    )
    for made in (
        samples_of_rows_in_python(["a", "b", "c"], "wifi", 1.0, 1.0, None, [rows]),
        *([_in_c(["a", "b", "c"], "wifi", 1.0, 1.0, None, [rows])] if core else []),
    ):
        assert [(s.cpe_id, dict(s.measurements)) for s in made] == [
            ("a", {"x": 1.0}),
            ("c", {"y": 4.0}),
        ]
        assert [(s.throughput_mbps, s.available) for s in made] == [(5.0, True), (None, False)]
        assert made[0] == KpiSample(
            "a", "wifi", Direction.DOWNLINK, 1.0, 1.0, 5.0, None, None, True, {"x": 1.0}
        )


@needs_core
@pytest.mark.parametrize(
    ("broken", "complaint"),
    [
        ({"values": np.zeros((2, 2), dtype=np.float32)}, "values"),
        ({"values": np.zeros(2)}, "values"),
        ({"throughput": np.zeros(3)}, "throughput"),
        ({"link": np.zeros(2, dtype=np.int64)}, "link"),
        ({"keys_by_ue": [["x", "y"]]}, "keys_by_ue"),
        ({"keys_by_ue": [["x"], ["x"]]}, "measurement keys"),
    ],
)
def test_the_core_refuses_rows_of_the_wrong_shape(
    broken: dict[str, object], complaint: str
) -> None:
    """A caller's mistake is a ValueError naming the part, never a read past a buffer."""
    fields = {
        "direction": Direction.DOWNLINK,
        "values": np.ones((2, 2)),
        "keys_by_ue": [["x", "y"], ["x", "y"]],
        "throughput": np.ones(2),
        "link": np.ones(2, dtype=np.int8),
    } | broken
    with pytest.raises(ValueError, match=complaint):
        _in_c(["a", "b"], "nr", 1.0, 1.0, None, [DirectionRows(**fields)])  # type: ignore[arg-type]


@needs_core
def test_the_core_keeps_no_memory_once_its_samples_are_gone() -> None:
    """Every reference the core takes is given back, making samples and reading them back as
    columns: a fleet's reader makes 6,000 samples a period, for months; a dictionary or float
    lost per sample would be hundreds of MB a day."""
    ues = 200
    rows = [
        DirectionRows(
            direction,
            np.arange(ues * 3, dtype=np.float64).reshape(ues, 3),
            [["x", "y", "z"]] * ues,
            np.arange(ues, dtype=np.float64),
            np.ones(ues, dtype=np.int8),
        )
        for direction in (Direction.DOWNLINK, Direction.UPLINK)
    ]
    ids = [f"cpe-{ue}" for ue in range(ues)]

    def churn(times: int) -> None:
        for _ in range(times):
            made = _in_c(ids, "nr", 1.0, 1.0, 2.0, rows)
            assert len(made) == 2 * ues
            # and read back as columns (the estimators' reading, xapp/estimators/columns.py)
            group = SampleColumns(made).groups["nr", Direction.UPLINK]
            assert group.column("y").sum() + group.throughput.sum() > 0
            assert not group.down.any()

    churn(20)  # (the allocator's pools settle)
    # Models an earlier test of this worker loaded make their tree tables in a thread of their
    # own (models/runtime.py), parsing ONNX protobufs: megabytes that tracemalloc would count.
    assert every_table_made(timeout=300), "a model's tree tables still being made"
    gc.collect()
    tracemalloc.start()
    try:
        churn(1)
        gc.collect()
        before, _ = tracemalloc.get_traced_memory()
        churn(200)  # 80,000 samples: a lost float each would be over 2 MB
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024


@needs_core
def test_the_cores_samples_are_out_of_the_collectors_sight() -> None:
    """A sample can never be part of a reference cycle, so the cyclic collector is not made to
    walk a fleet's thousands each step (xapp/_samples.c): neither it nor its fields' dictionary
    is tracked, while reference counting still frees them (the test above)."""
    rows = [
        DirectionRows(
            Direction.DOWNLINK,
            np.ones((3, 2)),
            [["x", "y"]] * 3,
            np.ones(3),
            np.ones(3, dtype=np.int8),
        )
    ]
    made = _in_c(["a", "b", "c"], "nr", 1.0, 1.0, 2.0, rows)
    assert len(made) == 3
    assert not any(gc.is_tracked(sample) for sample in made)
    python = samples_of_rows_in_python(["a"], "nr", 1.0, 1.0, 2.0, rows)
    assert gc.is_tracked(python[0])  # (the twin's are as any object: no harm, only walked)


@needs_core
def test_the_core_takes_only_str_as_measurement_keys() -> None:
    """A measurement's key is a catalogue name: anything else is a TypeError naming it (a
    str's hash runs no Python code, so nothing can change the lists while they are read)."""
    rows = DirectionRows(
        Direction.DOWNLINK,
        np.ones((1, 1)),
        [[7]],  # type: ignore[list-item]
        np.ones(1),
        np.ones(1, dtype=np.int8),
    )
    with pytest.raises(TypeError, match="a measurement key is int"):
        _in_c(["a"], "nr", 1.0, 1.0, None, [rows])


@needs_core
def test_the_core_reads_the_samples_as_they_were_when_reading_runs_code() -> None:
    """Reading a field or a value may run Python code (a property, ``__float__``) that changes
    the list being read: the core reads the samples it was given, and never past its end."""
    samples: list[object] = []

    class Emptying:
        access, direction = "nr", Direction.DOWNLINK

        @property
        def throughput_mbps(self) -> float:
            samples.clear()
            return 5.0

    class Shrinking:
        def __float__(self) -> float:
            mappings.clear()
            return 2.0

    samples.extend(Emptying() for _ in range(50))
    out = np.empty(50)
    core.float_field(samples, "throughput_mbps", out)
    assert out.tolist() == [5.0] * 50
    mappings: list[dict[str, Shrinking]] = [{"x": Shrinking()} for _ in range(50)]
    core.measurement(mappings, "x", out)
    assert out.tolist() == [2.0] * 50


def test_a_paths_key_is_one_tuple_in_every_batch_that_names_it() -> None:
    """A fleet's batches name the same paths every period: each batch's paths are its
    samples' (CPE, access, direction), and a path's key is the same tuple in every batch (made
    once, not once a period for the collector to walk), also where a UE says nothing in one
    direction."""
    ues = 1000
    ids = [f"cpe-{ue:04d}" for ue in range(ues)]

    def rows(silent: set[int]) -> list[DirectionRows]:
        made = []
        for direction in (Direction.DOWNLINK, Direction.UPLINK):
            values = np.arange(ues * 2, dtype=np.float64).reshape(ues, 2)
            if direction is Direction.UPLINK:
                values[sorted(silent)] = np.nan
            made.append(
                DirectionRows(
                    direction,
                    values,
                    [["a", "b"]] * ues,
                    np.full(ues, np.nan),
                    np.full(ues, -1, dtype=np.int8),
                )
            )
        return made

    batches = [
        sample_rows.samples_of_rows(ids, "wifi", t, 1.0, None, rows(silent))
        for t, silent in ((1.0, set()), (2.0, set()), (3.0, {3, 500}))
    ]
    for batch in batches:
        assert isinstance(batch, SampleBatch)
        assert batch.paths == [(s.cpe_id, s.access, s.direction) for s in list(batch)]
    first, second, third = (cast(SampleBatch, batch).paths for batch in batches)
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert len(third) == 2 * ues - 2
