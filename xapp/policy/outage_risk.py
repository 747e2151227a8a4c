"""How likely each path is to go dark before the next decision, from how often it did.

No capacity σ says that a path may vanish within the period (a LiFi beam blocked by a passer-by,
an access lost), yet a weighted path that vanishes stalls the whole WRR round until it is taken
out. This counts, per path, the decisions at which a path that was usable at the one before is
no longer: a mean over the decisions seen (counting ``prior`` decisions without an outage
before the first, so that one early outage does not condemn a path), then a running mean over
about ``memory`` decisions, so a path that stops failing is trusted again. A path seen down is
not counted until it is back: the risk is of going dark while usable.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

MEMORY_DECISIONS = 60
PRIOR_DECISIONS = 20


@dataclass
class _PathRecord:
    usable_before: bool = False
    observed: int = 0  # decisions at which the path had been usable at the one before
    probability: float = 0.0


class OutageRisk:
    def __init__(self, memory: int = MEMORY_DECISIONS, prior: int = PRIOR_DECISIONS) -> None:
        if memory < 1:
            raise ValueError(f"memory must be ≥ 1 decision, got {memory}")
        if prior < 0:
            raise ValueError(f"prior must be ≥ 0 decisions, got {prior}")
        self.memory = memory
        self.prior = prior
        self._paths: dict[Hashable, _PathRecord] = {}

    def observe(self, path: Hashable, usable: bool) -> float:
        """The path's state at this decision; returns its probability of going dark next."""
        record = self._paths.get(path)
        if record is None:  # (not setdefault: a fleet's every path asks at every decision)
            record = self._paths[path] = _PathRecord(observed=self.prior)
        if record.usable_before:
            went_dark = 0.0 if usable else 1.0
            record.observed += 1
            step = max(1.0 / record.observed, 1.0 / self.memory)
            record.probability += step * (went_dark - record.probability)
        record.usable_before = usable
        return record.probability

    def probability(self, path: Hashable) -> float:
        record = self._paths.get(path)
        return 0.0 if record is None else record.probability
