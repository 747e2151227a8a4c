"""A step's KPI samples as columns: per access and direction, each field and each
measurement as an array over the samples, NaN where absent (a NaN value is no measurement:
the E2 reader refuses one).

Every estimator reads every sample of a step: the KPI estimator its headroom formulas, the
models their inputs, the saturation labeller each path's utilisation. Sample by sample, each of
them looked the same measurements up again (a 1,000-CPE step held some 200,000 dictionary
reads); here each is read once, and the formulas run on whole columns (kpi.py's
``readings_of`` and ``utilisation_of``). The step's samples carry their columns
(``StepSamples``): the estimators share one reading, made when the first asks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property

import numpy as np
import numpy.typing as npt

from core.domain import Direction, KpiSample

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class StepSamples(list[KpiSample]):
    """A step's samples, with their columns made once, when first asked for."""

    @cached_property
    def columns(self) -> SampleColumns:
        return SampleColumns(self)


def columns_of(samples: Sequence[KpiSample]) -> SampleColumns:
    """The samples' columns: those they carry, or made now."""
    if isinstance(samples, StepSamples):
        return samples.columns
    return SampleColumns(samples)


class Group:
    """The samples of one access and direction: their places in the step, their fields and
    their measurements as columns (each made when first read)."""

    def __init__(self, access: str, direction: Direction, samples: list[KpiSample]) -> None:
        self.access, self.direction, self.samples = access, direction, samples
        count = len(samples)
        self.throughput: FloatArray = np.fromiter(
            (math.nan if (t := s.throughput_mbps) is None else t for s in samples),
            np.float64,
            count,
        )
        # the link state the sample's field says: down (False), or not said to be (None, True)
        self.down: BoolArray = np.fromiter((s.available is False for s in samples), bool, count)
        self._measurements = [s.measurements for s in samples]
        self._columns: dict[str, FloatArray] = {}
        self._derived: dict[str, FloatArray] = {}

    def __len__(self) -> int:
        return len(self.samples)

    def column(self, name: str) -> FloatArray:
        """The measurement of each sample, NaN where absent."""
        found = self._columns.get(name)
        if found is None:
            found = self._columns[name] = np.fromiter(
                (m.get(name, math.nan) for m in self._measurements),
                np.float64,
                len(self._measurements),
            )
        return found

    def memo(self, name: str, make: Callable[[], FloatArray]) -> FloatArray:
        """A column derived from the others (``make``), made once for the step."""
        found = self._derived.get(name)
        if found is None:
            found = self._derived[name] = make()
        return found


class SampleColumns:
    """A step's samples by access and direction (``Group``), in the step's order within each."""

    def __init__(self, samples: Sequence[KpiSample]) -> None:
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
        self.count = len(samples)
        self.groups = {key: Group(*key, group) for key, group in members.items()}
        self.places = {key: np.array(rows, dtype=np.intp) for key, rows in places.items()}

    def in_order(self, per_group: Iterable[FloatArray]) -> FloatArray:
        """Values per group (in ``groups``' order) as one column in the step's order."""
        out = np.full(self.count, math.nan)
        for rows, values in zip(self.places.values(), per_group, strict=True):
            out[rows] = values
        return out
