"""Run the simulated nodes against an xApp over the standalone E2 transport, in real time or
faster, and publish the ground truth on a side channel (JSON lines) that never mixes with KPIs."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np
import numpy.typing as npt

from core.domain import Direction
from core.scenario.e2_identities import offered
from e2sim.node import SimulatedNode
from e2sim.traffic import WeightedTraffic
from e2sim.world import PeriodTruth, SimWorld
from kpm.versions import KpmVersion

FloatArray = npt.NDArray[np.float64]


@dataclass
class RunStats:
    ticks: int = 0
    indications: int = 0
    bytes_sent: int = 0
    wall_s: float = 0.0
    busy_s: float = 0.0  # time spent computing and encoding, not waiting
    lags_s: list[float] = field(default_factory=list)
    subscribed: dict[str, bool] = field(default_factory=dict)

    @property
    def indications_per_second(self) -> float:
        return self.indications / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def mean_lag_s(self) -> float:
        return sum(self.lags_s) / len(self.lags_s) if self.lags_s else 0.0

    @property
    def max_lag_s(self) -> float:
        return max(self.lags_s, default=0.0)

    def as_dict(self) -> dict[str, object]:
        return {
            "ticks": self.ticks,
            "indications": self.indications,
            "bytes_sent": self.bytes_sent,
            "wall_s": round(self.wall_s, 3),
            "busy_share": round(self.busy_s / self.wall_s, 3) if self.wall_s else 0.0,
            "indications_per_second": round(self.indications_per_second, 2),
            "mean_lag_ms": round(self.mean_lag_s * 1000, 1),
            "max_lag_ms": round(self.max_lag_s * 1000, 1),
            "subscribed": self.subscribed,
        }


def write_truth(out: TextIO, truth: PeriodTruth, unix_start_s: float) -> None:
    for i, cpe_id in enumerate(truth.cpe_ids):
        out.write(
            json.dumps(
                {
                    "time_s": truth.time_s,
                    "unix_s": round(unix_start_s + truth.time_s, 3),
                    "cpe_id": cpe_id,
                    "access": truth.access,
                    "capacity_dl_mbps": round(float(truth.capacity_dl_mbps[i]), 4),
                    "capacity_ul_mbps": round(float(truth.capacity_ul_mbps[i]), 4),
                    "available": bool(truth.available[i]),
                }
            )
            + "\n"
        )


class SimRunner:
    def __init__(
        self,
        world: SimWorld,
        address: tuple[str, int],
        version: KpmVersion = KpmVersion.V3_00,
        speed: float = 1.0,
        truth_out: TextIO | None = None,
        subscribe_timeout_s: float = 10.0,
        progress: Callable[[RunStats], None] | None = None,
        report_delay_s: float = 0.0,
        traffic: WeightedTraffic | None = None,
    ) -> None:
        """``traffic``: each station carries what the weights its agents hold let it carry
        (e2sim/traffic.py); None: the world's fixed utilisation."""
        if speed < 0:
            raise ValueError(f"speed must be ≥ 0 (0: as fast as possible), got {speed}")
        self.world = world
        self.speed = speed
        self.truth_out = truth_out
        self.subscribe_timeout_s = subscribe_timeout_s
        self.progress = progress
        if report_delay_s < 0:
            raise ValueError(f"the reporting delay must be ≥ 0 s, got {report_delay_s}")
        self.report_delay_s = report_delay_s
        self.traffic = traffic
        positions_by_access = {
            access: [p for p, entry in enumerate(world.scenario.cpes, 1) if access in entry.paths]
            for access in world.accesses
        }
        self.nodes = [
            SimulatedNode(
                access,
                address,
                positions_by_access[access],
                version,
                offered(world.scenario, access),
            )
            for access in world.accesses
        ]

    def run(self, max_ticks: int | None = None) -> RunStats:
        stats = RunStats()
        for node in self.nodes:
            node.connect()
        try:
            for node in self.nodes:
                stats.subscribed[node.access] = (
                    node.client.wait_subscribed(self.subscribe_timeout_s) is not None
                )
            self._loop(stats, max_ticks)
        finally:
            for node in self.nodes:
                node.close()
        stats.bytes_sent = sum(n.bytes_sent for n in self.nodes)
        return stats

    def _loop(self, stats: RunStats, max_ticks: int | None) -> None:
        world = self.world
        period_ms = round(world.period_s * 1000)
        ticks = world.ticks if max_ticks is None else min(world.ticks, max_ticks)
        started = time.monotonic()
        unix_start = time.time()
        for tick in range(ticks):
            # A period's report goes out when the period has ended, plus the node's delay.
            due = (
                started + ((tick + 1) * world.period_s + self.report_delay_s) / self.speed
                if self.speed > 0
                else time.monotonic()
            )
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            stats.lags_s.append(max(0.0, time.monotonic() - due))
            began = time.monotonic()
            collect_start = unix_start + float(world.downlink.times_s[tick]) / (self.speed or 1.0)
            shares = self._shares(tick, collect_start)
            for node in self.nodes:
                node.keep_connected()
                truth = world.truth(tick, node.access)
                report = world.report(truth, tick, *shares.get(node.access, (None, None)))
                if self.truth_out is not None:
                    write_truth(self.truth_out, truth, unix_start)
                if not self._due(node, tick, period_ms):
                    continue
                if node.send(collect_start, period_ms, report):
                    stats.indications += 1
            if self.truth_out is not None:
                self.truth_out.flush()  # followers (the testbed's shaper) read it as it grows
            stats.busy_s += time.monotonic() - began
            stats.ticks += 1
            if self.progress is not None:
                self.progress(stats)
        stats.wall_s = time.monotonic() - started

    def _shares(self, tick: int, start_unix_s: float) -> dict[str, tuple[FloatArray, FloatArray]]:
        """Per access, the (downlink, uplink) utilisation of its stations this period under
        the weights held, or nothing without ``traffic``."""
        if self.traffic is None:
            return {}
        world = self.world
        truth = world.downlink
        period_s = world.period_s / (self.speed or 1.0)
        down = self.traffic.utilisation(
            Direction.DOWNLINK,
            start_unix_s,
            period_s,
            truth.capacity_mbps[tick],
            truth.available[tick],
            truth.has_path,
        )
        up = self.traffic.utilisation(
            Direction.UPLINK,
            start_unix_s,
            period_s,
            world.uplink_mbps[tick],
            truth.available[tick],
            truth.has_path,
        )
        shares = {}
        for a, access in enumerate(world.accesses):
            members = truth.has_path[:, a]
            shares[access] = (down[members, a], up[members, a])
        return shares

    @staticmethod
    def _due(node: SimulatedNode, tick: int, period_ms: int) -> bool:
        """Whether the node's subscription wants a report after this period.

        A subscription's reporting period is rounded to whole simulation periods (the world
        cannot report more often than it is computed)."""
        active = node.subscription
        if active is None:
            return False
        every = max(1, round(active.reporting_period_ms / period_ms))
        return (tick + 1) % every == 0
