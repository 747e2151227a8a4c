"""How likely each path is to go dark before the next decision, from how often it did.

No capacity σ says that a path may vanish within the period (a LiFi beam blocked by a passer-by,
an access lost), yet a weighted path that vanishes stalls the whole WRR round until it is taken
out. This counts, per path, the decisions at which a path that was usable at the one before is
no longer: a mean over the decisions seen (counting ``prior`` decisions without an outage
before the first, so that one early outage does not condemn a path), then a running mean over
about ``memory`` decisions, so a path that stops failing is trusted again. A path seen down is
not counted until it is back: the risk is of going dark while usable.

Each path's record is kept in columns by its slot (core/slots.py): a fleet's step observes
every path of the CPEs it decides at once (``observe_many``), with the same arithmetic as one
path's ``observe``, operation for operation (tests/test_outage_risk.py).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

from core.slots import Slots, grown

MEMORY_DECISIONS = 60
PRIOR_DECISIONS = 20


class OutageRisk:
    def __init__(
        self,
        memory: int = MEMORY_DECISIONS,
        prior: int = PRIOR_DECISIONS,
        slots: Slots[Any] | None = None,
    ) -> None:
        """``slots``: the paths' places, shared with the owner's other columns of path state
        (a registry of its own by default)."""
        if memory < 1:
            raise ValueError(f"memory must be ≥ 1 decision, got {memory}")
        if prior < 0:
            raise ValueError(f"prior must be ≥ 0 decisions, got {prior}")
        self.memory = memory
        self.prior = prior
        self.slots: Slots[Any] = slots if slots is not None else Slots()
        # Per slot: whether the path was usable at its previous decision (never seen: False),
        # the decisions at which it had been (``prior`` to start with), its probability.
        self._usable_before = np.zeros(0, dtype=bool)
        self._observed = np.zeros(0, dtype=np.int64)
        self._probability = np.zeros(0, dtype=np.float64)

    def observe(self, path: Hashable, usable: bool) -> float:
        """The path's state at this decision; returns its probability of going dark next."""
        slot = self.slots.of(path)
        self._make_room()
        probability = float(self._probability[slot])
        if self._usable_before[slot]:
            went_dark = 0.0 if usable else 1.0
            observed = int(self._observed[slot]) + 1
            self._observed[slot] = observed
            step = max(1.0 / observed, 1.0 / self.memory)
            probability += step * (went_dark - probability)
            self._probability[slot] = probability
        self._usable_before[slot] = usable
        return probability

    def observe_many(
        self, slots: npt.NDArray[np.intp], usable: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.float64]:
        """``observe`` of the paths at these (distinct) slots, at once; their probabilities."""
        self._make_room()
        before = self._usable_before[slots]
        observed = self._observed[slots] + before
        probability = self._probability[slots]
        step = np.maximum(1.0 / np.maximum(observed, 1), 1.0 / self.memory)
        went_dark = np.where(usable, 0.0, 1.0)
        probability = np.where(before, probability + step * (went_dark - probability), probability)
        self._observed[slots] = observed
        self._probability[slots] = probability
        self._usable_before[slots] = usable
        return probability

    def probability(self, path: Hashable) -> float:
        slot = self.slots.get(path)
        if slot is None or slot >= len(self._probability):
            return 0.0
        return float(self._probability[slot])

    def _make_room(self) -> None:
        """Columns for every slot given so far (a new path starts with ``prior`` decisions)."""
        size = len(self.slots)
        if size > len(self._probability):
            self._usable_before = grown(self._usable_before, size, False)
            self._observed = grown(self._observed, size, self.prior)
            self._probability = grown(self._probability, size, 0.0)
