"""Ground truth of a scenario sampled on a time grid, as arrays (time × CPE × access).

This is what the network really offers; estimators never see it, only the evaluator and the
simulator's side channel do. Noise is seeded per (scenario seed, CPE, access, quantity), so the
same scenario always gives the same truth.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from core.domain import Direction
from core.scenario.load import ScenarioError
from core.scenario.model import Scenario
from core.scenario.schema import AvailabilitySpec, SeriesSpec

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

# The clock of the world's variability (a series' jitter): finer than any reporting period the
# loop runs at in practice (100 ms), coarse enough for a fleet's hours; the jitter's correlation
# times are seconds, so nothing the scenarios describe changes faster.
WORLD_CLOCK_S = 0.1


@dataclass(frozen=True)
class Truth:
    times_s: FloatArray  # (T,)
    cpe_ids: tuple[str, ...]
    accesses: tuple[str, ...]
    has_path: BoolArray  # (C, A): the CPE has this access at all
    capacity_mbps: FloatArray  # (T, C, A), 0 where the CPE has no such access
    available: BoolArray  # (T, C, A)
    rtt_ms: FloatArray  # (T, C, A)
    loss_rate_permille: FloatArray  # (T, C, A)
    reconnect_s: FloatArray  # (C, A)

    @property
    def step_s(self) -> float:
        return float(self.times_s[1] - self.times_s[0]) if len(self.times_s) > 1 else 0.0

    @cached_property
    def usable_mbps(self) -> FloatArray:
        """Capacity where the link is up, 0 where it is down: (T, C, A)."""
        return np.where(self.available, self.capacity_mbps, 0.0)

    @cached_property
    def _cpe_index(self) -> dict[str, int]:
        return {cpe_id: i for i, cpe_id in enumerate(self.cpe_ids)}

    def tick_at(self, time_s: float) -> int:
        """The index of the last grid time at or before ``time_s`` (clamped to the grid)."""
        index = int(np.searchsorted(self.times_s, time_s + 1e-9, side="right")) - 1
        return min(max(index, 0), len(self.times_s) - 1)

    def usable_stats_mbps(
        self, cpe_id: str, access: str, start_s: float, end_s: float
    ) -> tuple[float, float]:
        """Mean and standard deviation of the capacity over [start_s, end_s), 0 while down."""
        c = self._cpe_index[cpe_id]
        a = self.accesses.index(access)
        first = int(np.searchsorted(self.times_s, max(start_s, 0.0) - 1e-9, side="left"))
        last = int(np.searchsorted(self.times_s, end_s - 1e-9, side="left"))
        if last <= first:
            return float(self.usable_mbps[self.tick_at(start_s), c, a]), 0.0
        window = self.usable_mbps[first:last, c, a]
        return float(window.mean()), float(window.std())


def time_grid(duration_s: float, step_s: float) -> FloatArray:
    if step_s <= 0:
        raise ValueError(f"step_s must be > 0, got {step_s}")
    count = int(np.floor(duration_s / step_s + 1e-9))
    return np.arange(count, dtype=np.float64) * step_s


def sample_truth(scenario: Scenario, direction: Direction, step_s: float) -> Truth:
    times = time_grid(scenario.duration_s, step_s)
    accesses = scenario.access_names
    shape = (len(times), len(scenario.cpes), len(accesses))
    capacity = np.zeros(shape)
    available = np.zeros(shape, dtype=bool)
    rtt = np.zeros(shape)
    loss = np.zeros(shape)
    has_path = np.zeros(shape[1:], dtype=bool)
    reconnect = np.zeros(shape[1:])
    for c, entry in enumerate(scenario.cpes):
        for a, access in enumerate(accesses):
            path = entry.paths.get(access)
            if path is None:
                continue
            series = path.downlink_mbps if direction is Direction.DOWNLINK else path.uplink_mbps
            if series is None:
                raise ScenarioError(
                    f"{scenario.source}: {entry.cpe.cpe_id}.accesses.{access}.uplink_mbps: "
                    "required to evaluate the uplink, but missing"
                )
            key = (scenario.seed, entry.cpe.cpe_id, access)
            has_path[c, a] = True
            scale = entry.capacity_scale[access]
            capacity[:, c, a] = scale * sample_series(series, times, (*key, direction.value))
            rtt[:, c, a] = sample_series(path.rtt_ms, times, (*key, "rtt"))
            loss[:, c, a] = sample_series(path.loss_rate_permille, times, (*key, "loss"))
            available[:, c, a] = sample_availability(
                path.availability, times, scenario.duration_s, (*key, "availability")
            )
            reconnect[c, a] = path.reconnect_s
    return Truth(
        times_s=times,
        cpe_ids=scenario.cpe_ids,
        accesses=accesses,
        has_path=has_path,
        capacity_mbps=np.maximum(capacity, 0.0),
        available=available,
        rtt_ms=np.maximum(rtt, 0.0),
        loss_rate_permille=np.maximum(loss, 0.0),
        reconnect_s=reconnect,
    )


def _rng(key: tuple[object, ...]) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(str(part).encode()) for part in key])


def sample_series(series: SeriesSpec, times_s: FloatArray, key: tuple[object, ...]) -> FloatArray:
    if series.value is not None:
        values = np.full(times_s.shape, series.value, dtype=np.float64)
    else:
        points = np.asarray(series.points, dtype=np.float64)
        if series.interpolation == "linear":
            values = np.interp(times_s, points[:, 0], points[:, 1])
        else:
            index = np.searchsorted(points[:, 0], times_s, side="right") - 1
            values = points[np.clip(index, 0, len(points) - 1), 1]
    if series.jitter is not None and series.jitter.std_ratio > 0 and len(times_s) > 1:
        values = values * (
            1.0 + _jitter(series.jitter.std_ratio, series.jitter.correlation_s, times_s, key)
        )
    if series.clip is not None:
        values = np.clip(values, *series.clip)
    return np.asarray(values, dtype=np.float64)


def _jitter(
    std_ratio: float, correlation_s: float, times_s: FloatArray, key: tuple[object, ...]
) -> FloatArray:
    """A series' variability on the grid ``times_s``: one realisation on WORLD_CLOCK_S,
    held for each tick of it, whatever grid reads it, and each grid time given its mean over
    the step that starts there. A 1 s report then says what the second's ten 100 ms ticks were
    on average, and a grid of 10 ms sees each tick ten times: `bench loop` at 1 s and at 100 ms
    reports, the simulator and the testbed's shaping all face the same world. (Drawn on each
    grid itself, the worlds differed: paper-dynamic's mean capacity was 111.9 Mbit/s at 1 s
    and 110.9 at 100 ms on the testbed's scale, and its 1 s runs faced other fluctuations.)"""
    step_s = float(times_s[1] - times_s[0])
    if abs(step_s - WORLD_CLOCK_S) < 1e-9 and abs(float(times_s[0])) < 1e-9:
        return _ar1_noise(std_ratio, correlation_s, times_s, key)
    ticks = int(np.ceil((float(times_s[-1]) + step_s) / WORLD_CLOCK_S - 1e-9))
    clock = np.arange(max(ticks, 2), dtype=np.float64) * WORLD_CLOCK_S
    held = _ar1_noise(std_ratio, correlation_s, clock, key)
    # The integral of the held noise from 0, exact at any time by linear interpolation (the
    # noise is constant between ticks); past the last tick the last one is held.
    edges = np.append(clock, clock[-1] + WORLD_CLOCK_S)
    integral = np.concatenate(([0.0], np.cumsum(held) * WORLD_CLOCK_S))
    starts = np.asarray(times_s, dtype=np.float64)
    ends = starts + step_s

    def integral_at(t: FloatArray) -> FloatArray:
        inside = np.interp(t, edges, integral)
        beyond = np.maximum(t - edges[-1], 0.0) * held[-1]
        return np.asarray(inside + beyond, dtype=np.float64)

    return np.asarray((integral_at(ends) - integral_at(starts)) / step_s, dtype=np.float64)


def _ar1_noise(
    std_ratio: float, correlation_s: float, times_s: FloatArray, key: tuple[object, ...]
) -> FloatArray:
    """Stationary AR(1) noise with the given standard deviation and correlation time."""
    step_s = float(times_s[1] - times_s[0])
    a = float(np.exp(-step_s / correlation_s))
    innovations = _rng(key).standard_normal(len(times_s)) * std_ratio * np.sqrt(1 - a * a)
    taps = a ** np.arange(min(len(times_s), int(np.ceil(8 * correlation_s / step_s)) + 1))
    noise = np.convolve(innovations, taps)[: len(times_s)]
    # Start in the stationary state rather than at zero.
    noise += _rng((*key, "start")).standard_normal() * std_ratio * a ** np.arange(len(times_s))
    return np.asarray(noise, dtype=np.float64)


def sample_availability(
    spec: AvailabilitySpec, times_s: FloatArray, duration_s: float, key: tuple[object, ...]
) -> BoolArray:
    up = np.ones(times_s.shape, dtype=bool)
    if spec.outages is not None:
        for start, end in spec.outages:
            up &= ~((times_s >= start) & (times_s < end))
    elif spec.periodic is not None:
        period = spec.periodic.up_s + spec.periodic.down_s
        phase = np.mod(times_s - spec.periodic.offset_s, period)
        up = phase < spec.periodic.up_s
    elif spec.random is not None:
        rng = _rng(key)
        t, state, edges, states = 0.0, True, [], []
        while t < duration_s:
            edges.append(t)
            states.append(state)
            mean = spec.random.mean_up_s if state else spec.random.mean_down_s
            t += float(rng.exponential(mean))
            state = not state
        index = np.searchsorted(np.asarray(edges), times_s, side="right") - 1
        up = np.asarray(states, dtype=bool)[index]
    return up
