"""The scenario file format (YAML), validated once at the edge with pydantic.

A scenario describes one or many CPEs and, per access, time series of ground-truth capacity
(downlink and uplink, Mbit/s), RTT (ms), loss (per mille), availability (outages) and optional
radio conditions for the simulator. ``docs/scenarios.md`` is the user's reference for it.

A time series is written as a number (constant), a list of ``[t_s, value]`` points, or a mapping
with ``points`` or ``value`` plus ``interpolation``, ``jitter`` and ``clip``.
"""

from __future__ import annotations

import itertools
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.domain import SteeringMode


class _Strict(BaseModel):
    # No NaN or infinity anywhere: a capacity or a time must be a number.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# What one scenario may ask of the simulator and the benches (a loop step per CPE and second).
MAX_CPES = 10_000
MAX_CPE_SECONDS = 20_000_000


class JitterSpec(_Strict):
    """Seeded, time-correlated multiplicative noise (an AR(1) process) on top of the curve."""

    std_ratio: float = Field(ge=0, le=2)
    correlation_s: float = Field(default=1.0, gt=0)


class SeriesSpec(_Strict):
    value: float | None = None
    points: list[tuple[float, float]] | None = None
    interpolation: Literal["linear", "step"] = "linear"
    jitter: JitterSpec | None = None
    clip: tuple[float, float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, bool):
            raise ValueError(
                f"expected a number, a list of [t_s, value] points or a mapping, got {data!r}"
            )
        if isinstance(data, int | float):
            return {"value": data}
        if isinstance(data, list):
            return {"points": data}
        return data

    @field_validator("points")
    @classmethod
    def _times_increase(
        cls, points: list[tuple[float, float]] | None
    ) -> list[tuple[float, float]] | None:
        if points is None:
            return None
        if not points:
            raise ValueError("expected at least one [t_s, value] point")
        for i, ((t_prev, _), (t, _)) in enumerate(itertools.pairwise(points), 1):
            if t <= t_prev:
                raise ValueError(
                    f"point {i} is at t={t:g} s, not after t={t_prev:g} s: times must increase"
                )
        if points[0][0] < 0:
            raise ValueError(f"time must be ≥ 0 s, got t={points[0][0]:g} s")
        return points

    @model_validator(mode="after")
    def _one_shape(self) -> SeriesSpec:
        if (self.value is None) == (self.points is None):
            raise ValueError("expected exactly one of 'value' or 'points'")
        if self.clip is not None and self.clip[0] > self.clip[1]:
            raise ValueError(f"clip is [low, high] with low ≤ high, got {list(self.clip)}")
        return self

    def values(self) -> list[float]:
        return [self.value] if self.value is not None else [v for _, v in self.points or []]


class NonNegativeSeries(SeriesSpec):
    @model_validator(mode="after")
    def _non_negative(self) -> NonNegativeSeries:
        lowest = min(self.values())
        if lowest < 0:
            raise ValueError(f"expected values ≥ 0, got {lowest:g}")
        return self


class PeriodicAvailability(_Strict):
    up_s: float = Field(gt=0)
    down_s: float = Field(gt=0)
    offset_s: float = Field(default=0.0, ge=0)


class RandomAvailability(_Strict):
    """Exponentially distributed up and down times (e.g. a LiFi beam being blocked)."""

    mean_up_s: float = Field(gt=0)
    mean_down_s: float = Field(gt=0)


class AvailabilitySpec(_Strict):
    outages: list[tuple[float, float]] | None = None
    periodic: PeriodicAvailability | None = None
    random: RandomAvailability | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if data == "always":
            return {}
        return data

    @field_validator("outages")
    @classmethod
    def _ordered(
        cls, outages: list[tuple[float, float]] | None
    ) -> list[tuple[float, float]] | None:
        for i, (start, end) in enumerate(outages or []):
            if start < 0 or end <= start:
                raise ValueError(
                    f"outage {i} is [{start:g}, {end:g}]: expected [start_s, end_s] with "
                    "0 ≤ start < end"
                )
        return outages

    @model_validator(mode="after")
    def _at_most_one(self) -> AvailabilitySpec:
        given = [k for k in ("outages", "periodic", "random") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"expected at most one of outages, periodic, random; got {given}")
        return self


class RadioSpec(_Strict):
    """Radio conditions: where given, the radio model's capacity is the path's truth for the
    simulator and the evaluators alike (e2sim/world.py scenario_truth), its series aside."""

    distance_m: NonNegativeSeries | None = None
    sinr_db: SeriesSpec | None = None
    cell_load: NonNegativeSeries | None = None

    @field_validator("cell_load")
    @classmethod
    def _fraction(cls, load: NonNegativeSeries | None) -> NonNegativeSeries | None:
        if load is not None and max(load.values()) > 1:
            raise ValueError("cell_load is the fraction of the cell used by others, 0..1")
        return load


class ReportedSpec(_Strict):
    """Radio KPIs the simulated node reports as measured (e.g. from the trace whose capacity the
    path follows), instead of values inverted from the capacity. NR only."""

    cqi: SeriesSpec | None = None
    sinr_db: SeriesSpec | None = None
    rsrp_dbm: SeriesSpec | None = None


class PathSpec(_Strict):
    downlink_mbps: NonNegativeSeries
    uplink_mbps: NonNegativeSeries | None = None
    rtt_ms: NonNegativeSeries = NonNegativeSeries(value=10.0)
    loss_rate_permille: NonNegativeSeries = NonNegativeSeries(value=0.0)
    availability: AvailabilitySpec = AvailabilitySpec()
    # MPTCP needs this long after the link returns before the subflow carries data again.
    reconnect_s: float = Field(default=0.45, ge=0)
    # With count > 1: every copy's capacities are scaled by a seeded uniform draw in this range.
    scale: tuple[float, float] = (1.0, 1.0)
    radio: RadioSpec | None = None
    reported: ReportedSpec | None = None

    @field_validator("scale")
    @classmethod
    def _scale_range(cls, scale: tuple[float, float]) -> tuple[float, float]:
        if not 0 < scale[0] <= scale[1]:
            raise ValueError(f"expected [low, high] with 0 < low ≤ high, got {list(scale)}")
        return scale


class ThresholdsSpec(_Strict):
    rtt_ms: int | None = Field(default=None, ge=0)
    loss_rate_permille: int | None = Field(default=None, ge=0, le=1000)


class SteeringSpec(_Strict):
    mode: SteeringMode = SteeringMode.LOAD_BALANCING
    preferred: list[str] = []
    thresholds: ThresholdsSpec = ThresholdsSpec()


class CpeSpec(_Strict):
    id: str = Field(min_length=1)
    count: int = Field(default=1, ge=1, le=100_000)
    accesses: dict[str, PathSpec] = Field(min_length=1)
    steering: SteeringSpec = SteeringSpec()

    @model_validator(mode="after")
    def _consistent(self) -> CpeSpec:
        if self.count > 1 and "{index" not in self.id:
            raise ValueError(
                f"id {self.id!r} is used for {self.count} CPEs: expected a pattern with "
                "'{index}', e.g. 'cpe-{index:04d}'"
            )
        for access in self.steering.preferred:
            if access not in self.accesses:
                raise ValueError(
                    f"steering.preferred names {access!r}, an access this CPE does not have; "
                    f"expected one of {', '.join(self.accesses)}"
                )
        return self


class AccessTechnologySpec(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,15}$")
    label: str


class NodeSpec(_Strict):
    """What an access's E2 node can measure: a plain access point may report per-station
    throughput and signal strength but neither airtime nor channel use."""

    measurements: list[str] = Field(
        min_length=1,
        description="the KPM measurement names the node reports (default: all the simulator makes)",
    )


class ScenarioSpec(_Strict):
    version: Literal[1] = 1
    name: str = Field(min_length=1)
    description: str = ""
    duration_s: float = Field(gt=0, le=86_400)
    seed: int = 0
    access_technologies: list[AccessTechnologySpec] = []
    cpes: list[CpeSpec] = Field(min_length=1)
    nodes: dict[str, NodeSpec] = {}

    @model_validator(mode="after")
    def _bounded(self) -> ScenarioSpec:
        used = {access for template in self.cpes for access in template.accesses}
        for access in self.nodes:
            if access not in used:
                raise ValueError(
                    f"nodes names {access!r}, an access no CPE has; expected one of "
                    f"{', '.join(sorted(used))}"
                )
        cpes = sum(template.count for template in self.cpes)
        if cpes > MAX_CPES:
            raise ValueError(f"{cpes} CPEs; a scenario has at most {MAX_CPES}")
        if cpes * self.duration_s > MAX_CPE_SECONDS:
            raise ValueError(
                f"{cpes} CPEs for {self.duration_s:g} s is {cpes * self.duration_s:.3g} "
                f"CPE-seconds; a scenario has at most {MAX_CPE_SECONDS:.3g} (fewer CPEs or a "
                "shorter run)"
            )
        return self
