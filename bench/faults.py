"""`atsss bench faults`: break the live system on purpose, one part at a time, and check.

The system is the one `tests/test_xapp_serve.py` runs, as real processes on loopback: a
redis-server of its own (append-only file, fsync always, as a RIC's database keeps what it
acknowledged), a CPE agent (uplink) and a proxy agent (downlink) on the dry-run backend, `atsss
xapp serve` with SDL and the operator API, and the KPM simulator on paper-dynamic (Wi-Fi's
capacity moves all the time, so the xApp pushes every few seconds). First the steady system is
sampled for comparison (row "none"); then each fault:

1. an operator override is written (201: acknowledged) and what each agent holds (200 to the
   xApp's push: acknowledged) is read;
2. the fault: Redis killed and restarted; an agent killed and restarted; an agent hung
   (SIGSTOP: its connections accept and nothing answers) and let go; the simulator's
   connection dropped and made again; the xApp killed (SIGKILL) and restarted; and, with root,
   an access link down and up under a real MPTCP transfer (bench/link_fault.py);
3. recovery is timed from the end of the fault until the part works again (stated per fault);
4. lost: the override must still be there, and no agent may hold an older sequence than it
   had acknowledged (restarts included); a 409 in the xApp's log would be a lost push too;
5. efficiency during the fault: what the downlink weights the proxy holds (sampled every
   0.2 s) would carry on the simulator's true capacities, over their sum, from the fault's
   start until recovery.

Every wait is bounded; the whole run takes a few minutes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import numpy as np
import yaml

from bench.link_fault import DOWN_FOR_S, link_fault_missing, run_link_fault
from bench.live_system import (
    Agent,
    LiveSystemError,
    PersistentRedis,
    Xapp,
    agent_process,
    atsss,
    persistent_redis,
    start_simulator,
    start_xapp,
    write_xapp_config,
)
from core.fluid import aggregate_mbps

SCENARIO = "paper-dynamic"
SCENARIO_S = 250  # the scenario's length: the whole bench fits in it
CPE = "cpe-1"
OPERATOR_TOKEN = "bench-faults-operator-token"
FAULTS = ("redis", "agent-kill", "agent-hang", "simulator", "xapp-kill", "link")
LIVE_FAULTS = FAULTS[:-1]  # on the live system; "link" runs on the netns testbed
RECOVERY_LIMIT_S = 30.0


class FaultsBenchError(RuntimeError):
    """The system could not be started or a fault could not be made; the message says which."""


@dataclass
class FaultResult:
    fault: str
    what: str
    acknowledged: int  # changes acknowledged before the fault and checked after it
    lost: int
    recovery_s: float | None  # None: not recovered within RECOVERY_LIMIT_S
    recovered_when: str
    efficiency: float | None
    notes: list[str] = field(default_factory=list)


@dataclass
class _Held:
    at_s: float
    sequence: int
    weights: dict[str, int]


class _AgentWatch:
    """Samples what an agent holds every 0.2 s (what its kernel would carry, sequence)."""

    def __init__(self, agent: Agent, direction: str) -> None:
        self.agent = agent
        self.direction = direction
        self.samples: list[_Held] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                held = self.agent.weights(self.direction, CPE)
                if held is not None:
                    applied = held["applied"]
                    weights = held.get("effective") or applied["weights"]
                    self.samples.append(_Held(time.time(), int(applied["sequence"]), dict(weights)))

    def latest_sequence(self) -> int:
        return max((s.sequence for s in self.samples), default=0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class _Truth:
    """The simulator's true downlink capacities, per access, by Unix time."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def capacities(self) -> dict[str, list[tuple[float, float]]]:
        found: dict[str, list[tuple[float, float]]] = {}
        with contextlib.suppress(OSError):
            for line in self.path.read_text().splitlines():
                with contextlib.suppress(ValueError, KeyError):
                    row = json.loads(line)
                    if row["cpe_id"] != CPE:
                        continue
                    capacity = float(row["capacity_dl_mbps"]) if row["available"] else 0.0
                    found.setdefault(row["access"], []).append((float(row["unix_s"]), capacity))
        return found

    def efficiency(self, held: list[_Held], start: float, end: float) -> float | None:
        """On a 0.2 s grid: the weights last seen held (a kernel keeps its weights while the
        agent is away) against the capacities of that moment."""
        table = self.capacities()
        if not table or not held:
            return None
        seen = np.array([s.at_s for s in held])
        carried, total = 0.0, 0.0
        for moment in np.arange(start, end, 0.2):
            index = int(np.searchsorted(seen, moment, side="right")) - 1
            if index < 0:
                continue
            weights_held = held[index].weights
            caps = {a: _at(rows, float(moment)) for a, rows in table.items()}
            accesses = sorted(caps)
            weights = [weights_held.get(a, 0) for a in accesses]
            carried += aggregate_mbps(weights, [caps[a] for a in accesses])
            total += sum(caps.values())
        return carried / total if total > 0 else None


def _at(rows: list[tuple[float, float]], unix_s: float) -> float:
    """The capacity of the period that ``unix_s`` falls in (rows: period end, capacity)."""
    times = np.array([r[0] for r in rows])
    index = int(np.searchsorted(times, unix_s))
    return rows[min(index, len(rows) - 1)][1]


@dataclass
class _System:
    workdir: Path
    redis: PersistentRedis
    cpe: Agent
    proxy: Agent
    config: Path
    env: dict[str, str]
    xapp: Xapp
    simulator: subprocess.Popen[str]
    truth: _Truth
    watches: dict[str, _AgentWatch]

    def api(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.xapp.http_url,
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
            timeout=5,
        )


Progress = Callable[[str], None]


def run_faults_bench(
    faults: tuple[str, ...] | None = None, progress: Progress = lambda message: None
) -> list[FaultResult]:
    """``faults``: which ones (default: all, the link fault only where it can run)."""
    unknown = [f for f in faults or () if f not in FAULTS]
    if unknown:
        raise FaultsBenchError(f"unknown fault {', '.join(unknown)}; expected {', '.join(FAULTS)}")
    missing = link_fault_missing()
    if faults is None:
        faults = FAULTS if missing is None else LIVE_FAULTS
        if missing is not None:
            progress(f"the link fault is left out: it {missing}")
    elif "link" in faults and missing is not None:
        raise FaultsBenchError(f"the link fault {missing}")
    results = _live_faults(tuple(f for f in faults if f != "link"), progress)
    if "link" in faults:
        progress("fault: link (netns testbed, real MPTCP)")
        try:
            found = run_link_fault()
        except (RuntimeError, OSError) as error:
            raise FaultsBenchError(f"the link fault: {error}") from error
        results.append(
            FaultResult(
                "link",
                f"Wi-Fi's link down for {DOWN_FOR_S:g} s under an MPTCP download (mainline "
                "CPE agent, no xApp)",
                found.acknowledged,
                found.lost,
                found.recovery_s,
                "the download back at 90 % of its rate before the fault",
                found.efficiency,
                [*found.notes, f"Mbit/s per second: {found.per_second_mbps}"],
            )
        )
    return results


def _live_faults(faults: tuple[str, ...], progress: Progress) -> list[FaultResult]:
    if not faults:
        return []
    with (
        tempfile.TemporaryDirectory(prefix="atsss-faults-") as folder,
        _system(Path(folder), progress) as system,
    ):
        results = [_steady(system)]
        for fault in faults:
            progress(f"fault: {fault}")
            results.append(_RUNS[fault](system))
            # Between faults: back to a steady system, so each starts from the same footing.
            _wait(system.xapp.ready, RECOVERY_LIMIT_S)
        return results


@contextlib.contextmanager
def _system(workdir: Path, progress: Progress) -> Iterator[_System]:
    tokens = workdir / "tokens.yaml"
    tokens.write_text(
        yaml.safe_dump([{"name": "bench", "role": "operator", "token": OPERATOR_TOKEN}])
    )
    with contextlib.ExitStack() as stack:
        try:
            redis = stack.enter_context(persistent_redis(workdir / "redis"))
        except LiveSystemError as error:
            raise FaultsBenchError(str(error)) from error
        env = {"DBAAS_SERVICE_HOST": "127.0.0.1", "DBAAS_SERVICE_PORT": str(redis.port)}
        cpe = stack.enter_context(agent_process(workdir, "cpe-agent", "cpe", [CPE]))
        proxy = stack.enter_context(agent_process(workdir, "proxy-agent", "proxy", [CPE]))
        try:
            config = write_xapp_config(
                workdir,
                SCENARIO,
                {CPE: cpe.url},
                proxy.url,
                operator_api={"tokens_file": str(tokens)},
            )
        except LiveSystemError as error:
            raise FaultsBenchError(str(error)) from error
        xapp = start_xapp(workdir, config, env, name="xapp-1")
        truth = workdir / "truth.jsonl"
        simulator = start_simulator(workdir, SCENARIO, xapp.e2_port, SCENARIO_S, config, truth)
        system = _System(
            workdir,
            redis,
            cpe,
            proxy,
            config,
            env,
            xapp,
            simulator,
            _Truth(truth),
            {"uplink": _AgentWatch(cpe, "uplink"), "downlink": _AgentWatch(proxy, "downlink")},
        )
        try:
            progress("live system up: redis, two agents, the xApp, the simulator")
            if not _wait(xapp.ready, 60) or not _wait(
                lambda: all(w.latest_sequence() > 0 for w in system.watches.values()), 60
            ):
                raise FaultsBenchError(
                    "the xApp did not push to both agents:\n" + xapp.log()[-2000:]
                )
            yield system
        finally:
            for watch in system.watches.values():
                watch.stop()
            for process in (system.simulator, system.xapp.process):
                if process.poll() is None:
                    process.kill()
                    process.wait(timeout=10)


def _wait(predicate: Callable[[], object], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, OSError):
            if predicate():
                return True
        time.sleep(0.1)
    return False


def _recover(predicate: Callable[[], object]) -> float | None:
    started = time.monotonic()
    return time.monotonic() - started if _wait(predicate, RECOVERY_LIMIT_S) else None


# ---------------------------------------------------------------- acknowledged changes


@dataclass
class _Before:
    override_id: str | None
    sequences: dict[str, int]  # direction → what its agent held
    at_s: float


def _acknowledge(system: _System, fault: str) -> _Before:
    """An override written (201) and what the agents hold, just before the fault."""
    body = {
        "kind": "estimator",
        "estimator": "fused",
        "reason": f"bench faults: kept through {fault}",
        "expires_in_s": 3600,
    }
    override_id = None
    with system.api() as api:
        for _ in range(50):
            answer = api.post(f"/v1/cpes/{CPE}/overrides", json=body)
            if answer.status_code == 201:
                override_id = str(answer.json()["id"])
                break
            time.sleep(0.1)
    sequences = {d: w.latest_sequence() for d, w in system.watches.items()}
    return _Before(override_id, sequences, time.time())


def _check(system: _System, before: _Before, notes: list[str]) -> tuple[int, int]:
    """(acknowledged, lost): the override still listed, no agent behind what it acknowledged.
    The override is removed afterwards, so the next fault writes its own."""
    acknowledged, lost = 0, 0
    if before.override_id is None:
        notes.append("the override could not be written before the fault")
    else:
        acknowledged += 1
        with system.api() as api:
            listed = []
            for _ in range(int(RECOVERY_LIMIT_S * 10)):
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    answer = api.get("/v1/overrides", params={"cpe_id": CPE})
                    if answer.status_code == 200:
                        listed = [str(o["id"]) for o in answer.json()]
                        break
                time.sleep(0.1)
            if before.override_id not in listed:
                lost += 1
                notes.append(f"override {before.override_id} is gone")
            with contextlib.suppress(httpx.HTTPError):
                api.delete(f"/v1/overrides/{before.override_id}", params={"reason": "bench done"})
    for direction, sequence in before.sequences.items():
        acknowledged += 1
        watch = system.watches[direction]
        after = [s.sequence for s in watch.samples if s.at_s >= before.at_s]
        if after and min(after) < sequence:
            lost += 1
            notes.append(f"{direction} agent went back from sequence {sequence} to {min(after)}")
    refused = system.workdir.glob("xapp-*.log")
    for log in refused:
        if "is not after" in log.read_text():
            notes.append(f"{log.name}: an agent refused a sequence (409)")
    return acknowledged, lost


def _result(
    system: _System,
    fault: str,
    what: str,
    before: _Before,
    recovery_s: float | None,
    recovered_when: str,
    notes: list[str],
) -> FaultResult:
    end = time.time()
    acknowledged, lost = _check(system, before, notes)
    efficiency = system.truth.efficiency(system.watches["downlink"].samples, before.at_s, end)
    return FaultResult(
        fault, what, acknowledged, lost, recovery_s, recovered_when, efficiency, notes
    )


# ---------------------------------------------------------------- the faults


def _holds_the_xapps_weights(system: _System, agent: Agent, direction: str) -> bool:
    with system.api() as api:
        state = api.get(f"/v1/cpes/{CPE}").json()
    wanted = state["directions"][direction]["weights_in_force"]
    held = agent.weights(direction, CPE)
    return wanted is not None and held is not None and held["applied"]["weights"] == wanted


def _steady(system: _System, seconds: float = 8.0) -> FaultResult:
    start = time.time()
    time.sleep(seconds)
    efficiency = system.truth.efficiency(system.watches["downlink"].samples, start, time.time())
    return FaultResult(
        "none", f"no fault: the steady system for {seconds:g} s", 0, 0, 0.0, "-", efficiency
    )


def _redis(system: _System) -> FaultResult:
    before = _acknowledge(system, "redis")
    system.redis.kill()
    time.sleep(3.0)
    system.redis.start()

    def sdl_answers() -> bool:
        with system.api() as api:
            return system.xapp.ready() and api.get("/v1/audit").status_code == 200

    recovery = _recover(sdl_answers)
    return _result(
        system,
        "redis",
        "redis-server killed (SIGKILL), 3 s down, restarted on its append-only file",
        before,
        recovery,
        "ready, and the operator API reads SDL again (audit log)",
        [],
    )


def _agent_kill(system: _System) -> FaultResult:
    before = _acknowledge(system, "agent-kill")
    agent = system.proxy
    agent.process.kill()
    agent.process.wait(timeout=10)
    time.sleep(2.0)
    started = time.monotonic()
    restarted = _restart_agent(system, agent)
    answers = _recover(lambda: restarted.weights("downlink", CPE) is not None)
    recovery = _recover(lambda: _holds_the_xapps_weights(system, restarted, "downlink"))
    if recovery is not None:
        recovery = time.monotonic() - started
    notes = [
        "the agent's process answered "
        + ("not within 30 s" if answers is None else f"{answers:.1f} s after its start")
    ]
    return _result(
        system,
        "agent-kill",
        "the proxy agent killed (SIGKILL), 2 s down, restarted on its state file",
        before,
        recovery,
        "the agent answers and holds the xApp's weights",
        notes,
    )


def _restart_agent(system: _System, agent: Agent) -> Agent:
    config = system.workdir / "proxy-agent.yaml"
    with (system.workdir / "proxy-agent.log").open("a") as log:  # the child keeps its own
        agent.process = subprocess.Popen(
            atsss("agent", "run", "--config", str(config)),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    return agent


def _agent_hang(system: _System) -> FaultResult:
    before = _acknowledge(system, "agent-hang")
    agent = system.cpe
    other = system.watches["downlink"]
    pushed_before = len({s.sequence for s in other.samples})
    os.kill(agent.process.pid, signal.SIGSTOP)
    time.sleep(6.0)
    pushed_during = len({s.sequence for s in other.samples}) - pushed_before
    os.kill(agent.process.pid, signal.SIGCONT)
    recovery = _recover(lambda: _holds_the_xapps_weights(system, agent, "uplink"))
    notes = [f"the other agent got {pushed_during} new sets while this one hung"]
    return _result(
        system,
        "agent-hang",
        "the CPE agent stopped (SIGSTOP) for 6 s: it accepts and never answers",
        before,
        recovery,
        "the agent answers and holds the xApp's weights",
        notes,
    )


def _simulator(system: _System) -> FaultResult:
    before = _acknowledge(system, "simulator")
    system.simulator.kill()
    system.simulator.wait(timeout=10)
    time.sleep(3.0)
    restarted_at = time.time()
    system.simulator = start_simulator(
        system.workdir,
        SCENARIO,
        system.xapp.e2_port,
        SCENARIO_S,
        system.config,
        system.truth.path,
    )

    def reporting() -> bool:
        with system.api() as api:
            nodes = api.get("/v1/nodes").json()
        fresh = [n for n in nodes if n["last_report_age_s"] is not None]
        return (
            bool(nodes)
            and len(fresh) == len(nodes)
            and all(time.time() - n["last_report_age_s"] > restarted_at for n in fresh)
        )

    recovery = _recover(reporting)
    return _result(
        system,
        "simulator",
        "the simulator's E2 connections dropped (process killed), 3 s away, connected again",
        before,
        recovery,
        "every node reports again (E2 setup, subscription, an indication)",
        [],
    )


def _xapp_kill(system: _System) -> FaultResult:
    before = _acknowledge(system, "xapp-kill")
    old = system.xapp
    os.kill(old.process.pid, signal.SIGKILL)
    old.process.wait(timeout=10)
    time.sleep(1.0)
    started = time.monotonic()
    system.xapp = start_xapp(
        system.workdir,
        system.config,
        system.env,
        e2_port=old.e2_port,
        name="xapp-2",
        http_port=int(old.http_url.rsplit(":", 1)[1]),
    )
    sequence = system.watches["downlink"].latest_sequence()
    pushed = _wait(
        lambda: system.xapp.ready() and system.watches["downlink"].latest_sequence() > sequence,
        RECOVERY_LIMIT_S,
    )
    recovery = time.monotonic() - started if pushed else None
    return _result(
        system,
        "xapp-kill",
        "the xApp killed (SIGKILL) and started again on the same ports",
        before,
        recovery,
        "ready, and a new set accepted by the proxy agent (its sequence continued)",
        [],
    )


_RUNS: dict[str, Callable[[_System], FaultResult]] = {
    "redis": _redis,
    "agent-kill": _agent_kill,
    "agent-hang": _agent_hang,
    "simulator": _simulator,
    "xapp-kill": _xapp_kill,
}


def as_json(results: list[FaultResult]) -> str:
    return json.dumps([asdict(r) for r in results], indent=2)
