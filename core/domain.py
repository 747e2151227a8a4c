"""Domain types shared by every layer: accesses, CPEs, KPI samples, capacity estimates, weights.

Plain frozen dataclasses with units in the field names; no I/O and no framework types here.
Times are monotonic seconds (``*_s``) unless a name says otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from functools import cache, cached_property
from statistics import NormalDist


class Direction(StrEnum):
    """Which kernel the weights act on: the CPE's (uplink) or the MPTCP proxy's (downlink)."""

    UPLINK = "uplink"
    DOWNLINK = "downlink"


class SteeringMode(StrEnum):
    """ATSSS steering modes, named as in 3GPP TS 23.501 / TS 24.193."""

    LOAD_BALANCING = "LOAD_BALANCING"
    ACTIVE_STANDBY = "ACTIVE_STANDBY"
    PRIORITY_BASED = "PRIORITY_BASED"
    SMALLEST_DELAY = "SMALLEST_DELAY"
    REDUNDANT = "REDUNDANT"


@cache
def normal_quantile(quantile: float) -> float:
    """The standard normal distribution's ``quantile`` (z), worked out once per quantile: the
    policy asks it of every path of a fleet at every step, with the one quantile it is set to."""
    return NormalDist().inv_cdf(quantile)


@dataclass(frozen=True)
class AccessTechnology:
    """One kind of access network a CPE can be attached to (``nr``, ``wifi``, ``lifi``, ...)."""

    name: str
    label: str


DEFAULT_ACCESS_TECHNOLOGIES: tuple[AccessTechnology, ...] = (
    AccessTechnology("nr", "5G NR"),
    AccessTechnology("wifi", "Wi-Fi"),
    AccessTechnology("lifi", "LiFi"),
)


class UnknownAccessError(ValueError):
    """An access name that the catalogue does not know."""


@dataclass(frozen=True)
class AccessCatalogue:
    """The access technologies known to this deployment; more are added by configuration."""

    technologies: tuple[AccessTechnology, ...] = DEFAULT_ACCESS_TECHNOLOGIES

    def __post_init__(self) -> None:
        names = [t.name for t in self.technologies]
        if len(set(names)) != len(names):
            raise ValueError(f"access names must be unique, got {names}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.technologies)

    def get(self, name: str) -> AccessTechnology:
        for technology in self.technologies:
            if technology.name == name:
                return technology
        raise UnknownAccessError(
            f"unknown access {name!r}; expected one of {', '.join(self.names)}"
        )

    def extended(self, extra: Iterable[AccessTechnology]) -> AccessCatalogue:
        return AccessCatalogue(self.technologies + tuple(extra))


@dataclass(frozen=True)
class AccessIdentity:
    """How one CPE is known on one access: to the RAN (E2 node, UE id) and to IP (addresses)."""

    access: str
    e2_node_id: str | None = None
    ue_id: str | None = None
    station_mac: str | None = None
    local_ip: str | None = None
    remote_ip: str | None = None


@dataclass(frozen=True)
class Cpe:
    """A customer premises device and its identity on every access it is attached to."""

    cpe_id: str
    accesses: Mapping[str, AccessIdentity]

    @cached_property
    def access_names(self) -> tuple[str, ...]:
        """The accesses' names, in order (made once: a fleet's step asks for every CPE's)."""
        return tuple(self.accesses)

    @cached_property
    def access_set(self) -> frozenset[str]:
        """The accesses' names as a set (made once, as ``access_names``)."""
        return frozenset(self.accesses)


@dataclass(frozen=True, slots=True)
class KpiSample:
    """What one report says about one CPE on one access over the period ending at ``time_s``.

    The common fields are filled by the KPI source from its measurements; ``measurements`` keeps
    every named value as received (catalogue names, catalogue units) for the estimators.

    Slotted: a fleet's estimators keep eleven periods of every path's samples, and a field
    dictionary per sample was most of a sample's weight (about 88 KiB per CPE at 10,000 CPEs),
    of its making and of its freeing eleven periods later.
    """

    cpe_id: str
    access: str
    direction: Direction
    time_s: float
    period_s: float
    throughput_mbps: float | None = None
    rtt_ms: float | None = None
    loss_rate_permille: float | None = None
    available: bool | None = None
    measurements: Mapping[str, float] = field(default_factory=dict)
    # When this xApp took the report in (time.monotonic()): where the control delay starts.
    received_s: float | None = None

    @classmethod
    def made(
        cls,
        cpe_id: str,
        access: str,
        direction: Direction,
        time_s: float,
        period_s: float,
        throughput_mbps: float | None,
        rtt_ms: float | None,
        loss_rate_permille: float | None,
        available: bool | None,
        measurements: Mapping[str, float],
        received_s: float | None,
    ) -> KpiSample:
        """``KpiSample(...)`` with every field given: the same object ``__init__`` makes,
        each field set through its slot without a frozen dataclass's guarded assignment. The
        E2 reader makes thousands a period (in C where built: xapp/_samples.c).
        tests/test_domain.py holds the two equal, field for field."""
        sample = object.__new__(cls)
        for put, value in zip(
            _SAMPLE_SLOTS,
            (
                cpe_id,
                access,
                direction,
                time_s,
                period_s,
                throughput_mbps,
                rtt_ms,
                loss_rate_permille,
                available,
                measurements,
                received_s,
            ),
            strict=True,
        ):
            put(sample, value)
        return sample


# Each KpiSample field's slot setter, in the dataclass's order (``KpiSample.made``).
_SAMPLE_SLOTS = tuple(getattr(KpiSample, f.name).__set__ for f in fields(KpiSample))


# A capacity beyond this is garbage, not an estimate (802.11be peaks near 46 Gbit/s): what a
# model forecasts or what a node's counters work out to beyond it says only that they are wrong.
MAX_CAPACITY_MBPS = 100_000.0


def check_capacity(capacity_mbps: float, stddev_mbps: float) -> None:
    """What a capacity estimate must be: both finite and ≥ 0 (ValueError otherwise)."""
    if 0 <= capacity_mbps < math.inf and 0 <= stddev_mbps < math.inf:
        return  # the usual case, told by two chained comparisons (NaN fails them too)
    if not math.isfinite(capacity_mbps) or capacity_mbps < 0:
        raise ValueError(f"capacity_mbps must be finite and ≥ 0, got {capacity_mbps}")
    if not math.isfinite(stddev_mbps) or stddev_mbps < 0:
        raise ValueError(f"stddev_mbps must be finite and ≥ 0, got {stddev_mbps}")


@dataclass(frozen=True)
class CapacityEstimate:
    """An estimator's belief about one path's capacity: a value, its uncertainty and its age."""

    cpe_id: str
    access: str
    direction: Direction
    capacity_mbps: float
    stddev_mbps: float
    source: str
    measured_at_s: float
    available: bool = True
    # The path may well carry more: the value came from what it carried while not saturated
    # (what the weights let it carry), so it bounds the capacity from below only.
    lower_bound: bool = False

    def shows_path_usable_since(self, time_s: float) -> bool:
        """A direct measurement (not a lower bound) of a usable path, of the period ending at
        ``time_s`` or later: what ends a silence or an outage. The same period counts: a node
        that measured the station's headroom saw it associated, so a weighted path that carried
        nothing then was being re-established by MPTCP, not dead (a dead station's node reports
        no radio measurements of it)."""
        return (
            self.available
            and not self.lower_bound
            and self.capacity_mbps > 0
            and self.measured_at_s >= time_s
        )

    def __post_init__(self) -> None:
        check_capacity(self.capacity_mbps, self.stddev_mbps)

    def age_s(self, now_s: float) -> float:
        return max(0.0, now_s - self.measured_at_s)

    def quantile_mbps(self, quantile: float) -> float:
        """The capacity the path exceeds with probability ``1 - quantile`` (normal belief)."""
        if self.stddev_mbps == 0.0:
            return self.capacity_mbps
        return max(0.0, self.capacity_mbps + normal_quantile(quantile) * self.stddev_mbps)


@dataclass(frozen=True)
class ProbeRequest:
    """Ask one CPE's agent to measure one access with an active probe."""

    cpe_id: str
    access: str
    direction: Direction
    duration_s: float
    parallel_flows: int
    reason: str = ""


@dataclass(frozen=True)
class ProbeOutcome:
    """What a probe found: the path's capacity (probe plus concurrent data), or why it failed.

    ``path_down`` is set only when the probe itself showed the path unusable (no connection over
    it); an agent that could not be asked is a failed probe that says nothing about the path.
    """

    request: ProbeRequest
    started_at_s: float
    finished_at_s: float
    capacity_mbps: float | None
    probe_mbit: float  # what the probe itself sent: the price of the measurement
    path_down: bool = False
    error: str = ""


@dataclass(frozen=True)
class ProbeRecord:
    """A probe result with the path's KPIs up to that moment (oldest first): a training example.

    The history matters because the models read the throughput of the periods before the one
    they predict.
    """

    outcome: ProbeOutcome
    history: tuple[KpiSample, ...]


@dataclass(frozen=True)
class SaturatedPeriod:
    """A period in which a path carried all it could, by its own KPIs (its resources used to
    the full): its throughput is its capacity, a training example that costs no probe. The
    history runs up to that period, oldest first, as for a probe record."""

    history: tuple[KpiSample, ...]

    @property
    def capacity_mbps(self) -> float:
        return self.history[-1].throughput_mbps or 0.0


@dataclass(frozen=True)
class SteeringThresholds:
    """ATSSS thresholds: RTT in ms, packet loss rate in tenths of a percent (per mille)."""

    rtt_ms: int | None = None
    loss_rate_permille: int | None = None

    def __post_init__(self) -> None:
        if self.rtt_ms is not None and self.rtt_ms < 0:
            raise ValueError(f"rtt_ms threshold must be ≥ 0, got {self.rtt_ms}")
        if self.loss_rate_permille is not None and not 0 <= self.loss_rate_permille <= 1000:
            raise ValueError(
                f"loss_rate_permille threshold must be in 0..1000, got {self.loss_rate_permille}"
            )


@dataclass(frozen=True)
class SteeringRule:
    """The steering mode for one CPE and direction, with what the mode needs to know.

    ``preferred`` is the active access for ACTIVE_STANDBY (the rest, in order, are standbys) and
    the priority order for PRIORITY_BASED; other modes ignore it.
    """

    mode: SteeringMode = SteeringMode.LOAD_BALANCING
    preferred: tuple[str, ...] = ()
    thresholds: SteeringThresholds = field(default_factory=SteeringThresholds)


@dataclass(frozen=True)
class WeightSet:
    """Integer WRR weights for one CPE and direction, as pushed to an agent.

    ``sequence`` increases with every push for the same CPE and direction so that agents can
    reject updates that arrive out of order. Weight 0 means standby (backup subflow).
    """

    cpe_id: str
    direction: Direction
    weights: Mapping[str, int]
    mode: SteeringMode
    sequence: int
    reason: str = ""

    def __post_init__(self) -> None:
        for access, weight in self.weights.items():
            if not isinstance(weight, int) or weight < 0:
                raise ValueError(f"weight for {access!r} must be an integer ≥ 0, got {weight!r}")

    @classmethod
    def made(
        cls,
        cpe_id: str,
        direction: Direction,
        weights: dict[str, int],
        mode: SteeringMode,
        sequence: int,
        reason: str,
    ) -> WeightSet:
        """``WeightSet(...)`` for weights the policy made (integers ≥ 0 by construction, read
        from its integer arrays): the same object, its fields put in its ``__dict__`` at once,
        without a frozen dataclass's guarded assignment per field nor the check of each weight
        (a fleet's step at 1 s periods makes thousands; 2.5 µs each, against 0.5). Weights
        from anywhere else (an operator's, an agent's word) go through ``__init__``.
        tests/test_control_loop_many.py holds the two alike."""
        weight_set = object.__new__(cls)
        object.__setattr__(
            weight_set,
            "__dict__",
            {
                "cpe_id": cpe_id,
                "direction": direction,
                "weights": weights,
                "mode": mode,
                "sequence": sequence,
                "reason": reason,
            },
        )
        return weight_set

    @property
    def active_accesses(self) -> frozenset[str]:
        return frozenset(a for a, w in self.weights.items() if w > 0)


@dataclass(frozen=True)
class Override:
    """What operators impose on one CPE and direction, as the control loop reads it: fixed
    weights, or any of a steering rule, accesses to leave out, and a freeze of updates."""

    cpe_id: str
    direction: Direction
    weights: Mapping[str, int] | None = None
    rule: SteeringRule | None = None
    excluded: frozenset[str] = frozenset()
    frozen: bool = False
    revision: int = 0
    requested_by: str = "operator"

    def __post_init__(self) -> None:
        if self.weights is not None and (self.rule is not None or self.excluded or self.frozen):
            raise ValueError("fixed weights leave no room for a rule, exclusions or a freeze")
        if self.weights is None and self.rule is None and not self.excluded and not self.frozen:
            raise ValueError("an override sets weights, a rule, excluded accesses or a freeze")


@dataclass(frozen=True)
class SubscriptionRecord:
    """One E2 subscription this xApp holds, kept in SDL so a restarted xApp can clean it up."""

    node: str
    xapp_event_instance_id: int
    subscription_id: str | None = None  # assigned by the RIC's submgr (or the standalone E2T)
    status: str = "pending"  # pending | active | failed | deleted
    cause: str = ""
