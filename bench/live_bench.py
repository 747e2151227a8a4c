"""`atsss bench live`: one scenario's seconds run live and in simulated time, side by side.

Live: the processes of the live system on loopback (a CPE agent and an MPTCP proxy agent on the
dry-run backend, `atsss xapp serve` with the fused estimator, the KPM simulator), the
simulator's stations carrying what the weights the agents hold let them carry
(`e2sim run --traffic-follows-agents`, e2sim/traffic.py), as `bench loop` reports it.
Simulated: `bench loop`'s controlled contender with the same estimator on the same seconds,
its control delay the live xApp's own measure (the mean of report → agent's answer in its
/metrics).

Both are scored alike: every step of the scenario's truth, through `bench loop`'s connection
model (bench/connection.py: the WRR fluid model, MPTCP noticing a dead path, reconnection),
with the weights in force then: live, what the agents were seen holding (the kernel's round
robin before the first set); simulated, what its loop held.
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

from bench.closed_loop import LoopSettings, evaluate
from bench.connection import DEFAULT_DETECTION_S, subflows_in_round
from bench.live_system import (
    FIRST_PUSH,
    WeightHistory,
    agent_process,
    poll_agents,
    start_simulator,
    start_xapp,
    write_xapp_config,
)
from core.domain import Direction
from core.fluid import carried_mbps
from core.scenario.load import load_scenario
from core.scenario.model import Scenario
from core.scenario.truth import Truth
from e2sim.world import scenario_truth

# Live and simulated may differ by this much before the difference is a finding.
TOLERANCE = 0.02
SCORING_STEP_S = 0.01
# What the simulated loop assumes when the live xApp measured no delay (no push from a report).
FALLBACK_DELAY_S = 0.1

Progress = Callable[[str], None]


@dataclass(frozen=True)
class DirectionFigures:
    direction: str
    live: float
    simulated: float
    live_pushes: int
    simulated_pushes: int
    live_near: float  # share of the time the live weights were near the capacities

    @property
    def difference(self) -> float:
        return self.live - self.simulated


@dataclass(frozen=True)
class LiveComparison:
    scenario: str
    duration_s: float
    control_delay_s: float  # measured live, used by the simulated loop
    measured: bool  # False: the live xApp measured none, FALLBACK_DELAY_S was used
    directions: list[DirectionFigures]
    period_ms: int = 1000
    measured_delay_s: float | None = None  # before rounding to the simulated loop's step

    @property
    def within_tolerance(self) -> bool:
        return all(abs(d.difference) <= TOLERANCE for d in self.directions)

    def as_dict(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "duration_s": self.duration_s,
            "reporting_period_ms": self.period_ms,
            "control_delay_ms": round(self.control_delay_s * 1000, 1),
            "control_delay_measured": self.measured,
            "measured_delay_ms": None
            if self.measured_delay_s is None
            else round(self.measured_delay_s * 1000, 1),
            "directions": [
                {
                    "direction": d.direction,
                    "live": round(d.live, 4),
                    "simulated": round(d.simulated, 4),
                    "difference": round(d.difference, 4),
                    "live_pushes": d.live_pushes,
                    "simulated_pushes": d.simulated_pushes,
                    "live_weights_near_capacities": round(d.live_near, 4),
                }
                for d in self.directions
            ],
            "within_tolerance": self.within_tolerance,
        }


@dataclass(frozen=True)
class LiveRun:
    history: WeightHistory
    unix_start_s: float  # the wall-clock time of the scenario's second 0
    delay_s: float | None  # the xApp's mean report → applied, None without a measured push
    first_weights_s: float | None  # after the last access's first report (the xApp's log)


def run_live(
    scenario: str,
    duration_s: float,
    progress: Progress,
    workdir: Path | None = None,
    period_ms: int = 1000,
) -> LiveRun:
    """The live system on ``scenario`` for ``duration_s`` (one CPE, cpe-1), its nodes reporting
    every ``period_ms``; its logs, the agents' state and the truth go to ``workdir`` (default: a
    temporary folder)."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="atsss-live-")))
        workdir.mkdir(parents=True, exist_ok=True)
        history = WeightHistory()
        truth = workdir / "truth.jsonl"
        with (
            # the CPE's agent probes the simulated paths from the truth, as `bench loop`'s do
            agent_process(workdir, "cpe", "cpe", ["cpe-1"], probe_truth=str(truth)) as cpe,
            agent_process(workdir, "proxy", "proxy", ["cpe-1"]) as proxy,
        ):
            config = write_xapp_config(
                workdir, scenario, {"cpe-1": cpe.url}, proxy.url, period_ms=period_ms
            )
            xapp = start_xapp(workdir, config)
            stop = threading.Event()
            poller = threading.Thread(
                target=poll_agents,
                args=({"downlink": proxy, "uplink": cpe}, "cpe-1", history, stop, 0.05),
                daemon=True,
            )
            poller.start()
            simulator = start_simulator(
                workdir,
                scenario,
                xapp.e2_port,
                duration_s,
                config,
                truth,
                extra=[
                    "--traffic-follows-agents",
                    "--own-cells",
                    "--period-ms",
                    str(period_ms),
                ],
            )
            started = time.monotonic()
            try:
                while simulator.poll() is None:
                    time.sleep(0.5)
                    progress(f"live: {time.monotonic() - started:.0f} of about {duration_s:g} s")
                delay_s = _measured_delay(xapp.http_url)
            finally:
                stop.set()
                poller.join(timeout=5)
                simulator.kill()
                xapp.terminate_within(5)
            first = FIRST_PUSH.search(xapp.log())
        lines = [json.loads(line) for line in truth.read_text().splitlines() if line]
    if not lines:
        raise RuntimeError("the simulator wrote no ground truth: see its log")
    start = lines[0]
    first_weights_s = float(first.group(2)) if first is not None else None
    return LiveRun(
        history, float(start["unix_s"]) - float(start["time_s"]), delay_s, first_weights_s
    )


_APPLIED = re.compile(r'^atsss_control_delay_seconds_(sum|count)\{stage="applied"\} (\S+)$', re.M)


def _measured_delay(http_url: str) -> float | None:
    """The mean report → agent's answer over the run, from the xApp's /metrics."""
    with contextlib.suppress(httpx.HTTPError):
        text = httpx.get(f"{http_url}/metrics", timeout=5).text
        found = {kind: float(value) for kind, value in _APPLIED.findall(text)}
        if found.get("count"):
            return found["sum"] / found["count"]
    return None


def scoring_truth(scenario: Scenario, direction: Direction) -> Truth:
    """The truth both sides are scored on: every SCORING_STEP_S, as `bench loop` takes it."""
    return scenario_truth(scenario, direction, SCORING_STEP_S)


def live_efficiency(
    truth: Truth, weights_at: Callable[[str, float], dict[str, int] | None]
) -> float:
    """Data carried over the sum of the capacities, every step of ``truth`` (scoring_truth),
    with the weights ``weights_at(cpe_id, second of the scenario)`` says were in force (None:
    round robin), through `bench loop`'s connection model."""
    in_round = subflows_in_round(truth, DEFAULT_DETECTION_S)
    carried = 0.0
    for k, t in enumerate(truth.times_s):
        weights = np.array(
            [
                [
                    1 if held is None else held.get(a, 0)
                    for a in truth.accesses
                    for held in [weights_at(cpe_id, float(t))]
                ]
                for cpe_id in truth.cpe_ids
            ],
            dtype=np.int64,
        )
        carried += float(carried_mbps(weights, truth.usable_mbps[k], in_round[k]).sum())
    total = float(truth.usable_mbps.sum())
    return carried / total if total else 0.0


# "Near the capacities": each path carrying at least MIN_SHARE of the CPE's capacity has a weight,
# relative to the largest path's, within NEAR of its capacity relative to the largest's (paths
# below that share are left out: one unit of weight is already more than 10 % of them).
NEAR = 0.10
MIN_SHARE = 0.05
SETTLING_S = 5.0  # the first seconds, before the first reports and weights, are not judged


def weights_near_capacities(
    truth: Truth, weights_at: Callable[[str, float], dict[str, int] | None]
) -> float:
    """The share of the time after SETTLING_S, over every CPE, in which the weights held were
    near the capacities (NEAR, MIN_SHARE), every step of ``truth`` (scoring_truth)."""
    near = judged = 0
    for k, t in enumerate(truth.times_s):
        if t < SETTLING_S:
            continue
        for c, cpe_id in enumerate(truth.cpe_ids):
            capacity = truth.usable_mbps[k, c]
            held = weights_at(cpe_id, float(t))
            if capacity.sum() <= 0:
                continue
            judged += 1
            if held is None:
                continue
            weights = np.array([held.get(a, 0) for a in truth.accesses], dtype=np.float64)
            largest = int(np.argmax(capacity))
            if weights[largest] <= 0:
                continue
            counted = capacity >= MIN_SHARE * capacity.sum()
            wanted = capacity[counted] / capacity[largest]
            given = weights[counted] / weights[largest]
            near += bool(np.all(np.abs(given - wanted) <= NEAR * wanted))
    return near / judged if judged else 0.0


def compare(
    scenario_name: str,
    duration_s: float,
    progress: Progress = lambda text: None,
    workdir: Path | None = None,
    period_ms: int = 1000,
) -> LiveComparison:
    """``workdir``: where the live run's logs go (default: a temporary folder, removed);
    ``period_ms``: the nodes' reporting period, live and simulated."""
    if period_ms < 10 or period_ms % 10:
        raise ValueError(f"the reporting period is a multiple of 10 ms, got {period_ms}")
    scenario = load_scenario(scenario_name).cut(duration_s)
    live = run_live(scenario_name, duration_s, progress, workdir, period_ms)
    delay_s = live.delay_s if live.delay_s is not None else FALLBACK_DELAY_S
    # to 10 ms, the simulated loop's step: within 5 ms of what was measured
    delay_ms = max(10, round(delay_s * 100) * 10)
    figures = []
    for direction in (Direction.DOWNLINK, Direction.UPLINK):
        progress(f"scoring the live {direction.value}")
        truth = scoring_truth(scenario, direction)
        live_figure = live_efficiency(truth, held_by(live, direction))
        progress(f"simulating the {direction.value}")
        report = evaluate(
            scenario,
            LoopSettings(
                direction=direction,
                step_s=0.01,
                reporting_period_s=period_ms / 1000,
                control_delay_s=delay_ms / 1000,
                estimators=("fused",),
                contenders=("optimal",),
            ),
        )
        simulated = report.result("optimal")
        figures.append(
            DirectionFigures(
                direction.value,
                live_figure,
                simulated.efficiency,
                sum(len(h) for (_, d), h in live.history.seen.items() if d == direction.value),
                simulated.weight_pushes,
                weights_near_capacities(truth, held_by(live, direction)),
            )
        )
    measured = live.delay_s is not None
    return LiveComparison(
        scenario.name, duration_s, delay_ms / 1000, measured, figures, period_ms, live.delay_s
    )


def held_by(live: LiveRun, direction: Direction) -> Callable[[str, float], dict[str, int] | None]:
    """What the live agents held at a second of the scenario."""

    def at(cpe_id: str, second: float) -> dict[str, int] | None:
        return live.history.at(cpe_id, direction.value, live.unix_start_s + second)

    return at
