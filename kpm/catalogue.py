"""The KPI catalogue: which measNames we understand, their units, scope and valid range.

The data lives in catalogue.yaml next to this module, so adding a vendor's measurement is an
edit of data, not code.
"""

from __future__ import annotations

import functools
import math
from enum import StrEnum
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

CATALOGUE_FILE = Path(__file__).with_name("catalogue.yaml")


class Scope(StrEnum):
    UE = "ue"
    CELL = "cell"


class MeasurementDirection(StrEnum):
    DOWNLINK = "downlink"
    UPLINK = "uplink"
    BOTH = "both"


class Measurement(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=150)
    access: str
    unit: str
    canonical: str
    scale_to: float
    scope: Scope
    direction: MeasurementDirection
    role: str
    min: float
    max: float
    description: str

    def check(self, value: float) -> str | None:
        """Why ``value`` (in the reported unit) cannot be right, or None when it can."""
        if math.isnan(value):
            return f"{self.name} is NaN"
        if not self.min <= value <= self.max:
            return f"{self.name}={value:g} {self.unit} is outside {self.min:g}..{self.max:g}"
        return None

    def canonical_value(self, value: float) -> float:
        return value * self.scale_to


class Catalogue(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    measurements: tuple[Measurement, ...]

    def get(self, name: str) -> Measurement | None:
        return self._by_name().get(name)

    def for_access(self, access: str) -> tuple[Measurement, ...]:
        return tuple(m for m in self.measurements if m.access == access)

    def throughput_name(self, access: str, downlink: bool) -> str | None:
        wanted = MeasurementDirection.DOWNLINK if downlink else MeasurementDirection.UPLINK
        for m in self.for_access(access):
            if m.role == "throughput" and m.direction == wanted:
                return m.name
        return None

    def _by_name(self) -> dict[str, Measurement]:
        return self._index

    @functools.cached_property
    def _index(self) -> dict[str, Measurement]:
        """Built once: it is asked for every value of every report."""
        return {m.name: m for m in self.measurements}


@functools.cache
def load_catalogue(path: Path = CATALOGUE_FILE) -> Catalogue:
    raw = yaml.safe_load(path.read_text())
    catalogue = Catalogue.model_validate(raw)
    names = [m.name for m in catalogue.measurements]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{path}: measurement names listed twice: {', '.join(duplicates)}")
    return catalogue
