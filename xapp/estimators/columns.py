"""A step's KPI samples as columns: per access and direction, each field and each
measurement as an array over the samples, NaN where absent (a NaN value is no measurement:
the E2 reader refuses one).

Every estimator reads every sample of a step: the KPI estimator its headroom formulas, the
models their inputs, the saturation labeller each path's utilisation. Sample by sample, each of
them looked the same measurements up again (a 1,000-CPE step held some 200,000 dictionary
reads); here each is read once, and the formulas run on whole columns (kpi.py's
``readings_of`` and ``utilisation_of``). The step's samples carry their columns
(``StepSamples``): the estimators share one reading, made when the first asks.

The reading itself (the samples grouped, each field and measurement of each as a double) is
done by ``xapp/_samples.c`` where ``pip install`` could build it; the generator expressions
here are its twin, the reference it is tested against (tests/test_sample_columns.py) and what
runs without a compiler.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from core.compiled import compiled_core
from core.domain import Direction, KpiSample
from core.sample_batch import BatchGroup, Pieces, SampleBatch, holders_of, made_at
from core.slots import Slots, grown

_core = compiled_core("xapp._samples")

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


Path = tuple[str, str, Direction]


class StepSamples(Pieces):
    """A step's samples, with their columns and paths made once, when first asked for: from
    the batches they came in where every one is a ``SampleBatch`` (``joined``), else read
    from the samples. Read through the pieces they came in (``Pieces``): a batch's samples
    are made only when read one by one."""

    # (start in the step, batch) of each batch the samples came in; empty: read the samples
    _batches: tuple[tuple[int, SampleBatch], ...] = ()

    def __init__(self, samples: Iterable[KpiSample] = ()) -> None:
        super().__init__([list(samples)])

    @classmethod
    def joined(cls, pieces: Iterable[Sequence[KpiSample]]) -> StepSamples:
        """The samples of every piece, in order; their columns from the batches they carry
        where every non-empty piece is one."""
        step = cls.__new__(cls)
        Pieces.__init__(step, pieces)
        starts = [0, *step._ends][: len(step.pieces)]
        if all(isinstance(piece, SampleBatch) for piece in step.pieces):
            step._batches = tuple(zip(starts, step.pieces, strict=True))  # type: ignore[arg-type]
        return step

    @cached_property
    def columns(self) -> SampleColumns:
        if self._batches:
            # (read through a view of the same pieces, not through the step itself: the step
            # holds its columns, and columns holding the step would make a cycle, which only
            # the collector frees, walking the step's paths and samples first)
            return SampleColumns.of_batches(self._batches, Pieces(self.pieces))
        return SampleColumns(self)

    @cached_property
    def paths(self) -> list[Path]:
        if self._batches:
            return [path for _, batch in self._batches for path in batch.paths]
        return _paths(self)

    def places(self, slots: Slots[Path]) -> npt.NDArray[np.intp]:
        """Each sample's path's place in ``slots`` (given now to a path without one), found
        once a step for every reader of the same slots (a fleet's step reads its thousands of
        paths in the estimators' shared slots several times)."""
        known = self._places.get(id(slots))
        if known is None or known[0] is not slots:
            known = self._places[id(slots)] = (slots, slots.many(self.paths))
        return known[1]

    @cached_property
    def _places(self) -> dict[int, tuple[Slots[Path], npt.NDArray[np.intp]]]:
        return {}

    def field(self, name: str) -> FloatArray:
        """Each sample's numeric field ``name`` (``received_s``, ``rtt_ms``, …) in the step's
        order, NaN where it is None; read once a step for every reader."""
        found = self._fields.get(name)
        if found is None:
            found = self._batch_field(name)
            if found is None:
                found = _float_field(self, name)
            self._fields[name] = found
        return found

    def _batch_field(self, name: str) -> FloatArray | None:
        """``field`` from the batches, where they know it."""
        if not self._batches:
            return None
        parts = [batch.field(name) for _, batch in self._batches]
        known = [part for part in parts if part is not None]
        if len(known) < len(parts):
            return None
        return np.concatenate(known) if len(known) > 1 else known[0]

    @cached_property
    def _fields(self) -> dict[str, FloatArray]:
        return {}


def as_step(samples: Sequence[KpiSample]) -> StepSamples:
    """The samples as a step's (their columns and paths made once, for every reader; from
    the batches they came in, where they came in pieces)."""
    if isinstance(samples, StepSamples):
        return samples
    if isinstance(samples, Pieces):
        return StepSamples.joined(samples.pieces)
    return StepSamples(samples)


def columns_of(samples: Sequence[KpiSample]) -> SampleColumns:
    """The samples' columns: those they carry, or made now."""
    if isinstance(samples, StepSamples):
        return samples.columns
    return SampleColumns(samples)


def places_of_paths(samples: Sequence[KpiSample], slots: Slots[Path]) -> npt.NDArray[np.intp]:
    """Each sample's path's place in ``slots`` (given now where missing): those the samples
    carry, or found now."""
    if isinstance(samples, StepSamples):
        return samples.places(slots)
    return slots.many(_paths(samples))


def field_of(samples: Sequence[KpiSample], name: str) -> FloatArray:
    """Each sample's numeric field ``name``, NaN where None: those the samples carry, or
    read now."""
    if isinstance(samples, StepSamples):
        return samples.field(name)
    return _float_field(samples, name)


def _float_field(samples: Sequence[KpiSample], name: str) -> FloatArray:
    """Each sample's numeric field ``name``, NaN for None: in C where built."""
    found: FloatArray = np.empty(len(samples))
    if _core is not None:
        _core.float_field(samples if isinstance(samples, list) else list(samples), name, found)
        return found
    for i, sample in enumerate(samples):
        value = getattr(sample, name)
        found[i] = math.nan if value is None else float(value)
    return found


def paths_of(samples: Sequence[KpiSample]) -> list[Path]:
    """Each sample's path, (CPE, access, direction): those the samples carry, or made now (a
    fleet's step has each estimator look its paths up, and each made the same tuples)."""
    if isinstance(samples, StepSamples | SampleBatch):
        return samples.paths
    return _paths(samples)


def _paths(samples: Sequence[KpiSample]) -> list[Path]:
    return [(s.cpe_id, s.access, s.direction) for s in samples]


def _measurement(measurements: Sequence[Mapping[str, float]], name: str) -> FloatArray:
    """The value of ``name`` in each of these measurements, NaN where absent: in C where
    built."""
    if _core is not None:
        found: FloatArray = np.empty(len(measurements))
        _core.measurement(
            measurements if isinstance(measurements, list) else list(measurements), name, found
        )
        return found
    return np.fromiter((m.get(name, math.nan) for m in measurements), np.float64, len(measurements))


def _joined(parts: Sequence[npt.NDArray[np.generic]]) -> npt.NDArray[Any]:
    """One array of the parts, in order (the part itself where there is one)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


class Group:
    """The samples of one access and direction: their places in the step, their fields and
    their measurements as columns (each made when first read)."""

    def __init__(
        self,
        access: str,
        direction: Direction,
        samples: Sequence[KpiSample],
        parts: Sequence[tuple[SampleBatch, BatchGroup]] = (),
    ) -> None:
        """``parts``: the batches the samples are, in order, and each one's group of this
        direction (their fields and fixed measurements read from there); none: read from
        the samples."""
        self.access, self.direction, self.samples = access, direction, samples
        self._parts = tuple(parts)
        self._columns: dict[str, FloatArray] = {}
        self._derived: dict[str, FloatArray] = {}
        self.down: BoolArray
        if parts:
            self.throughput = _joined([batch.throughput[g.rows] for batch, g in parts])
            self.down = _joined([batch.available[g.rows] == 0.0 for batch, g in parts])
            self.time_s = _joined([np.full(len(g.rows), batch.time_s) for batch, g in parts])
            return
        count = len(samples)
        self.throughput = _float_field(samples, "throughput_mbps")
        if _core is not None:
            self.down = np.empty(count, dtype=bool)
            _core.false_field(samples, "available", self.down)
        else:
            # the link state the sample's field says: down (False), or not said to be (None, True)
            self.down = np.fromiter((s.available is False for s in samples), bool, count)

    def __len__(self) -> int:
        return len(self.samples)

    @cached_property
    def time_s(self) -> FloatArray:
        """Each sample's time (the end of its period)."""
        return _float_field(self.samples, "time_s")

    @cached_property
    def _measurements(self) -> list[Mapping[str, float]]:
        return [s.measurements for s in self.samples]

    def column(self, name: str) -> FloatArray:
        """The measurement of each sample, NaN where absent."""
        found = self._columns.get(name)
        if found is None:
            found = self._columns[name] = (
                self._column_of_parts(name)
                if self._parts
                else _measurement(self._measurements, name)
            )
        return found

    def _column_of_parts(self, name: str) -> FloatArray:
        """``column`` from the batches: each part's fixed column, NaN where no sample of it
        could carry the name, else read from its samples."""
        out = []
        start = 0
        for _, group in self._parts:
            count = len(group.rows)
            fixed = group.measurements.get(name)
            if fixed is not None:
                out.append(fixed)
            elif name not in group.keys:
                out.append(np.full(count, math.nan))
            else:
                out.append(_measurement(self._measurements[start : start + count], name))
            start += count
        return _joined(out)

    def names(self) -> set[str]:
        """Every measurement name any sample of the group carries: from the batches' columns
        where each has every key's, else read from the samples."""
        if self._parts:
            found = [group.names() for _, group in self._parts]
            if all(names is not None for names in found):
                return set().union(*found)  # type: ignore[arg-type]  # (none None)
        return set().union(*self._measurements)

    def memo(self, name: str, make: Callable[[], FloatArray]) -> FloatArray:
        """A column derived from the others (``make``), made once for the step."""
        found = self._derived.get(name)
        if found is None:
            found = self._derived[name] = make()
        return found


class SampleColumns:
    """A step's samples by access and direction (``Group``), in the step's order within each."""

    def __init__(self, samples: Sequence[KpiSample]) -> None:
        self.count = len(samples)
        if _core is not None:
            codes = np.empty(self.count, dtype=np.int64)
            found: list[tuple[tuple[str, Direction], list[KpiSample]]] = _core.group_codes(
                list(samples), codes
            )
            self.groups = {key: Group(*key, group) for key, group in found}
            self.places = {key: np.flatnonzero(codes == i) for i, (key, _) in enumerate(found)}
            return
        members: dict[tuple[str, Direction], list[KpiSample]] = {}
        places: dict[tuple[str, Direction], list[int]] = {}
        for i, sample in enumerate(samples):
            key = (sample.access, sample.direction)
            group = members.get(key)
            if group is None:
                group = members[key] = []
                places[key] = []
            group.append(sample)
            places[key].append(i)
        self.groups = {key: Group(*key, group) for key, group in members.items()}
        self.places = {key: np.array(rows, dtype=np.intp) for key, rows in places.items()}

    @classmethod
    def of_batches(
        cls, batches: Sequence[tuple[int, SampleBatch]], samples: Sequence[KpiSample]
    ) -> SampleColumns:
        """The columns of ``samples``, which are these batches in order (each with its
        start): the same groups, in the same order, as read from the samples."""
        parts: dict[tuple[str, Direction], list[tuple[SampleBatch, BatchGroup]]] = {}
        rows: dict[tuple[str, Direction], list[npt.NDArray[np.intp]]] = {}
        for start, batch in batches:
            for group in batch.groups:  # (in the order first met in the batch)
                key = (batch.access, group.direction)
                if key not in parts:
                    parts[key], rows[key] = [], []
                parts[key].append((batch, group))
                rows[key].append(start + group.rows)
        columns = cls.__new__(cls)
        columns.count = len(samples)
        columns.places = {key: _joined(at) for key, at in rows.items()}
        columns.groups = {
            key: Group(*key, Picked(samples, columns.places[key]), parts[key]) for key in parts
        }
        return columns

    @cached_property
    def time_s(self) -> FloatArray:
        """Each sample's time, in the step's order."""
        return self.in_order(group.time_s for group in self.groups.values())

    @cached_property
    def throughput(self) -> FloatArray:
        """Each sample's throughput in the step's order, NaN where it says none."""
        return self.in_order(group.throughput for group in self.groups.values())

    def in_order(self, per_group: Iterable[FloatArray]) -> FloatArray:
        """Values per group (in ``groups``' order) as one column in the step's order."""
        out = np.full(self.count, math.nan)
        for rows, values in zip(self.places.values(), per_group, strict=True):
            out[rows] = values
        return out


class Picked(Sequence[KpiSample]):
    """Some rows of a step's samples (a group's), read through the step: one read alone is
    made alone, and reading them all makes them together (``core.sample_batch.made_at``)."""

    def __init__(self, samples: Sequence[KpiSample], rows: npt.NDArray[np.intp]) -> None:
        self._samples, self._rows = samples, rows
        self._all: list[KpiSample] | None = None

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> KpiSample: ...

    @overload
    def __getitem__(self, index: slice) -> list[KpiSample]: ...

    def __getitem__(self, index: int | slice) -> KpiSample | list[KpiSample]:
        if isinstance(index, slice) or self._all is not None:
            return self.made()[index]
        return self._samples[int(self._rows[index])]

    def __iter__(self) -> Iterator[KpiSample]:
        return iter(self.made())

    def made(self) -> list[KpiSample]:
        if self._all is None:
            self._all = made_at(self._samples, self._rows.tolist())
        return self._all


class SampleRings:
    """The last ``depth`` samples of each path, by the path's place (core/slots.py): each
    kept as where it is held (``core.sample_batch.holders_of``: a batch, made into a sample
    only when read), ``depth`` a place, written in turn, and how many each place was given. A
    step stores its thousands of samples in two array assignments; a path's samples are read
    back (and made) only when asked for (a probe's record, a label).

    A batch is kept alive by any sample of it kept so. A path that reports keeps its last
    ``depth`` steps' batches (shared with the fleet's other paths); one that stopped (a CPE
    gone quiet, or removed) would keep a whole message's columns each, for as long as its
    place lives: every ``depth`` puts, a sample not written over within the last ``depth`` is
    made and kept itself (``_unpin``)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self._holders: npt.NDArray[np.object_] = np.empty(0, dtype=object)
        self._rows: npt.NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        # per cell: the put that wrote it while it is held in a batch (0: held by itself)
        self._written: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._puts = 0
        self.counts = np.zeros(0, dtype=np.int64)  # samples given, per place

    def grow(self, size: int) -> None:
        """Room for ``size`` places."""
        if size > len(self.counts):
            self.counts = grown(self.counts, size, 0)
            cells = self.depth * len(self.counts)
            holders = np.empty(cells, dtype=object)
            holders[: len(self._holders)] = self._holders
            self._holders, self._rows = holders, grown(self._rows, cells, 0)
            self._written = grown(self._written, cells, 0)

    def put(
        self, places: npt.NDArray[np.intp], samples: Sequence[KpiSample], run: slice | None = None
    ) -> None:
        """Each sample (of ``run`` of them, if given) as its path's newest (the paths at these
        distinct places)."""
        count = self.counts[places]
        into = places * self.depth + count % self.depth
        holders, rows = holders_of(samples)
        if run is not None:
            holders, rows = holders[run], rows[run]
        self._puts += 1
        self._holders[into] = holders
        self._rows[into] = rows
        self._written[into] = self._puts
        self.counts[places] = count + 1
        if self._puts % self.depth == 0:
            self._unpin()

    def _unpin(self) -> None:
        """Each sample not written over within the last ``depth`` puts, and still held in a
        batch, made and held by itself: its path's batches are let go."""
        written = self._written
        stale = np.flatnonzero((written > 0) & (written <= self._puts - self.depth))
        for cell in stale.tolist():
            sample = self._at(cell)
            self._holders[cell] = (sample,)
            self._rows[cell] = 0
        written[stale] = 0

    def _at(self, cell: int) -> KpiSample:
        return self._holders[cell][int(self._rows[cell])]  # type: ignore[no-any-return]

    def history(self, place: int) -> tuple[KpiSample, ...]:
        """The path's samples, oldest first (at most ``depth``)."""
        total = int(self.counts[place]) if place < len(self.counts) else 0
        base, depth = place * self.depth, self.depth
        return tuple(self._at(base + n % depth) for n in range(max(0, total - depth), total))

    def newest(self, place: int) -> KpiSample | None:
        total = int(self.counts[place]) if place < len(self.counts) else 0
        return self._at(place * self.depth + (total - 1) % self.depth) if total else None

    def known(self) -> npt.NDArray[np.intp]:
        """The places given a sample."""
        return np.flatnonzero(self.counts > 0)
