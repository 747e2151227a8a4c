"""How far any loop fed by periodic reports can get on a scenario: `atsss bench predictability`.

`bench loop` shows the report-oracle (the optimum for the capacities as of each report) well
below the instant oracle on the measured NR traces. This asks whether better prediction could
close that gap, on an idealised WRR (continuous weights, no control delay, no MPTCP
reconnection, no probe cost), from the scenario's true capacities sampled every ``step_s``:

- ``instant``: weights follow the capacities at every step (1.0 by construction);
- ``period-mean``: weights ∝ the mean capacities of the period they are used in, i.e. exact
  knowledge of each coming period but not of what moves inside it;
- ``last-report``: weights ∝ the mean capacities of the period before (what a report says);
- ``hedged-hindsight``: the last report's values scaled per access by factors chosen, for each
  class of last report (decile of its most volatile access), as the best on this very scenario
  in hindsight. No predictor that decides from the last report alone does better on average,
  so it bounds what hedging and prediction from one report can reach; longer histories are
  not covered by the bound.

Efficiency: what the WRR carries over the sum of the capacities, as in `bench loop`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.domain import Direction
from core.scenario.model import Scenario
from e2sim.world import scenario_truth

FloatArray = npt.NDArray[np.float64]

HEDGE_FACTORS = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5)
CLASSES = 10


@dataclass(frozen=True)
class Predictability:
    scenario: str
    period_s: float
    periods: int
    instant: float
    period_mean: float
    last_report: float
    hedged_hindsight: float
    # lag-one correlation of each access's period means (pooled over CPEs): how much one report
    # says about the next
    lag1_correlation: dict[str, float | None]

    @property
    def half_gap_target(self) -> float:
        """Where a loop closing half the gap between last-report and instant would be."""
        return self.last_report + (self.instant - self.last_report) / 2


def predictability(
    scenario: Scenario,
    *,
    period_s: float = 1.0,
    step_s: float = 0.1,
    direction: Direction = Direction.DOWNLINK,
) -> Predictability:
    ticks_per_period = round(period_s / step_s)
    if ticks_per_period < 1 or abs(ticks_per_period * step_s - period_s) > 1e-9:
        raise ValueError(f"the period ({period_s} s) must be a whole number of steps ({step_s} s)")
    truth = scenario_truth(scenario, direction, step_s)
    usable = truth.usable_mbps  # (T, C, A)
    periods = usable.shape[0] // ticks_per_period
    if periods < 3:
        raise ValueError(f"{scenario.name}: fewer than 3 periods of {period_s} s")
    # (N, P, C, A): the ticks of each period
    ticks = usable[: periods * ticks_per_period].reshape(
        periods, ticks_per_period, *usable.shape[1:]
    )
    means = ticks.mean(axis=1)  # (N, C, A)
    offered = ticks[1:].sum(axis=(1, 3))  # (N-1, C): what the periods scored offer
    total_offered = float(offered.sum())

    def score(carried: FloatArray) -> float:
        return float(carried.sum()) / total_offered if total_offered > 0 else 0.0

    instant = score(offered)  # weights equal to the capacities carry all of it
    period_mean = score(_carried(means[1:], ticks[1:]))
    last = means[:-1]
    last_report = score(_carried(last, ticks[1:]))
    hedged = score(_best_in_hindsight(last, ticks[1:]))
    correlation: dict[str, float | None] = {}
    for a, access in enumerate(truth.accesses):
        before, after = means[:-1, :, a].ravel(), means[1:, :, a].ravel()
        if before.std() > 0 and after.std() > 0:
            correlation[access] = float(np.corrcoef(before, after)[0, 1])
        else:
            correlation[access] = None
    return Predictability(
        scenario=scenario.name,
        period_s=period_s,
        periods=periods,
        instant=instant,
        period_mean=period_mean,
        last_report=last_report,
        hedged_hindsight=max(hedged, last_report),
        lag1_correlation=correlation,
    )


def _carried(weights: FloatArray, ticks: FloatArray) -> FloatArray:
    """Per period and CPE, what a WRR with these weights (N, C, A) carries over the period's
    ticks (N, P, C, A): each round sends w_i on path i, so the path slowest for its weight sets
    the pace; paths without weight carry nothing. Returns (N, C), in Mbit/s summed over ticks."""
    weighted = weights > 0
    safe = np.where(weighted, weights, 1.0)[:, None]
    ratio = np.where(weighted[:, None], ticks / safe, np.inf)  # (N, P, C, A)
    pace = ratio.min(axis=3)  # (N, P, C)
    pace = np.where(np.isfinite(pace), pace, 0.0)
    rate: FloatArray = pace * weights.sum(axis=2)[:, None]  # (N, P, C)
    return np.asarray(rate.sum(axis=1), dtype=np.float64)


def _best_in_hindsight(last: FloatArray, ticks: FloatArray) -> FloatArray:
    """Per class of last report, the per-access factors on it that carried most (N, C)."""
    n, c, accesses = last.shape
    change = np.abs(np.diff(last, axis=0)).mean(axis=(0, 1))
    level = np.maximum(last.mean(axis=(0, 1)), 1e-9)
    volatile = int(np.argmax(change / level))  # the access one report says least about
    key = last[:, :, volatile].ravel()
    edges = np.quantile(key, np.linspace(0, 1, CLASSES + 1)[1:-1])
    classes = np.searchsorted(edges, key, side="right")  # (N*C,)
    best = np.full(CLASSES, -1.0)
    best_carried = np.zeros(n * c)
    for factors in itertools.product(HEDGE_FACTORS, repeat=accesses):
        carried = _carried(last * np.array(factors), ticks).ravel()
        per_class = np.bincount(classes, weights=carried, minlength=CLASSES)
        better = per_class > best
        if better.any():
            best = np.where(better, per_class, best)
            take = better[classes]
            best_carried = np.where(take, carried, best_carried)
    return best_carried.reshape(n, c)
