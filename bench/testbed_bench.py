"""`atsss bench testbed`: the whole system for real in the agent's netns testbed.

Topology (agent/testbed.py): a CPE and an MPTCP proxy in two network namespaces, one veth pair
per access, htb shaping each way, and a management link from the host's namespace to the CPE.
The scenario's capacities, scaled to what this machine can shape, drive both the shaping
(changed in place every 100 ms, the world's clock; outages as 100 % loss) and the KPM
simulator, so the KPIs the xApp reads describe the paths the data really crosses. One long
MPTCP iperf3 transfer runs per phase:

1. **all active**: every path weighted 1, the kernel's own scheduler spreads the data (the
   baseline: what MPTCP does without us);
2. **xApp**: `atsss e2sim run` → `atsss xapp run` (standalone E2) → the CPE's `atsss agent run`
   (mainline backend: weight 0 puts the endpoint on backup, which also steers the proxy's
   sending through MP_PRIO).

Both phases follow the same scenario clock; per step the report gives the sum of the shaped
capacities of the available paths and what each phase carried.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import httpx
import numpy as np
import yaml

from agent.testbed import ACCESSES, Testbed
from bench.live_system import FIRST_PUSH
from core.domain import Direction
from core.scenario.model import Scenario
from core.scenario.truth import WORLD_CLOCK_S
from core.sequence import epoch_at
from e2sim.world import SimWorld

PROBE_PORT, MPTCP_PORT, AGENT_PORT = 5201, 5202, 8700


class TestbedBenchError(RuntimeError):
    __test__ = False


@dataclass(frozen=True)
class TestbedBenchSettings:
    __test__ = False

    scenario: Scenario
    scale: float = 0.1
    direction: Direction = Direction.DOWNLINK
    duration_s: float = 30.0
    step_s: float = 10.0
    estimator: str = "fused"
    # After the xApp's first push, time for MPTCP to leave the paths it was told to leave.
    settle_s: float = 3.0
    first_push_timeout_s: float = 30.0
    e2_port: int = 36499
    # How an outage is made: the link taken down (the CPE's agent sees its carrier go) or
    # every packet dropped with the link up (only the transport and the reports notice).
    outage: Literal["link", "loss"] = "link"
    prefix: str = "atb"
    subnet: int = 66
    # Where the run's logs go (the xApp's, the agent's, the simulator's truth), kept after it;
    # None: a temporary folder, removed.
    workdir: Path | None = None
    # The transfer's TCP congestion control on every subflow (set on the sockets, so the host's
    # default does not decide it); "host" leaves the host's. The kernel's default is cubic.
    congestion: str = "cubic"
    # The simulated nodes' reporting period. The paths are shaped on the world's clock
    # whatever it is, so that runs at 1 s and at 100 ms reports cross the same paths, and a
    # 1 s report says what the second's shaping was on average.
    reporting_period_ms: int = 1000
    # Each shaped link's buffer (agent/testbed.py), in ms of its rate; None: the kernel's FIFO
    # of 1,000 packets, which held 340 ms of NR and 10 s of LiFi at a tenth of the scenario's
    # rates. Radio links hold tens of milliseconds.
    link_buffer_ms: float | None = 50.0
    # Both namespaces' default TCP receive buffer; None: the kernel's 128 KiB, which caps the
    # window of a subflow that joins later at about 115 KiB (about 70 Mbit/s at NR's RTT).
    receive_buffer_kib: int | None = 2048

    @property
    def shaping_step_s(self) -> float:
        return WORLD_CLOCK_S


@dataclass
class PhaseResult:
    name: str
    start_s: float = 0.0  # second of the scenario clock the transfer started at
    # Carried per second of the scenario clock (Mbit/s); NaN where iperf3 gave no interval.
    carried_mbps: list[float] = field(default_factory=list)
    backup: list[dict[str, bool]] = field(default_factory=list)  # endpoint flags per second
    shaping_error: str = ""
    log: str = ""
    churn: Churn | None = None  # with the xApp: what its pushes cost the connection


@dataclass(frozen=True)
class Churn:
    """What the xApp's pushes did to the connection over the transfer: sets the agent applied,
    endpoint flag flips they made (mainline: weight 0 ⇄ > 0 is backup ⇄ active), and the
    MP_PRIO options the kernel sent (CPE) and received (proxy) for them."""

    pushes: int
    flips: int
    mp_prio_sent: int
    mp_prio_received: int
    seconds: float


@dataclass
class TestbedBenchResult:
    __test__ = False

    settings: TestbedBenchSettings
    shaped_mbps: list[dict[str, float]]  # per second: available access → shaped rate
    phases: list[PhaseResult]

    def steps(self) -> list[tuple[float, float, dict[str, float]]]:
        """Per step: start second, mean shaped sum, and each phase's mean carried."""
        out = []
        step = max(1, round(self.settings.step_s))
        for start in range(0, len(self.shaped_mbps), step):
            window = slice(start, start + step)
            shaped = float(np.mean([sum(s.values()) for s in self.shaped_mbps[window]]))
            carried = {
                p.name: float(np.nanmean(p.carried_mbps[window]))
                if np.isfinite(p.carried_mbps[window]).any()
                else float("nan")
                for p in self.phases
            }
            out.append((float(start), shaped, carried))
        return out

    def totals(self) -> tuple[float, dict[str, float]]:
        shaped = float(np.mean([sum(s.values()) for s in self.shaped_mbps]))
        return shaped, {p.name: float(np.nanmean(p.carried_mbps)) for p in self.phases}

    def as_dict(self) -> dict[str, object]:
        shaped, carried = self.totals()
        return {
            "scenario": self.settings.scenario.name,
            "reporting_period_ms": self.settings.reporting_period_ms,
            "scale": self.settings.scale,
            "direction": self.settings.direction.value,
            "estimator": self.settings.estimator,
            "congestion": self.settings.congestion,
            "link_buffer_ms": self.settings.link_buffer_ms,
            "receive_buffer_kib": self.settings.receive_buffer_kib,
            "shaped_mbps": round(shaped, 2),
            "carried_mbps": {k: round(v, 2) for k, v in carried.items()},
            "ratio": {k: round(v / shaped, 3) for k, v in carried.items()},
            "steps": [
                {
                    "start_s": start,
                    "shaped_mbps": round(s, 2),
                    "carried_mbps": {k: round(v, 2) for k, v in c.items()},
                }
                for start, s, c in self.steps()
            ],
            "start_s": {p.name: round(p.start_s, 1) for p in self.phases},
            "per_second": {
                "shaped_mbps": [round(sum(s.values()), 2) for s in self.shaped_mbps],
                **{p.name: [round(c, 2) for c in p.carried_mbps] for p in self.phases},
            },
            "backup": {p.name: p.backup for p in self.phases},
            "churn": {p.name: asdict(p.churn) for p in self.phases if p.churn is not None},
        }


def run_testbed_bench(
    settings: TestbedBenchSettings, progress: Callable[[str], None] = lambda message: None
) -> TestbedBenchResult:
    if os.geteuid() != 0:
        raise TestbedBenchError("the testbed needs root (network namespaces, tc)")
    if len(settings.scenario.cpes) != 1:
        raise TestbedBenchError(
            f"the testbed has one CPE; scenario {settings.scenario.name} has "
            f"{len(settings.scenario.cpes)}"
        )
    missing = set(settings.scenario.access_names) - set(ACCESSES)
    if missing:
        raise TestbedBenchError(f"the testbed has no path for {', '.join(sorted(missing))}")
    total_s = settings.first_push_timeout_s + settings.settle_s + settings.duration_s + 10
    scenario = settings.scenario.cut(min(settings.scenario.duration_s, total_s))
    world = SimWorld(scenario, settings.shaping_step_s, capacity_scale=settings.scale)
    schedule = _Schedule(world, settings.direction)
    bed = Testbed(
        prefix=settings.prefix,
        subnet=settings.subnet,
        link_buffer_ms=settings.link_buffer_ms,
        receive_buffer_bytes=(
            None if settings.receive_buffer_kib is None else settings.receive_buffer_kib * 1024
        ),
    )
    bed.down()
    progress(f"testbed {bed.cpe_ns} / {bed.proxy_ns} up")
    bed.up()
    with contextlib.ExitStack() as stack:
        stack.callback(bed.down)
        if settings.workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="atsss-bench-")))
        else:
            workdir = settings.workdir
            workdir.mkdir(parents=True, exist_ok=True)
        bed.shape(*_symmetric(schedule.rates_at(0)))
        for argv in (
            ["iperf3", "-s", "-p", str(PROBE_PORT)],
            ["mptcpize", "run", "iperf3", "-s", "-p", str(MPTCP_PORT)],
        ):
            stack.enter_context(_process(bed.in_proxy(argv), workdir / f"server{argv[-1]}.log"))
        for port in (PROBE_PORT, MPTCP_PORT):
            bed.wait_listening(port)
        agent_url = f"http://{bed.management_address}:{AGENT_PORT}"
        config = _agent_config(bed, workdir)
        stack.enter_context(
            _process(
                bed.in_cpe(
                    [sys.executable, "-m", "atsss", "agent", "run", "--config", str(config)]
                ),
                workdir / "agent.log",
            )
        )
        _wait_healthy(agent_url)

        every_path = dict.fromkeys(scenario.access_names, 1)
        _put_weights(agent_url, settings.direction, every_path, 1)
        progress(f"phase 1: the xApp in the loop ({settings.estimator} estimator)")
        xapp_argv = _xapp_argv(settings, scenario, agent_url, total_s)
        with_xapp = _measure("xapp", bed, settings, schedule, workdir, xapp_argv, agent_url)
        progress(
            f"the xApp's first push came {with_xapp.start_s - settings.settle_s:.1f} s after "
            "the simulator started"
        )
        first_push = FIRST_PUSH.search((workdir / "xapp-xapp.log").read_text())
        if first_push is not None:
            progress(
                f"first weights {first_push.group(2)} s after the first report of the CPE's "
                "last access"
            )
        progress("phase 2: all paths active (the kernel's own scheduler), same clock")
        held = _sequence(agent_url, settings.direction)
        _put_weights(agent_url, settings.direction, every_path, held + 1)
        baseline = _measure(
            "all-active", bed, settings, schedule, workdir, None, agent_url, with_xapp.start_s
        )
    # Both transfers ran over the same seconds of the scenario clock.
    first = round(with_xapp.start_s)
    shaped = [schedule.rates(first + t) for t in range(round(settings.duration_s))]
    return TestbedBenchResult(settings, shaped, [baseline, with_xapp])


class _Schedule:
    """The scenario's capacities of the testbed's one CPE, as shaping rates, on the world's
    ticks (WORLD_CLOCK_S)."""

    def __init__(self, world: SimWorld, direction: Direction) -> None:
        self.world = world
        self.direction = direction
        self.ticks_per_s = max(1, round(1.0 / world.period_s))

    def rates(self, second: int) -> dict[str, float]:
        """Available access → mean rate in the measured direction over this second of the
        clock (a path down for part of it counts 0 then)."""
        ticks = [self.rates_at(second * self.ticks_per_s + t) for t in range(self.ticks_per_s)]
        accesses = {a for rates in ticks for a in rates}
        return {a: sum(r.get(a, 0.0) for r in ticks) / len(ticks) for a in sorted(accesses)}

    def rates_at(self, tick: int) -> dict[str, float]:
        """Available access → rate in the measured direction at this tick of the clock."""
        tick = min(tick, self.world.ticks - 1)
        out = {}
        for access in self.world.accesses:
            truth = self.world.truth(tick, access)
            capacity = (
                truth.capacity_dl_mbps
                if self.direction == Direction.DOWNLINK
                else truth.capacity_ul_mbps
            )
            if bool(truth.available[0]) and float(capacity[0]) > 0:
                out[access] = float(capacity[0])
        return out


def _symmetric(rates: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """Both ways at the measured direction's rates: the other way carries only acknowledgements
    and never binds. A path down at the start gets a token rate; the follower drops it."""
    full = {a: rates.get(a, 0.01) for a in ACCESSES}
    return full, full


def _measure(
    name: str,
    bed: Testbed,
    settings: TestbedBenchSettings,
    schedule: _Schedule,
    workdir: Path,
    extra: list[list[str]] | None,
    agent_url: str,
    start_s: float | None = None,
) -> PhaseResult:
    """One phase on the scenario clock: (the xApp and the simulator,) shaping, the transfer.

    With the xApp, the transfer starts ``settle_s`` after its first push; without, at
    ``start_s`` of the clock."""
    result = PhaseResult(name)
    stop = threading.Event()
    with contextlib.ExitStack() as stack:
        if extra is not None:
            xapp, e2sim = extra
            truth = workdir / "truth.jsonl"
            stack.enter_context(_process(xapp, workdir / f"{name}-xapp.log"))
            time.sleep(1.5)  # the xApp listens before the simulator's nodes connect
            stack.enter_context(
                _process([*e2sim, "--truth", str(truth)], workdir / f"{name}-e2sim.log")
            )
            clock_start = _simulator_clock(truth, settings.first_push_timeout_s)
        else:
            clock_start = time.monotonic()
        shaper = threading.Thread(
            target=_follow,
            args=(bed, schedule, clock_start, stop, result, settings.outage),
            daemon=True,
        )
        shaper.start()
        stack.callback(shaper.join, 10)
        stack.callback(stop.set)
        if start_s is None:
            held = _sequence(agent_url, settings.direction)
            deadline = clock_start + settings.first_push_timeout_s
            while _sequence(agent_url, settings.direction) == held:
                if time.monotonic() > deadline:
                    raise TestbedBenchError(
                        f"the xApp pushed no weights within {settings.first_push_timeout_s:.0f} s; "
                        f"its log ends: {_tail(workdir / f'{name}-xapp.log')}"
                    )
                time.sleep(0.1)
            # Start on a step boundary of the clock, so rows line up with the scenario's steps.
            # A connection opens on the CPE's default path (nr), so it must be up then.
            earliest = time.monotonic() - clock_start + settings.settle_s
            start_s = math.ceil(earliest / settings.step_s) * settings.step_s
            while "nr" not in schedule.rates(round(start_s)) and start_s < 600:
                start_s += settings.step_s
        result.start_s = start_s
        time.sleep(max(0.0, clock_start + start_s - time.monotonic()))
        counted_from, counters_before = time.time(), _prio_counters(bed)
        argv = ["mptcpize", "run", "iperf3", "-c", str(bed.server), "-p", str(MPTCP_PORT)]
        argv += ["-t", f"{settings.duration_s:g}", "-i", "1", "--forceflush", "-f", "m"]
        if settings.congestion != "host":
            argv += ["-C", settings.congestion]  # iperf3 sets it at both ends
        if settings.direction == Direction.DOWNLINK:
            argv.append("-R")
        intervals, failure = _transfer(bed.in_cpe(argv), settings.duration_s + 60)
        if extra is not None:
            counted_until, counters_after = time.time(), _prio_counters(bed)
            pushes, flips = churn_in_log(
                (workdir / "agent.log").read_text(errors="replace"),
                settings.direction,
                counted_from,
                counted_until,
            )
            result.churn = Churn(
                pushes,
                flips,
                counters_after[0] - counters_before[0],
                counters_after[1] - counters_before[1],
                round(counted_until - counted_from, 1),
            )
    if result.shaping_error:
        raise TestbedBenchError(f"{name}: shaping failed: {result.shaping_error}")
    if not intervals:
        raise TestbedBenchError(f"{name}: iperf3 carried nothing: {failure}")
    # Each interval's line is printed as it ends: place it on the clock by its arrival, as
    # iperf3's own interval times start after its connection set-up, a second or more late.
    carried = [float("nan")] * round(settings.duration_s)
    for arrived_at, length_s, mbps in intervals:
        second = round(arrived_at - length_s - clock_start - result.start_s)
        if 0 <= second < len(carried):
            carried[second] = mbps
    result.carried_mbps = carried
    first = round(result.start_s)
    result.backup = result.backup[first : first + len(carried)]
    for log in sorted(workdir.glob(f"{name}-*.log")):
        result.log += log.read_text()[-2000:]
    return result


_APPLIED = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .*applied (\w+) weights (\{[^}]*\}) "
    r"for .* as asked by xapp"
)


def churn_in_log(
    agent_log: str, direction: Direction, since_unix_s: float, until_unix_s: float
) -> tuple[int, int]:
    """From the CPE agent's log: the sets the xApp had applied in the direction between the two
    times, and how many endpoint flags they flipped (a path going from weight 0 to more, or
    back: on the mainline lever each is an `ip mptcp endpoint change` and an MP_PRIO per
    subflow on it). The set in force before the window is where the flips count from."""
    pushes = flips = 0
    previous: dict[str, bool] | None = None
    for line in agent_log.splitlines():
        found = _APPLIED.match(line)
        if found is None or found.group(3) != direction.value:
            continue
        stamp = time.mktime(time.strptime(found.group(1), "%Y-%m-%d %H:%M:%S"))
        at = stamp + int(found.group(2)) / 1000
        if at > until_unix_s:
            break
        carries = {a: int(w) > 0 for a, w in ast.literal_eval(found.group(4)).items()}
        if at >= since_unix_s:
            pushes += 1
            if previous is not None:
                flips += sum(carries.get(a, False) != c for a, c in previous.items())
        previous = carries
    return pushes, flips


def _prio_counters(bed: Testbed) -> tuple[int, int]:
    """MP_PRIO options sent by the CPE's kernel and received by the proxy's, so far."""
    sent = _mptcp_counter(bed.in_cpe(["cat", "/proc/net/netstat"]), "MPTcpExtMPPrioTx")
    received = _mptcp_counter(bed.in_proxy(["cat", "/proc/net/netstat"]), "MPTcpExtMPPrioRx")
    return sent, received


def _mptcp_counter(argv: list[str], name: str) -> int:
    """One counter of /proc/net/netstat (its "MPTcpExt:" lines: names, then values)."""
    shown = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    lines = [line.split() for line in shown.splitlines() if line.startswith("MPTcpExt:")]
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        counters = dict(zip(names[1:], values[1:], strict=False))
        key = name.removeprefix("MPTcpExt")
        if key in counters:
            return int(counters[key])
    raise TestbedBenchError(f"the kernel counts no {name} (/proc/net/netstat)")


_INTERVAL = re.compile(r"\s([\d.]+)-([\d.]+)\s+sec\s+[\d.]+ \w?Bytes\s+([\d.]+) Mbits/sec")


def _transfer(argv: list[str], timeout_s: float) -> tuple[list[tuple[float, float, float]], str]:
    """Run iperf3 (text output, flushed per interval); (arrival, length s, Mbit/s) per
    interval as its line came in, and the tail of the output when it failed."""
    intervals = []
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            found = _INTERVAL.search(line)
            # Per-interval lines only: the summary lines end with "sender" / "receiver".
            if found and "sender" not in line and "receiver" not in line:
                start, end, mbps = (float(g) for g in found.groups())
                intervals.append((time.monotonic(), end - start, mbps))
            if time.monotonic() > deadline:
                process.kill()
                break
    return intervals, "".join(lines[-5:])[-500:]


def _follow(
    bed: Testbed,
    schedule: _Schedule,
    clock_start: float,
    stop: threading.Event,
    result: PhaseResult,
    outage: str,
) -> None:
    """Every second: shape to the scenario's capacities of that second; note the backup flags."""
    try:
        _follow_clock(bed, schedule, clock_start, stop, result, outage)
    except Exception as error:  # reported by the phase; the transfer cannot be trusted
        result.shaping_error = f"{type(error).__name__}: {error}"


def _follow_clock(
    bed: Testbed,
    schedule: _Schedule,
    clock_start: float,
    stop: threading.Event,
    result: PhaseResult,
    outage: str,
) -> None:
    """Every tick of the world's clock: shape to the scenario's capacities of that tick;
    every second, note the backup flags."""
    per_s = schedule.ticks_per_s
    tick = max(0, int((time.monotonic() - clock_start) * per_s))
    result.backup.extend({} for _ in range(tick // per_s))
    applied: dict[str, float] = {}
    down: set[str] = set()
    while not stop.is_set():
        rates = schedule.rates_at(tick)
        for access in ACCESSES:
            if access in rates and abs(rates[access] - applied.get(access, -1)) > 1e-6:
                for side in ("cpe", "proxy"):
                    bed.set_rate(access, side, rates[access])
                applied[access] = rates[access]
            if (access not in rates) != (access in down):
                if outage == "link":
                    bed.set_link(access, access in rates)
                else:
                    bed.set_outage(access, access not in rates)
                down.symmetric_difference_update({access})
        if tick % per_s == 0:
            result.backup.append(bed.backup_flags())
        tick += 1
        stop.wait(max(0.0, clock_start + tick / per_s - time.monotonic()))


def _simulator_clock(truth: Path, timeout_s: float) -> float:
    """When the simulator's scenario clock started, on this process's monotonic clock: its
    truth records carry each period's Unix time, and its start is some seconds of imports and
    E2 setup after launch, too long to guess for outages that last 5 s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
            first = json.loads(truth.read_text().splitlines()[0])
            unix_start = float(first["unix_s"]) - float(first["time_s"])
            return time.monotonic() - (time.time() - unix_start)
        time.sleep(0.05)
    raise TestbedBenchError(f"the simulator reported nothing within {timeout_s:.0f} s")


def _xapp_argv(
    settings: TestbedBenchSettings, scenario: Scenario, agent_url: str, total_s: float
) -> list[list[str]]:
    cpe_id = scenario.cpes[0].cpe.cpe_id
    source = str(scenario.source)
    # INFO: the xApp logs when its first weights went out (read back for the report).
    xapp = ["env", "ATSSS_LOG_LEVEL=INFO", sys.executable, "-m", "atsss", "xapp", "run"]
    xapp += ["--scenario", source]
    xapp += ["--listen", f"127.0.0.1:{settings.e2_port}", "--duration", f"{total_s:g}"]
    xapp += ["--agent", f"{cpe_id}={agent_url}", "--direction", settings.direction.value]
    xapp += ["--estimator", settings.estimator]
    xapp += ["--period-ms", str(settings.reporting_period_ms)]
    if settings.direction == Direction.DOWNLINK:
        xapp.append("--downlink-via-cpe")
    e2sim = [sys.executable, "-m", "atsss", "e2sim", "run", "--scenario", source]
    e2sim += ["--connect", f"127.0.0.1:{settings.e2_port}", "--scale", f"{settings.scale:g}"]
    e2sim += ["--duration", f"{total_s:g}", "--json"]
    e2sim += ["--period-ms", str(settings.reporting_period_ms)]
    return [xapp, e2sim]


def _agent_config(bed: Testbed, workdir: Path) -> Path:
    config = bed.cpe_agent_config(
        workdir / "agent-state.json",
        listen=f"{bed.management_address}:{AGENT_PORT}",
        probe_server=str(bed.server),
    )
    path = workdir / "agent.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _wait_healthy(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise TestbedBenchError(f"the CPE agent at {url} did not answer within {timeout_s:.0f} s")


def _sequence(url: str, direction: Direction) -> int:
    response = httpx.get(f"{url}/v1/weights/{direction.value}", timeout=10)
    if response.status_code == 404:
        return 0
    if response.status_code != 200:
        raise TestbedBenchError(f"agent at {url}: {response.status_code} {response.text[:300]}")
    return int(response.json()["applied"]["sequence"])


def _tail(log: Path) -> str:
    try:
        return log.read_text()[-800:]
    except OSError:
        return "(no log)"


def _put_weights(url: str, direction: Direction, weights: dict[str, int], sequence: int) -> None:
    response = httpx.put(
        f"{url}/v1/weights/{direction.value}",
        # the bench takes the CPE over from the xApp it ran before (a later owner epoch)
        json={
            "weights": weights,
            "sequence": sequence,
            "requested_by": "bench",
            "epoch": epoch_at(time.time()),
        },
        timeout=10,
    )
    if response.status_code != 200:
        raise TestbedBenchError(f"agent refused {weights}: {response.text[:300]}")


@contextlib.contextmanager
def _process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            time.sleep(0.2)
            if process.poll() is not None:
                raise TestbedBenchError(
                    f"{' '.join(argv[:6])} exited at once: {log.read_text()[-500:]}"
                )
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
