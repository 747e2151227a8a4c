"""What real access nodes do that the KPI formulas leave out: switchable simulator non-idealities.

By default the simulator is ideal: it infers each station's radio state from its true capacity
and reports KPIs that the KPI estimator inverts exactly (up to noise and quantisation). That
flatters a formula-based estimator. With non-idealities on, the reports keep the same true
capacities but follow relations the formulas do not know:

- ``nr_selective_gain``: a gNB's proportional-fair scheduler gives a UE that uses only part of
  the PRBs free to it its best sub-bands, so its rate per PRB is higher than over all of them
  (frequency-selective scheduling gain). Rate per PRB at a fraction f of the free PRBs:
  r · (1 + g · (1 − f)). Throughput × free PRBs / used PRBs then over-estimates a held-back
  path by up to g; a saturating one is read right. 0.15 is assumed: gains of this order at low
  load are common in system-level studies, and real ones depend on the channel's selectivity.
- ``wifi_efficiency_spread``: the MAC efficiency a station gets is not one constant: it depends
  on how long its A-MPDU aggregates are (its traffic, its latency needs), on retries and on its
  client's implementation. Each station keeps its own factor on the nominal efficiency, drawn
  once (normal, this relative σ, within ±2σ). A formula with the nominal efficiency is then
  off by that factor on every period, saturated or not; the rate per airtime the station
  actually used is not. 0.1 is assumed.
- ``wifi_contention_loss``: the MAC efficiency falls with the share of the channel other
  stations keep busy (collisions and backoff, as in Bianchi's 802.11 DCF model): efficiency ·
  (1 − L · others' busy share). A formula with one fixed efficiency then over-estimates a path
  on a busy channel; the rate per airtime the station actually used stays right. L = 0.2 is
  assumed (10 % less at half the channel busy).
- ``radio_lag_periods``: the radio measurements a node reports for a period (CQI and MCS
  distributions, SINR, RSRP, layers, Wi-Fi PHY rate, MCS, SNR, RSSI) are those of the period
  before: CSI reports and link adaptation (outer-loop link adaptation, Wi-Fi rate control)
  follow the channel with a delay, and a KPM period aggregates what they saw. Throughput and
  resource counters are not delayed.

`NonIdealities.realistic()` turns all four on; `atsss bench loop --non-idealities realistic`
and `atsss e2sim run|dataset --non-idealities realistic` use it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.floating[Any]]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
LEVELS = ("ideal", "realistic")


@dataclass(frozen=True)
class NonIdealities:
    nr_selective_gain: float = 0.0
    wifi_efficiency_spread: float = 0.0
    wifi_contention_loss: float = 0.0
    radio_lag_periods: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.nr_selective_gain <= 1:
            raise ValueError(f"nr_selective_gain must be in [0, 1], got {self.nr_selective_gain}")
        if not 0 <= self.wifi_efficiency_spread <= 0.3:
            raise ValueError(
                f"wifi_efficiency_spread must be in [0, 0.3], got {self.wifi_efficiency_spread}"
            )
        if not 0 <= self.wifi_contention_loss < 1:
            raise ValueError(
                f"wifi_contention_loss must be in [0, 1), got {self.wifi_contention_loss}"
            )
        if not 0 <= self.radio_lag_periods <= 10:
            raise ValueError(f"radio_lag_periods must be in 0..10, got {self.radio_lag_periods}")

    @classmethod
    def realistic(cls) -> NonIdealities:
        return cls(
            nr_selective_gain=0.15,
            wifi_efficiency_spread=0.1,
            wifi_contention_loss=0.2,
            radio_lag_periods=1,
        )

    @classmethod
    def named(cls, level: str) -> NonIdealities:
        if level == "ideal":
            return cls()
        if level == "realistic":
            return cls.realistic()
        raise ValueError(f"unknown non-idealities {level!r}; expected one of {', '.join(LEVELS)}")


def prb_fraction(utilisation: FloatArray | float, gain: float) -> FloatArray:
    """The fraction f of its free PRBs a UE uses to carry ``utilisation`` of its capacity, when
    its rate per PRB is r · (1 + gain · (1 − f)): solves f · (1 + gain · (1 − f)) = u."""
    u = np.clip(np.asarray(utilisation, dtype=np.float64), 0.0, 1.0)
    if gain <= 0:
        return u
    # gain · f² − (1 + gain) · f + u = 0, the root in [0, 1]
    b = 1.0 + gain
    return np.asarray((b - np.sqrt(b * b - 4.0 * gain * u)) / (2.0 * gain), dtype=np.float64)


def station_factors(count: int, spread: float) -> FloatArray:
    """Each station's own factor on a nominal figure: 1 + spread · z, z normal within ±2,
    the same for station i on every call (a station keeps its character)."""
    if spread <= 0:
        return np.ones(count)
    z = np.clip(np.random.default_rng(_STATION_SEED).standard_normal(count), -2.0, 2.0)
    return np.asarray(1.0 + spread * z, dtype=np.float64)


_STATION_SEED = 20261124


def wifi_efficiency(base: FloatArray | float, others_busy: FloatArray, loss: float) -> FloatArray:
    """MAC efficiency on a channel that other stations keep busy for ``others_busy`` (0..1)."""
    return np.asarray(base * (1.0 - loss * np.clip(others_busy, 0.0, 1.0)), dtype=np.float64)


class RadioLag:
    """Reports each station's radio measurements ``periods`` periods late (per node)."""

    def __init__(self, periods: int) -> None:
        self.periods = periods
        self._seen: dict[str, deque[_Measured]] = {}

    def delay(
        self,
        node: str,
        values: dict[str, FloatArray],
        labels: dict[str, IntArray],
        radio_names: frozenset[str],
        unmeasured: BoolArray | None = None,
    ) -> tuple[dict[str, FloatArray], dict[str, IntArray]]:
        """``values`` and ``labels`` (distribution bins) with the radio names' replaced by
        those of ``periods`` reports before. A station measured then has its measurement
        delayed; one that was not (its link was down, or it is new) keeps this period's, as
        nothing earlier was measured; so do all when the node's stations changed."""
        if self.periods <= 0:
            return values, labels
        count = len(next(iter(values.values()))) if values else 0
        measured_now = (
            np.ones(count, dtype=bool) if unmeasured is None else ~np.asarray(unmeasured, bool)
        )
        history = self._seen.setdefault(node, deque(maxlen=self.periods + 1))
        history.append(
            _Measured(
                {n: v.copy() for n, v in values.items() if n in radio_names},
                {n: v.copy() for n, v in labels.items() if n in radio_names},
                measured_now,
            )
        )
        earlier = history[0]
        if earlier.measured.shape != measured_now.shape:
            return values, labels
        delayed_values, delayed_labels = dict(values), dict(labels)
        for name, old in earlier.values.items():
            delayed_values[name] = np.where(earlier.measured, old, values[name])
        for name, old_bins in earlier.labels.items():
            delayed_labels[name] = np.where(earlier.measured, old_bins, labels[name])
        return delayed_values, delayed_labels


@dataclass(frozen=True)
class _Measured:
    values: dict[str, FloatArray]
    labels: dict[str, IntArray]
    measured: BoolArray
