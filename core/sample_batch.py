"""Samples made from columns, carrying the columns they were made from.

The E2 reader reads a fleet's KPM message as columns (UEs × measurements) and makes a sample
per UE and direction from them (xapp/e2/sample_rows.py). The estimators then want columns
again: per access and direction, each field and measurement as an array over the step's
samples (xapp/estimators/columns.py). Read back sample by sample, that was some fifty passes
over a step's 6,000 objects or a group of them at 1,000 CPEs and 100 ms, about 8 ms of a
140 ms period. A
``SampleBatch`` is a sequence of the samples, and also says what it was made from, so a step
whose samples are batches builds its columns from these arrays (tests/test_sample_batch.py
holds the two readings equal); and as the estimators then read a fleet's step as columns, a
batch makes each sample only when it is read (most never are).

What a batch can say without its samples: every field of each (the throughput and link state
per sample; time, period and arrival one for all; round-trip time and loss never said), and,
per direction, the columns of the measurements that every sample keeps under one key at one
place. A measurement whose key differs by UE (NR's CQI bin) is read from the samples.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import overload

import numpy as np
import numpy.typing as npt

from core.domain import Direction, KpiSample

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class BatchGroup:
    """The batch's samples of one direction."""

    direction: Direction
    rows: npt.NDArray[np.intp]  # their places in the batch, in order
    # name → the measurement of each of them (NaN where absent), for the names every sample
    # of the direction keeps at one place under that key, and (``keyed_columns``) for those
    # keyed per UE where no UE lists a key twice
    measurements: dict[str, FloatArray]
    # every key any of them could carry (a name outside it is absent from every sample)
    keys: frozenset[str]

    def names(self) -> set[str] | None:
        """Every name some sample of the group carries (a value that is not NaN), where every
        key has its column; None otherwise (read from the samples)."""
        if len(self.measurements) < len(self.keys):
            return None
        return {name for name, column in self.measurements.items() if not np.isnan(column).all()}


# Makes the samples at some rows of a batch (ascending, none made yet), in that order.
Maker = Callable[[npt.NDArray[np.intp]], list[KpiSample]]


class SampleBatch(Sequence[KpiSample]):
    """Samples of one access made from columns, with those columns; each sample is made when
    first read (``maker``) and kept. A fleet's estimators read the columns, and only a few
    samples a step one by one (a probe's record, an NR path's CQI): making every one up front
    was a fleet step's dearest Python after the policy, and its many short-lived objects kept
    the allocator asking the kernel for fresh pages."""

    access: str
    time_s: float
    period_s: float
    received_s: float | None
    throughput: FloatArray  # per sample, NaN where None
    available: FloatArray  # per sample: 1.0 True, 0.0 False, NaN None
    # by direction (those with samples), in the order first met among the samples
    groups: tuple[BatchGroup, ...]
    paths: list[tuple[str, str, Direction]]  # each sample's (CPE, access, direction)

    _made: list[KpiSample | None]
    _unmade: int
    _maker: Maker | None

    @classmethod
    def made(
        cls,
        count: int,
        maker: Maker | None,
        access: str,
        time_s: float,
        period_s: float,
        received_s: float | None,
        throughput: FloatArray,
        available: FloatArray,
        groups: Sequence[BatchGroup],
        paths: list[tuple[str, str, Direction]],
        samples: list[KpiSample] | None = None,
    ) -> SampleBatch:
        """A batch of ``count`` samples: ``samples`` if made already, else made by ``maker``
        when read."""
        batch = cls()
        if samples is not None:
            batch._made, batch._unmade, batch._maker = list(samples), 0, None
        else:
            batch._made, batch._unmade, batch._maker = [None] * count, count, maker
        batch.access, batch.time_s, batch.period_s = access, time_s, period_s
        batch.received_s = received_s
        batch.throughput, batch.available = throughput, available
        batch.groups = tuple(sorted(groups, key=lambda g: int(g.rows[0])))
        batch.paths = paths
        return batch

    def __len__(self) -> int:
        return len(self._made)

    @overload
    def __getitem__(self, index: int) -> KpiSample: ...

    @overload
    def __getitem__(self, index: slice) -> list[KpiSample]: ...

    def __getitem__(self, index: int | slice) -> KpiSample | list[KpiSample]:
        if isinstance(index, slice):
            return self.made_at(range(len(self._made))[index])
        sample = self._made[index]  # (raises IndexError as a list does)
        if sample is None:
            row = index + len(self._made) if index < 0 else index
            sample = self.made_at([row])[0]
        return sample

    def __iter__(self) -> Iterator[KpiSample]:
        return iter(self.made_at(None))

    def made_at(self, rows: Iterable[int] | None) -> list[KpiSample]:
        """The samples at these rows (None: every one), in that order; those not made yet are
        made now, together."""
        made = self._made
        if rows is not None and not isinstance(rows, range | list):
            rows = list(rows)
        if self._unmade:
            wanted = range(len(made)) if rows is None else rows
            missing = sorted({row for row in wanted if made[row] is None})
            if missing:
                assert self._maker is not None  # (unmade samples have their maker)
                fresh = self._maker(np.array(missing, dtype=np.intp))
                for row, sample in zip(missing, fresh, strict=True):
                    made[row] = sample
                self._unmade -= len(missing)
        if rows is None:
            return list(made)  # type: ignore[arg-type]  # (every one made)
        return [made[row] for row in rows]  # type: ignore[misc]  # (made above)

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same samples (a list, as the batch was before)."""
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (a sequence that compares by content)

    def __repr__(self) -> str:
        return f"SampleBatch({self.access}, {len(self)} samples, {self._unmade} not made yet)"

    def field(self, name: str) -> FloatArray | None:
        """Each sample's numeric field ``name`` as ``StepSamples.field`` reads it (NaN where
        None); None for a field the batch does not know."""
        count = len(self)
        if name == "throughput_mbps":
            return self.throughput
        if name == "available":
            return self.available
        if name in ("rtt_ms", "loss_rate_permille"):
            return np.full(count, np.nan)
        if name in ("time_s", "period_s", "received_s"):
            value = getattr(self, name)
            return np.full(count, np.nan if value is None else float(value))
        return None


def fixed_columns(
    values: FloatArray, keys_by_ue: list[list[str]]
) -> tuple[dict[str, int], frozenset[str]]:
    """Of a direction's values (UEs × measurements) keyed per UE: the keys that every UE has
    at the same single place (key → that place), and every key any UE has. A key also met at
    another place, of any UE, is left out (a sample's dictionary keeps one value per key)."""
    if not keys_by_ue:
        return {}, frozenset()
    first = keys_by_ue[0]
    width = values.shape[1] if values.ndim == 2 else len(first)
    if keys_by_ue.count(first) == len(keys_by_ue):  # (a fleet's usual: one list for all)
        distinct = [tuple(first)]
    else:  # (NR's: a CQI bin's key per UE, a dozen distinct)
        distinct = list(set(map(tuple, keys_by_ue)))
    if any(len(keys) != width for keys in distinct):
        raise ValueError("each UE needs one key per measurement")
    constant = [all(keys[place] == first[place] for keys in distinct) for place in range(width)]
    every = set().union(*distinct)
    counted: dict[str, int] = {}
    for key in first:
        counted[key] = counted.get(key, 0) + 1
    varying = {keys[place] for place, same in enumerate(constant) if not same for keys in distinct}
    fixed = {
        key: place
        for place, (key, same) in enumerate(zip(first, constant, strict=True))
        if same and counted[key] == 1 and key not in varying
    }
    return fixed, frozenset(every)


def keyed_columns(
    values: FloatArray, keys_by_ue: list[list[str]], fixed: dict[str, int]
) -> dict[str, FloatArray]:
    """Of a direction's values (UEs × measurements) keyed per UE, the column of each key
    that is not ``fixed`` (``fixed_columns``): each UE's value at the place it keys so (NaN
    where it has none), as the UE's sample's dictionary keeps it. Nothing where some UE lists
    a key twice (its dictionary keeps one of the values: read from the samples). A fleet's
    NR message keys each UE's CQI bin so."""
    if not keys_by_ue:
        return {}
    distinct = {tuple(keys) for keys in keys_by_ue}
    if any(len(set(keys)) < len(keys) for keys in distinct):
        return {}
    width = len(keys_by_ue[0])
    table = values.reshape(len(keys_by_ue), width)
    columns: dict[str, FloatArray] = {}
    for place in range(width):
        at_place = {keys[place] for keys in distinct} - fixed.keys()
        if not at_place:
            continue
        keyed = np.array([keys[place] for keys in keys_by_ue], dtype=object)
        for key in at_place:
            column = columns.get(key)
            if column is None:
                column = columns[key] = np.full(len(keys_by_ue), np.nan)
            here = keyed == key
            column[here] = table[here, place]
    return columns


class Pieces(Sequence[KpiSample]):
    """Samples that came in pieces (batches among them), read through the pieces: nothing is
    copied, and a batch's samples are made only when read. A step reads its columns from the
    batches (``StepSamples.joined``)."""

    def __init__(self, pieces: Iterable[Sequence[KpiSample]] = ()) -> None:
        self.pieces: tuple[Sequence[KpiSample], ...] = tuple(p for p in pieces if len(p))
        self._ends = list(accumulate(len(piece) for piece in self.pieces))

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, index: int) -> KpiSample: ...

    @overload
    def __getitem__(self, index: slice) -> list[KpiSample]: ...

    def __getitem__(self, index: int | slice) -> KpiSample | list[KpiSample]:
        if isinstance(index, slice):
            return self.made_at(range(len(self))[index])
        count = len(self)
        row = index + count if index < 0 else index
        if not 0 <= row < count:
            raise IndexError("sample index out of range")
        at = bisect_right(self._ends, row)
        return self.pieces[at][row - (self._ends[at - 1] if at else 0)]

    def __iter__(self) -> Iterator[KpiSample]:
        for piece in self.pieces:
            yield from piece

    def made_at(self, rows: Iterable[int]) -> list[KpiSample]:
        """The samples at these rows (none negative), in that order: each batch's made
        together."""
        wanted = np.fromiter(rows, np.intp)
        if len(self.pieces) == 1:
            return made_at(self.pieces[0], wanted.tolist())
        found: list[KpiSample | None] = [None] * len(wanted)
        piece_of = np.searchsorted(self._ends, wanted, side="right")
        for at in np.unique(piece_of).tolist():
            picked = np.flatnonzero(piece_of == at)
            start = self._ends[at - 1] if at else 0
            local = (wanted[picked] - start).tolist()
            for i, sample in zip(picked.tolist(), made_at(self.pieces[at], local), strict=True):
                found[i] = sample
        return found  # type: ignore[return-value]  # (every one found)

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same samples (a list, as it was before)."""
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (a sequence that compares by content)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} samples in {len(self.pieces)} pieces)"


def made_at(samples: Sequence[KpiSample], rows: list[int]) -> list[KpiSample]:
    """``samples[row]`` of each row: made together where the samples are made when read."""
    if isinstance(samples, SampleBatch | Pieces):
        return samples.made_at(rows)
    return [samples[row] for row in rows]


def holders_of(
    samples: Sequence[KpiSample],
) -> tuple[npt.NDArray[np.object_], npt.NDArray[np.intp]]:
    """Where each sample is held: a sequence and the sample's row in it (``holder[row]`` is
    the sample), so that it can be kept without being made (``SampleRings``)."""
    if isinstance(samples, Pieces) and len(samples.pieces) != 1:
        parts = [holders_of(piece) for piece in samples.pieces]
        if not parts:
            return np.empty(0, dtype=object), np.empty(0, dtype=np.intp)
        return (
            np.concatenate([holders for holders, _ in parts]),
            np.concatenate([rows for _, rows in parts]),
        )
    if isinstance(samples, Pieces):
        return holders_of(samples.pieces[0])
    holders = np.empty(len(samples), dtype=object)
    holders.fill(samples)
    return holders, np.arange(len(samples), dtype=np.intp)


class SampleBacklog:
    """Samples kept until read, in the pieces they came in, at most ``max_samples``: the
    oldest go first when more come (counted in ``dropped``). Not thread-safe: its owner
    locks."""

    def __init__(self, max_samples: int) -> None:
        self._pieces: deque[Sequence[KpiSample]] = deque()
        self._count = 0
        self.max_samples = max_samples
        self.dropped = 0

    def __len__(self) -> int:
        return self._count

    def keep(self, samples: Sequence[KpiSample]) -> None:
        if samples:
            self._pieces.append(samples)
            self._count += len(samples)
            self._trim()

    def resize(self, max_samples: int) -> None:
        """A new bound; the newest samples are kept (dropping none counts: the bound moved)."""
        self.max_samples = max_samples
        self._trim(count=False)

    def take(self) -> Pieces:
        """Every sample kept, oldest first, and none kept any more."""
        taken = Pieces(self._pieces)
        self._pieces.clear()
        self._count = 0
        return taken

    def _trim(self, count: bool = True) -> None:
        over = self._count - self.max_samples
        if over <= 0:
            return
        if count:
            self.dropped += over
        self._count -= over
        pieces = self._pieces
        while over:
            first = pieces[0]
            if len(first) <= over:
                pieces.popleft()
                over -= len(first)
            else:  # (its newest part stays, as plain samples)
                pieces[0] = list(first[over:])
                over = 0
