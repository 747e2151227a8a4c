"""Samples made from columns, carrying the columns they were made from.

The E2 reader reads a fleet's KPM message as columns (UEs × measurements) and makes a sample
per UE and direction from them (xapp/e2/sample_rows.py). The estimators then want columns
again: per access and direction, each field and measurement as an array over the step's
samples (xapp/estimators/columns.py). Read back sample by sample, that was some fifty passes
over a step's 6,000 objects or a group of them at 1,000 CPEs and 100 ms, about 8 ms of a
140 ms period. A
``SampleBatch`` is the list of samples as before, and also says what it was made from, so a
step whose samples are batches builds its columns from these arrays (tests/test_sample_batch.py
holds the two readings equal).

What a batch can say without its samples: every field of each (the throughput and link state
per sample; time, period and arrival one for all; round-trip time and loss never said), and,
per direction, the columns of the measurements that every sample keeps under one key at one
place. A measurement whose key differs by UE (NR's CQI bin) is read from the samples.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

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
    # of the direction keeps at one place under that key
    measurements: dict[str, FloatArray]
    # every key any of them could carry (a name outside it is absent from every sample)
    keys: frozenset[str]


class SampleBatch(list[KpiSample]):
    """Samples of one access made from columns, with those columns (``made``)."""

    access: str
    time_s: float
    period_s: float
    received_s: float | None
    throughput: FloatArray  # per sample, NaN where None
    available: FloatArray  # per sample: 1.0 True, 0.0 False, NaN None
    # by direction (those with samples), in the order first met among the samples
    groups: tuple[BatchGroup, ...]
    paths: list[tuple[str, str, Direction]]  # each sample's (CPE, access, direction)

    @classmethod
    def made(
        cls,
        samples: list[KpiSample],
        access: str,
        time_s: float,
        period_s: float,
        received_s: float | None,
        throughput: FloatArray,
        available: FloatArray,
        groups: Sequence[BatchGroup],
        paths: list[tuple[str, str, Direction]],
    ) -> SampleBatch:
        batch = cls(samples)
        batch.access, batch.time_s, batch.period_s = access, time_s, period_s
        batch.received_s = received_s
        batch.throughput, batch.available = throughput, available
        batch.groups = tuple(sorted(groups, key=lambda g: int(g.rows[0])))
        batch.paths = paths
        return batch

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


class Pieces(list[KpiSample]):
    """Samples that came in pieces (batches among them), with the pieces: a step reads its
    columns from the batches (``StepSamples.joined``)."""

    pieces: tuple[Sequence[KpiSample], ...] = ()


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
        taken = Pieces()
        for piece in self._pieces:
            taken.extend(piece)
        taken.pieces = tuple(self._pieces)
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
