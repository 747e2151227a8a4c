"""The KPI samples of a message read as columns: one ``KpiSample`` per UE and direction.

The E2 reader works a message out as arrays (``IndicationProcessor._samples_of_columns``); the
loop's estimators still take one sample object per CPE, access and direction. Making those
objects is the last per-UE step of reading a report, and at 1,000 CPEs the biggest: 6,000 a
period, about 3 µs each in Python (a dictionary of measurements, a call with eleven fields).
``xapp/_samples.c`` makes the same objects in C, where ``pip install`` could build it;
``samples_of_rows_in_python`` is its twin, the reference it is tested against
(tests/test_sample_rows.py) and what runs without a compiler.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import repeat
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from core.compiled import compiled_core
from core.domain import Direction, KpiSample
from core.sample_batch import BatchGroup, SampleBatch, fixed_columns

_core = compiled_core("xapp._samples")

_LINK_STATE: dict[int, bool | None] = {-1: None, 0: False, 1: True}


class DirectionRows(NamedTuple):
    """One direction's part of a message's UEs, row by row (one row per UE)."""

    direction: Direction
    values: npt.NDArray[np.float64]  # (UEs, measurements), NaN where a UE has no value
    keys_by_ue: list[list[str]]  # each UE's measurement keys, in the values' column order
    throughput: npt.NDArray[np.float64]  # the throughput field per UE, NaN where not said
    link: npt.NDArray[np.int8]  # the link state per UE: -1 not said, 0 down, 1 up


def samples_of_rows(
    cpe_ids: list[str],
    access: str,
    time_s: float,
    period_s: float,
    received_s: float | None,
    directions: Sequence[DirectionRows],
) -> list[KpiSample]:
    """Per UE (``cpe_ids[ue]`` its CPE), then per direction in the order given, the sample
    ``KpiSample.made`` makes: its measurements the row's values that are not NaN, keyed as
    ``keys_by_ue`` says, in column order; no sample where a row has no value at all. They
    come as a ``SampleBatch``, with the columns they were made from (core/sample_batch.py)."""
    if _core is None:
        twin = samples_of_rows_in_python(cpe_ids, access, time_s, period_s, received_s, directions)
        return batch_of(twin, cpe_ids, access, time_s, period_s, received_s, directions)
    # (the core reads each array's memory as it lies: C order, these types)
    rows = [
        DirectionRows(
            d.direction,
            np.ascontiguousarray(d.values, dtype=np.float64),
            d.keys_by_ue,
            np.ascontiguousarray(d.throughput, dtype=np.float64),
            np.ascontiguousarray(d.link, dtype=np.int8),
        )
        for d in directions
    ]
    made: list[KpiSample] = _core.samples_of_rows(
        KpiSample, cpe_ids, access, time_s, period_s, received_s, rows
    )
    return batch_of(made, cpe_ids, access, time_s, period_s, received_s, directions)


def batch_of(
    made: list[KpiSample],
    cpe_ids: list[str],
    access: str,
    time_s: float,
    period_s: float,
    received_s: float | None,
    directions: Sequence[DirectionRows],
) -> list[KpiSample]:
    """The samples ``samples_of_rows`` made from these rows as a ``SampleBatch``: where each
    sample came from (a UE with a value in a direction made one, UE by UE, then direction by
    direction) and the columns it was made of. A plain list where a direction repeats."""
    if not made or len({d.direction for d in directions}) < len(directions):
        return made
    ues = len(cpe_ids)
    # (UEs × directions): which made a sample, and its place among the samples
    has = np.column_stack(
        [~np.isnan(d.values.reshape(ues, -1)).all(axis=1) for d in directions]
    ).reshape(ues, len(directions))
    place = (np.cumsum(has.ravel()) - 1).reshape(has.shape)
    if int(has.sum()) != len(made):
        raise AssertionError("the samples are not those of the rows")  # (a caller's mistake)
    # each sample's path, (CPE, access, direction): its UE's and its direction's, in order
    ue_of, column_of = np.nonzero(has)
    ids = np.array(cpe_ids, dtype=object)[ue_of].tolist()
    ways = np.array([d.direction for d in directions], dtype=object)[column_of].tolist()
    paths = list(zip(ids, repeat(access), ways))
    throughput = np.full(len(made), np.nan)
    available = np.full(len(made), np.nan)
    groups = []
    for column, d in enumerate(directions):
        ues_in = np.flatnonzero(has[:, column])
        if not len(ues_in):
            continue  # (no sample of this direction: no group, as read from the samples)
        rows = place[ues_in, column]
        throughput[rows] = d.throughput[ues_in]
        link = d.link[ues_in]
        available[rows] = np.where(link < 0, np.nan, link.astype(np.float64))
        fixed, keys = fixed_columns(d.values, d.keys_by_ue)
        values = d.values.reshape(ues, -1)
        measurements = {key: values[ues_in, at] for key, at in fixed.items()}
        groups.append(BatchGroup(d.direction, rows, measurements, keys))
    return SampleBatch.made(
        made, access, time_s, period_s, received_s, throughput, available, groups, paths
    )


def samples_of_rows_in_python(
    cpe_ids: list[str],
    access: str,
    time_s: float,
    period_s: float,
    received_s: float | None,
    directions: Sequence[DirectionRows],
) -> list[KpiSample]:
    """``samples_of_rows`` in Python: the reference of the C core."""
    # each direction's columns as plain numbers, once (numpy's rows cost more read one by one)
    plain = [
        (
            d.direction,
            d.values.tolist(),
            d.keys_by_ue,
            [None if t != t else t for t in d.throughput.tolist()],
            [_LINK_STATE[state] for state in d.link.tolist()],
        )
        for d in directions
    ]
    samples: list[KpiSample] = []
    made = KpiSample.made
    for ue, cpe_id in enumerate(cpe_ids):
        for direction, values, keys_by_ue, throughputs, links in plain:
            measurements = {
                key: value
                for key, value in zip(keys_by_ue[ue], values[ue], strict=True)
                if not math.isnan(value)
            }
            if not measurements:
                continue
            samples.append(
                made(
                    cpe_id,
                    access,
                    direction,
                    time_s,
                    period_s,
                    throughputs[ue],
                    None,
                    None,
                    links[ue],
                    measurements,
                    received_s,
                )
            )
    return samples
