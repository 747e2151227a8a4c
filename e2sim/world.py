"""The simulated world: true capacities per CPE, access and period, and the nodes' KPIs.

Truth comes from the scenario exactly as the evaluator samples it (same seeds, same series),
so the simulator and `atsss bench loop` agree on what the capacities were. A path with a
`radio:` section instead gets its capacity from the radio model (SINR and cell load for nr,
distance and channel load for wifi, SNR for lifi), and that becomes its truth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.domain import Direction
from core.scenario.load import ScenarioError
from core.scenario.model import Scenario
from core.scenario.schema import RadioSpec
from core.scenario.truth import Truth, sample_series, sample_truth
from core.standards import nr as nr_standard
from e2sim.kpis import (
    NodeReport,
    NrTables,
    WifiTables,
    lagged,
    lifi_report,
    measured_radio,
    nr_report,
    wifi_report,
    with_measured,
)
from e2sim.nonideal import NonIdealities, RadioLag
from e2sim.radio import lifi, nr, wifi
from e2sim.radio.nr import RadioStateError

FloatArray = npt.NDArray[np.float64]

# Uplink over downlink when a scenario gives no uplink series: the radio models' own ratios.
UPLINK_RATIO = {"nr": 56.3 / 342.0, "wifi": 0.8, "lifi": lifi.UPLINK_SHARE}


@dataclass(frozen=True)
class PeriodTruth:
    """Ground truth of one period for one access: what the side channel publishes."""

    access: str
    time_s: float
    cpe_ids: tuple[str, ...]
    capacity_dl_mbps: FloatArray
    capacity_ul_mbps: FloatArray
    available: npt.NDArray[np.bool_]


class SimWorld:
    def __init__(
        self,
        scenario: Scenario,
        period_s: float = 1.0,
        utilisation: float = 1.0,
        nr_pattern: str = "5ms",
        seed: int | None = None,
        capacity_scale: float = 1.0,
        own_cells: bool = False,
        nonideal: NonIdealities | None = None,
    ) -> None:
        """``capacity_scale`` multiplies every capacity (e.g. 0.1 for a testbed whose paths are
        shaped to a tenth of the scenario's), so the KPIs describe the scaled paths.
        ``own_cells``: each station in a cell of its own, the carrier or channel share its
        capacity leaves out reported as other stations' load, as `bench loop` reports it (the
        training datasets use it); by default all stations of a node share one cell."""
        if period_s <= 0:
            raise ValueError(f"the reporting period must be > 0 s, got {period_s}")
        if not 0 <= utilisation <= 1:
            raise ValueError(f"utilisation is a fraction 0..1, got {utilisation}")
        if not 0 < capacity_scale <= 100:
            raise ValueError(f"the capacity scale must be in (0, 100], got {capacity_scale}")
        self.scenario = scenario
        self.period_s = period_s
        self.utilisation = utilisation
        self.own_cells = own_cells
        # what real nodes do that the KPI formulas leave out (nonideal.py); ideal by default
        self.nonideal = nonideal or NonIdealities()
        self._lag = RadioLag(self.nonideal.radio_lag_periods)
        self.nr_tables = NrTables(nr_standard.NrCarrier(tdd=nr_standard.PATTERNS[nr_pattern]))
        self.wifi_tables = WifiTables(wifi.WifiLink())
        carrier = self.nr_tables.carrier
        self.downlink: Truth = scenario_truth(scenario, Direction.DOWNLINK, period_s, carrier)
        self.uplink_mbps = self._uplink()
        self._reported = measured_radio(scenario, self.downlink.times_s)
        self.downlink.capacity_mbps[...] *= capacity_scale
        self.uplink_mbps = self.uplink_mbps * capacity_scale
        self._rng = np.random.default_rng(scenario.seed if seed is None else seed)

    @property
    def ticks(self) -> int:
        return len(self.downlink.times_s)

    @property
    def accesses(self) -> tuple[str, ...]:
        return self.downlink.accesses

    def truth(self, tick: int, access: str) -> PeriodTruth:
        a = self.accesses.index(access)
        members = np.flatnonzero(self.downlink.has_path[:, a])
        return PeriodTruth(
            access,
            float(self.downlink.times_s[tick]),
            tuple(self.downlink.cpe_ids[i] for i in members),
            self.downlink.capacity_mbps[tick, members, a],
            self.uplink_mbps[tick, members, a],
            self.downlink.available[tick, members, a],
        )

    def report(
        self,
        truth: PeriodTruth,
        tick: int,
        utilisation: FloatArray | None = None,
        utilisation_ul: FloatArray | None = None,
    ) -> NodeReport:
        """What the access node measured over this period, for each of its stations.
        ``utilisation`` (downlink) and ``utilisation_ul``: what each station carried over its
        capacity this period (e2sim/traffic.py); default: the world's fixed share."""
        a = self.accesses.index(truth.access)
        down = self.utilisation if utilisation is None else utilisation
        up = down if utilisation_ul is None else utilisation_ul
        members = np.flatnonzero(self.downlink.has_path[:, a])
        usable_dl = np.where(truth.available, truth.capacity_dl_mbps, 0.0)
        usable_ul = np.where(truth.available, truth.capacity_ul_mbps, 0.0)
        if truth.access == "nr":
            rtt = self.downlink.rtt_ms[tick, members, a]
            report = nr_report(
                self.nr_tables,
                usable_dl,
                usable_ul,
                truth.available,
                rtt,
                down,
                self._rng,
                *self._cells(members),
                nonideal=self.nonideal,
                utilisation_ul=up,
            )
            return with_measured(lagged(report, self._lag, "nr"), self._reported, tick, members)
        if truth.access == "wifi":
            report = wifi_report(
                self.wifi_tables,
                usable_dl,
                usable_ul,
                truth.available,
                down,
                self._rng,
                *self._cells(members),
                nonideal=self.nonideal,
                utilisation_ul=up,
            )
            return lagged(report, self._lag, "wifi")
        if truth.access == "lifi":
            return lifi_report(usable_dl, usable_ul, truth.available, down, self._rng, up)
        raise ValueError(f"the simulator models nr, wifi and lifi, not {truth.access!r}")

    def _cells(self, members: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64] | None, bool]:
        """(cells, outside_load) for the KPI models."""
        if not self.own_cells:
            return None, False
        return np.arange(members.size), True

    def _uplink(self) -> FloatArray:
        try:
            uplink: FloatArray = scenario_truth(
                self.scenario, Direction.UPLINK, self.period_s, self.nr_tables.carrier
            ).capacity_mbps
            return uplink
        except ScenarioError:
            ratios = np.array([UPLINK_RATIO.get(a, 0.5) for a in self.accesses])
            derived: FloatArray = self.downlink.capacity_mbps * ratios[np.newaxis, np.newaxis, :]
            return derived


def scenario_truth(
    scenario: Scenario,
    direction: Direction,
    step_s: float,
    carrier: nr_standard.NrCarrier | None = None,
) -> Truth:
    """A scenario's ground truth for one direction, every ``step_s``, as the simulator and the
    evaluators (`bench loop`, `bench live`, `bench predictability`) all take it: its series, and
    for a path with a ``radio`` section the radio model's capacity instead (on the uplink, the
    access's UPLINK_RATIO of it), so that the live system and the simulated loop are scored
    on one world. ``carrier``: the NR carrier (the simulator's TDD pattern; default 5 ms)."""
    truth = sample_truth(scenario, direction, step_s)
    carrier = carrier or nr_standard.NrCarrier()
    for c, entry in enumerate(scenario.cpes):
        for access, path in entry.paths.items():
            if path.radio is None:
                continue
            a = truth.accesses.index(access)
            key = (scenario.seed, entry.cpe.cpe_id, access)
            where = f"{scenario.source}: {entry.cpe.cpe_id}.accesses.{access}.radio"
            try:
                downlink = radio_capacity(access, path.radio, truth.times_s, key, carrier)
            except RadioStateError as error:
                raise ScenarioError(f"{where}: {error}") from error
            share = 1.0 if direction == Direction.DOWNLINK else UPLINK_RATIO.get(access, 0.5)
            truth.capacity_mbps[:, c, a] = downlink * share
    return truth


def radio_capacity(
    access: str,
    radio: RadioSpec,
    times: FloatArray,
    key: tuple[object, ...],
    carrier: nr_standard.NrCarrier,
) -> FloatArray:
    """The downlink capacity the radio model gives a path's radio conditions at ``times``."""
    load = (
        sample_series(radio.cell_load, times, (*key, "load"))
        if radio.cell_load is not None
        else np.zeros(len(times))
    )
    if access == "nr":
        if radio.sinr_db is None:
            raise RadioStateError("an nr path's radio section needs sinr_db")
        sinr = sample_series(radio.sinr_db, times, (*key, "sinr"))
        return np.array(
            [
                nr.ue_state(carrier, float(s), float(x), 1).capacity_dl_mbps
                for s, x in zip(sinr, load, strict=True)
            ]
        )
    if access == "wifi":
        if radio.distance_m is None:
            raise RadioStateError("a wifi path's radio section needs distance_m")
        distance = sample_series(radio.distance_m, times, (*key, "distance"))
        link = wifi.WifiLink()
        return np.array(
            [
                wifi.station_state(link, float(d), float(x), 1).capacity_dl_mbps
                for d, x in zip(distance, load, strict=True)
            ]
        )
    if access == "lifi":
        if radio.sinr_db is None:
            raise RadioStateError("a lifi path's radio section needs sinr_db (the optical SNR)")
        snr = sample_series(radio.sinr_db, times, (*key, "sinr"))
        return np.array([lifi.rate_mbps(float(s)) for s in snr])
    raise RadioStateError(f"no radio model for access {access!r}")
