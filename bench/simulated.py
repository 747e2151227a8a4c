"""The evaluator's stand-ins for the RAN and the agents: simulated KPIs and simulated probes.

``SimulatedKpis`` reports, per period, what the access nodes would: the simulator's KPI models
(e2sim/kpis.py) driven by the true capacity *and by what the weights let each path carry*, so
an under-weighted path shows a low throughput and a small PRB or airtime share, exactly the
trap the estimators must not fall into. Each CPE sits in its own cell here, as its truth is
sampled independently of the others; the carrier or channel share its capacity leaves out is
reported as other stations' load. Values go through the KPI catalogue as the E2 path does
(range check, canonical units, throughput and link-state roles). Only LiFi says whether its
link is up; an NR or Wi-Fi path that died shows as a station that carried nothing.

``SimulatedProber`` runs probes on the true paths: while a probe runs, its flows take their fair
share of the path from the data (N probe flows against the one data subflow); it measures the
probe's rate plus the data's, i.e. the path's capacity, with a small error; a path that is down
at the end fails the probe as down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from core.domain import Direction, KpiSample, ProbeOutcome, ProbeRequest
from core.scenario.truth import Truth
from core.standards import nr as nr_standard
from e2sim.kpis import (
    NodeReport,
    NrTables,
    WifiTables,
    lagged,
    lifi_report,
    nr_report,
    wifi_report,
    with_measured,
)
from e2sim.nonideal import NonIdealities, RadioLag
from e2sim.radio import wifi
from kpm.catalogue import MeasurementDirection, load_catalogue

FloatArray = npt.NDArray[np.float64]

PROBE_RELATIVE_ERROR = 0.03


def check_node_measurements(access: str, names: frozenset[str]) -> None:
    """A scenario's ``nodes.<access>.measurements``: catalogue names of that access, throughput
    among them (the loop learns what a path carried from nothing else)."""
    catalogue = load_catalogue()
    unknown = sorted(n for n in names if (m := catalogue.get(n)) is None or m.access != access)
    if unknown:
        known = ", ".join(m.name for m in catalogue.for_access(access))
        raise ValueError(
            f"nodes.{access}.measurements: {', '.join(unknown)} not a {access} measurement of "
            f"the KPI catalogue; expected some of {known}"
        )
    for downlink in (True, False):
        throughput = catalogue.throughput_name(access, downlink)
        if throughput is not None and throughput not in names:
            raise ValueError(
                f"nodes.{access}.measurements must include {throughput}: the loop learns what "
                "a path carried from it"
            )


class SimulatedKpis:
    def __init__(
        self,
        truth: Truth,
        direction: Direction,
        seed: int,
        measured: Mapping[str, npt.NDArray[np.floating[Any]]] | None = None,
        nonideal: NonIdealities | None = None,
        node_measurements: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        """``measured``: radio KPIs the scenario gives as measured (e2sim.kpis.measured_radio
        on the truth's time grid), reported in place of the inverted ones. ``nonideal``: what
        real nodes do that the KPI formulas leave out (e2sim/nonideal.py; ideal by default).
        ``node_measurements``: per access, the only measurements its node reports (the
        scenario's ``nodes``); an access not named reports all the simulator makes."""
        self._truth = truth
        self._nonideal = nonideal or NonIdealities()
        self._lag = RadioLag(self._nonideal.radio_lag_periods)
        self._measured = measured or {}
        self._direction = direction
        self._rng = np.random.default_rng(seed)
        self._nr = NrTables(nr_standard.NrCarrier(tdd=nr_standard.PATTERNS["5ms"]))
        self._wifi = WifiTables(wifi.WifiLink())
        self._catalogue = load_catalogue()
        self._node_measurements = dict(node_measurements or {})
        for access, names in self._node_measurements.items():
            check_node_measurements(access, names)
        self._wanted = (
            MeasurementDirection.DOWNLINK
            if direction == Direction.DOWNLINK
            else MeasurementDirection.UPLINK
        )

    def samples(
        self,
        tick: int,
        now_s: float,
        period_s: float,
        capacity_mbps: FloatArray,
        carried_mbps: FloatArray,
    ) -> list[KpiSample]:
        """KPI samples of the period ending at ``now_s``; arrays are (C, A) period means."""
        truth = self._truth
        out: list[KpiSample] = []
        for a, access in enumerate(truth.accesses):
            members = np.flatnonzero(truth.has_path[:, a])
            if members.size == 0:
                continue
            capacity = capacity_mbps[members, a]
            available = truth.available[tick, members, a]
            utilisation = np.clip(
                np.divide(
                    carried_mbps[members, a],
                    capacity,
                    out=np.zeros(members.size),
                    where=capacity > 0,
                ),
                0.0,
                1.0,
            )
            report = self._report(access, tick, members, capacity, available, utilisation)
            for i, c in enumerate(members):
                out.append(self._sample(report, i, int(c), access, a, tick, now_s, period_s))
        return out

    def _report(
        self,
        access: str,
        tick: int,
        members: npt.NDArray[np.int64],
        capacity: FloatArray,
        available: npt.NDArray[np.bool_],
        utilisation: FloatArray,
    ) -> NodeReport:
        cells = np.arange(members.size)
        if access == "nr":
            rtt = self._truth.rtt_ms[tick, members, self._truth.accesses.index(access)]
            report = nr_report(
                self._nr,
                capacity,
                capacity,
                available,
                rtt,
                utilisation,
                self._rng,
                cells,
                True,
                nonideal=self._nonideal,
            )
            report = lagged(report, self._lag, access)
            return with_measured(report, self._measured, tick, members)
        if access == "wifi":
            report = wifi_report(
                self._wifi,
                capacity,
                capacity,
                available,
                utilisation,
                self._rng,
                cells,
                True,
                nonideal=self._nonideal,
            )
            return lagged(report, self._lag, access)
        if access == "lifi":
            return lifi_report(capacity, capacity, available, utilisation, self._rng)
        raise ValueError(f"the simulated KPIs cover nr, wifi and lifi, not {access!r}")

    def _sample(
        self,
        report: NodeReport,
        i: int,
        c: int,
        access: str,
        a: int,
        tick: int,
        now_s: float,
        period_s: float,
    ) -> KpiSample:
        measurements: dict[str, float] = {}
        throughput: float | None = None
        available: bool | None = None
        # A station whose link is down is still listed with what it carried (nothing), but its
        # node has no radio measurements of it; only LiFi reports a link state.
        lost = not self._truth.available[tick, c, a]
        offered = self._node_measurements.get(access)
        for name, values in report.values.items():
            entry = self._catalogue.get(name)
            if entry is None or entry.direction not in (self._wanted, MeasurementDirection.BOTH):
                continue
            if offered is not None and name not in offered:
                continue
            if lost and entry.role not in ("throughput", "link_state"):
                continue
            value = float(values[i])
            if entry.check(value) is not None:
                continue  # the E2 path rejects it as out of range
            canonical = entry.canonical_value(value)
            label = report.labels.get(name)
            key = name if label is None else f"{name}|distBinX={int(label[i])}"
            measurements[key] = canonical
            if entry.role == "throughput":
                throughput = canonical
            elif entry.role == "link_state":
                available = canonical >= 0.5
        truth = self._truth
        return KpiSample(
            cpe_id=truth.cpe_ids[c],
            access=access,
            direction=self._direction,
            time_s=now_s,
            period_s=period_s,
            throughput_mbps=throughput,
            rtt_ms=float(truth.rtt_ms[tick, c, a]),
            loss_rate_permille=float(truth.loss_rate_permille[tick, c, a]),
            available=available,
            measurements=measurements,
        )


@dataclass
class _RunningProbe:
    request: ProbeRequest
    cpe: int
    access: int
    start_s: float
    end_s: float


class SimulatedProber:
    def __init__(self, truth: Truth, seed: int) -> None:
        self._truth = truth
        self._rng = np.random.default_rng(seed + 7)
        self._running: list[_RunningProbe] = []
        self._cpe_index = {cpe_id: i for i, cpe_id in enumerate(truth.cpe_ids)}
        self.probe_mbit = 0.0

    def start(self, request: ProbeRequest, now_s: float) -> None:
        self._running.append(
            _RunningProbe(
                request,
                self._cpe_index[request.cpe_id],
                self._truth.accesses.index(request.access),
                now_s,
                now_s + request.duration_s,
            )
        )

    def data_share(self, time_s: float) -> FloatArray | float:
        """(C, A) share of each path left to the data at ``time_s`` (1.0 when nothing runs)."""
        active = [p for p in self._running if p.start_s - 1e-9 <= time_s < p.end_s - 1e-9]
        if not active:
            return 1.0
        share = np.ones(self._truth.has_path.shape)
        for p in active:
            flows = p.request.parallel_flows
            share[p.cpe, p.access] = 1.0 / (flows + 1)
        return share

    def collect(self, now_s: float) -> Sequence[ProbeOutcome]:
        truth = self._truth
        for p in self._running:  # a probe over a dead path ends as soon as it starts
            if not truth.available[truth.tick_at(p.start_s), p.cpe, p.access]:
                p.end_s = p.start_s
        done = [p for p in self._running if p.end_s <= now_s + 1e-9]
        self._running = [p for p in self._running if p.end_s > now_s + 1e-9]
        return [self._outcome(p) for p in done]

    def _outcome(self, p: _RunningProbe) -> ProbeOutcome:
        truth = self._truth
        first, last = truth.tick_at(p.start_s), truth.tick_at(p.end_s - 1e-9)
        window = truth.usable_mbps[first : last + 1, p.cpe, p.access]
        flows = p.request.parallel_flows
        if not truth.available[first, p.cpe, p.access]:
            # No connection can be opened over a dead path: the probe fails at once, for free.
            return ProbeOutcome(
                p.request, p.start_s, p.start_s, None, 0.0, path_down=True, error="no route"
            )
        probe_mbit = float(window.mean()) * flows / (flows + 1) * p.request.duration_s
        self.probe_mbit += probe_mbit
        if not truth.available[last, p.cpe, p.access]:
            return ProbeOutcome(
                p.request, p.start_s, p.end_s, None, probe_mbit, path_down=True, error="no route"
            )
        measured = float(window.mean()) * (1 + PROBE_RELATIVE_ERROR * self._rng.standard_normal())
        return ProbeOutcome(p.request, p.start_s, p.end_s, max(measured, 0.0), probe_mbit)
