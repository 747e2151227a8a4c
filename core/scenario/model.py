"""A loaded scenario: CPEs expanded from templates, every reference checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from core.domain import AccessCatalogue, Cpe, SteeringRule
from core.scenario.schema import PathSpec


@dataclass(frozen=True)
class ScenarioCpe:
    cpe: Cpe
    paths: Mapping[str, PathSpec]
    # Per-copy capacity scale drawn from the template's range (1.0 for a single CPE).
    capacity_scale: Mapping[str, float]
    rule: SteeringRule


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    duration_s: float
    seed: int
    catalogue: AccessCatalogue
    cpes: tuple[ScenarioCpe, ...]
    source: str
    # access → the measurements its node can report; an access not named reports all
    node_measurements: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def access_names(self) -> tuple[str, ...]:
        """Every access some CPE has, in catalogue order."""
        used = {a for c in self.cpes for a in c.paths}
        return tuple(a for a in self.catalogue.names if a in used)

    def cut(self, duration_s: float | None) -> Scenario:
        """The same scenario, at most ``duration_s`` long (None: unchanged)."""
        if duration_s is None:
            return self
        return replace(self, duration_s=min(duration_s, self.duration_s))

    @property
    def cpe_ids(self) -> tuple[str, ...]:
        return tuple(c.cpe.cpe_id for c in self.cpes)
