"""The KPI samples of a message read as columns: one ``KpiSample`` per UE and direction.

The E2 reader works a message out as arrays (``IndicationProcessor._samples_of_columns``); the
loop's estimators take a sequence of sample objects per CPE, access and direction, and read
most of it as the columns it carries (``core.sample_batch.SampleBatch``). A sample is made
only when read one by one (a few a step), in C where ``pip install`` could build
``xapp/_samples.c`` (a dictionary of measurements, eleven fields); ``samples_of_rows_in_python``
is its twin, the reference it is tested against (tests/test_sample_rows.py) and what runs
without a compiler.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain, repeat
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from core.compiled import compiled_core
from core.domain import Direction, KpiSample
from core.sample_batch import BatchGroup, SampleBatch, fixed_columns, keyed_columns

_core = compiled_core("xapp._samples")

_LINK_STATE: dict[int, bool | None] = {-1: None, 0: False, 1: True}

Path = tuple[str, str, Direction]  # (CPE, access, direction)

# One key per path for the process, by access and direction then CPE: a fleet's batches name the
# same paths every period, and a tuple made anew for each is kept with its batch (in the
# estimators' rings) until the collector has walked it once: at 10,000 CPEs 60,000 of the
# 130,000 objects a step left it to walk. CPEs come and go: a table past MAX_PATH_KEYS starts
# again rather than grow (the xApp's UE table does the same).
_PATH_KEYS: dict[tuple[str, Direction], dict[str, Path]] = {}
MAX_PATH_KEYS = 200_000


def path_keys(cpe_ids: Sequence[str], access: str, direction: Direction) -> list[Path]:
    """``(cpe_id, access, direction)`` of each CPE, the same tuple for a path every time."""
    table = _PATH_KEYS.get((access, direction))
    if table is None or len(table) > MAX_PATH_KEYS:
        table = _PATH_KEYS[(access, direction)] = {}
    keys: list[Path | None] = list(map(table.get, cpe_ids))
    if None in keys:  # (a path met for the first time: its key made once)
        for i, cpe_id in enumerate(cpe_ids):
            if keys[i] is None:
                keys[i] = table.setdefault(cpe_id, (cpe_id, access, direction))
    return keys  # type: ignore[return-value]  # (none is None)


# Up to this many samples of a batch read at once are made one by one in Python (a call to
# the core costs more than a few made so); more, together in the core.
FEW = 16


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
) -> Sequence[KpiSample]:
    """Per UE (``cpe_ids[ue]`` its CPE), then per direction in the order given, the sample
    ``KpiSample.made`` makes: its measurements the row's values that are not NaN, keyed as
    ``keys_by_ue`` says, in column order; no sample where a row has no value at all. They
    come as a ``SampleBatch``, with the columns they were made from (core/sample_batch.py),
    each made when first read; as a list where a direction repeats."""
    if _core is not None:  # (the core reads each array's memory as it lies: C order, these types)
        directions = [
            DirectionRows(
                d.direction,
                np.ascontiguousarray(d.values, dtype=np.float64),
                d.keys_by_ue,
                np.ascontiguousarray(d.throughput, dtype=np.float64),
                np.ascontiguousarray(d.link, dtype=np.int8),
            )
            for d in directions
        ]
    if len({d.direction for d in directions}) < len(directions):
        return _made(cpe_ids, access, time_s, period_s, received_s, directions)
    return _batch(None, cpe_ids, access, time_s, period_s, received_s, directions)


def _made(
    cpe_ids: list[str],
    access: str,
    time_s: float,
    period_s: float,
    received_s: float | None,
    directions: Sequence[DirectionRows],
) -> list[KpiSample]:
    """Every sample of the rows, made now: in C where built."""
    if _core is None:
        return samples_of_rows_in_python(cpe_ids, access, time_s, period_s, received_s, directions)
    made: list[KpiSample] = _core.samples_of_rows(
        KpiSample, cpe_ids, access, time_s, period_s, received_s, list(directions)
    )
    return made


def batch_of(
    made: list[KpiSample],
    cpe_ids: list[str],
    access: str,
    time_s: float,
    period_s: float,
    received_s: float | None,
    directions: Sequence[DirectionRows],
) -> Sequence[KpiSample]:
    """The samples ``samples_of_rows`` made from these rows, made already, as a
    ``SampleBatch``; a plain list where a direction repeats."""
    if not made or len({d.direction for d in directions}) < len(directions):
        return made
    return _batch(made, cpe_ids, access, time_s, period_s, received_s, directions)


def _batch(
    made: list[KpiSample] | None,
    cpe_ids: list[str],
    access: str,
    time_s: float,
    period_s: float,
    received_s: float | None,
    directions: Sequence[DirectionRows],
) -> Sequence[KpiSample]:
    """The rows' samples as a ``SampleBatch`` (``made``: made already, else made when read):
    where each sample comes from (a UE with a value in a direction makes one, UE by UE, then
    direction by direction) and the columns it is made of."""
    ues = len(cpe_ids)
    if not ues or not directions:
        if made:
            raise AssertionError("the samples are not those of the rows")  # (a caller's mistake)
        return []
    # (UEs × directions): which make a sample, and its place among the samples
    has = np.column_stack(
        [~np.isnan(d.values.reshape(ues, -1)).all(axis=1) for d in directions]
    ).reshape(ues, len(directions))
    count = int(has.sum())
    if made is not None and count != len(made):
        raise AssertionError("the samples are not those of the rows")  # (a caller's mistake)
    if not count:
        return []
    place = (np.cumsum(has.ravel()) - 1).reshape(has.shape)
    # each sample's path, (CPE, access, direction): its UE's and its direction's, in order
    ue_of, column_of = np.nonzero(has)
    paths: list[Path]
    if count == has.size:  # every UE in every direction (a fleet's usual): UE by UE
        per_direction = [path_keys(cpe_ids, access, d.direction) for d in directions]
        paths = list(chain.from_iterable(zip(*per_direction, strict=True)))
    else:
        ids = np.array(cpe_ids, dtype=object)[ue_of].tolist()
        ways = np.array([d.direction for d in directions], dtype=object)[column_of].tolist()
        paths = list(zip(ids, repeat(access), ways))
    throughput = np.full(count, np.nan)
    available = np.full(count, np.nan)
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
        if len(fixed) < len(keys):  # (keys by UE: NR's CQI bins)
            keyed = keyed_columns(values, d.keys_by_ue, fixed)
            measurements.update({key: column[ues_in] for key, column in keyed.items()})
        groups.append(BatchGroup(d.direction, rows, measurements, keys))

    def made_one(ue: int, column: int) -> KpiSample:
        """The sample of one UE in one direction, as ``samples_of_rows_in_python`` makes it."""
        d = directions[column]
        values = d.values.reshape(ues, -1)[ue].tolist()
        measurements = {
            key: value
            for key, value in zip(d.keys_by_ue[ue], values, strict=True)
            if not math.isnan(value)
        }
        carried = float(d.throughput[ue])
        return KpiSample.made(
            cpe_ids[ue],
            access,
            d.direction,
            time_s,
            period_s,
            None if carried != carried else carried,
            None,
            None,
            _LINK_STATE[int(d.link[ue])],
            measurements,
            received_s,
        )

    def make(rows: npt.NDArray[np.intp]) -> list[KpiSample]:
        """The samples at these rows of the batch (ascending): per direction, its UEs' rows
        made as ``samples_of_rows`` makes them (each has a value: each makes one)."""
        if len(rows) <= FEW:
            return [
                made_one(ue, column)
                for ue, column in zip(ue_of[rows].tolist(), column_of[rows].tolist(), strict=True)
            ]
        found: list[KpiSample | None] = [None] * len(rows)
        ues_at, columns_at = ue_of[rows], column_of[rows]
        for column in np.unique(columns_at).tolist():
            picked = np.flatnonzero(columns_at == column)
            ues_picked = ues_at[picked]  # (ascending, as the rows)
            d = directions[column]
            keys_by_ue = d.keys_by_ue
            these = DirectionRows(
                d.direction,
                d.values.reshape(ues, -1)[ues_picked],
                [keys_by_ue[ue] for ue in ues_picked.tolist()],
                d.throughput[ues_picked],
                d.link[ues_picked],
            )
            ids_picked = [cpe_ids[ue] for ue in ues_picked.tolist()]
            fresh = _made(ids_picked, access, time_s, period_s, received_s, [these])
            for i, sample in zip(picked.tolist(), fresh, strict=True):
                found[i] = sample
        return found  # type: ignore[return-value]  # (one each)

    return SampleBatch.made(
        count,
        make,
        access,
        time_s,
        period_s,
        received_s,
        throughput,
        available,
        groups,
        paths,
        samples=made,
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
