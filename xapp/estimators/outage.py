"""Outage by silence: a weighted path that carried nothing while its CPE's other paths did.

NR and Wi-Fi nodes report no link state for a station, so a dead path shows as a period with
zero throughput. Zero alone proves nothing (the path may be on weight 0, or the application
idle), so a path counts as silent only when the weights in force gave it a share and another
access of the same CPE carried traffic in the same period. It stops being silent with the next
period in which it carries traffic, or when someone (a probe) finds it usable again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from core.domain import Direction, KpiSample

Path = tuple[str, str, Direction]
# (cpe_id, direction) → the weights in force, or None when none were pushed yet (the kernel
# then weighs every path 1)
WeightLookup = Callable[[str, Direction], Mapping[str, int] | None]


class SilenceTracker:
    def __init__(self, weights: WeightLookup | None = None) -> None:
        self._weights = weights or (lambda cpe_id, direction: None)
        self._since: dict[Path, float] = {}

    def update(self, samples: Sequence[KpiSample]) -> None:
        carried: dict[tuple[str, Direction, float], int] = {}
        for s in samples:
            if (s.throughput_mbps or 0.0) > 0:
                key = (s.cpe_id, s.direction, s.time_s)
                carried[key] = carried.get(key, 0) + 1
        for s in samples:
            path = (s.cpe_id, s.access, s.direction)
            if (s.throughput_mbps or 0.0) > 0:
                self._since.pop(path, None)
            elif carried.get((s.cpe_id, s.direction, s.time_s), 0) > 0 and self._weighted(s):
                self._since.setdefault(path, s.time_s)

    def silent_since(self, path: Path) -> float | None:
        return self._since.get(path)

    def silent(self) -> set[Path]:
        return set(self._since)

    def clear(self, path: Path) -> None:
        self._since.pop(path, None)

    def _weighted(self, sample: KpiSample) -> bool:
        weights = self._weights(sample.cpe_id, sample.direction)
        return weights is None or weights.get(sample.access, 0) > 0
