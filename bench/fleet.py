"""`atsss bench fleet`: the live system with a fleet of CPEs, a share of whose agents are hostile.

The KPM simulator (the ``many-cpes`` site, cut to ``--cpes``), ``atsss xapp serve`` on a real
Redis, one MPTCP-proxy agent for the downlink, and every CPE's own agent for the uplink, all of
them served by one process (``bench.agent_host``): real agents for most, and for ``--bad-agents``
percent of the CPEs an agent that is down, hung, trickling, endless, flooding its events or
holding another token, in equal shares. It measures what a fleet operator needs to hold:

- the share of the good CPEs whose agent holds uplink weights (and whose proxy entry holds
  downlink weights), and how long after the xApp's start each got its first;
- how long an operator's override on a good CPE takes to reach its agent (p50, p99);
- the xApp's memory (RSS, its peak) and CPU while the hostile agents do their worst;
- how long the xApp takes to stop on SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.agent_host import HOSTILE
from bench.live_system import (
    TOKEN,
    LiveSystemError,
    answers_200,
    atsss,
    free_ports,
    percentile,
    persistent_redis,
    popen_xapp,
    rss_mb,
    wait_until,
)

OPERATOR_TOKEN = "fleet-operator-token"
KIND_ORDER = ("good", *HOSTILE)


@dataclass
class FleetResult:
    cpes: int
    bad_share: float
    period_s: float
    kinds: dict[str, int]
    estimator: str
    good_uplink_held: float = 0.0  # share of the good CPEs whose agent holds uplink weights
    good_downlink_held: float = 0.0  # share of the good CPEs the proxy holds weights for
    within_3_periods: float = 0.0  # share of good CPEs with both directions by 3 periods in
    first_weights_p50_s: float | None = None  # after the first report reached the xApp
    first_weights_p99_s: float | None = None
    override_p50_s: float | None = None
    override_p99_s: float | None = None
    overrides_lost: int = 0
    rss_mb: float = 0.0
    rss_peak_mb: float = 0.0
    cpu_cores: float = 0.0
    stop_s: float = 0.0
    stop_code: int | None = None
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def kinds_for(count: int, bad_share: float) -> list[str]:
    """Each CPE's agent kind: the hostile ones spread evenly over the fleet, in turn."""
    bad = round(count * bad_share)
    kinds = ["good"] * count
    if bad == 0:
        return kinds
    step = count / bad
    for n in range(bad):
        kinds[int(n * step)] = HOSTILE[n % len(HOSTILE)]
    return kinds


def _scenario(workdir: Path, count: int, period_s: float, duration_s: int = 3600) -> Path:
    shipped = Path(__file__).resolve().parents[1] / "core" / "scenario" / "shipped"
    document = yaml.safe_load((shipped / "many-cpes.yaml").read_text())
    document["name"] = f"fleet-{count}"
    document["cpes"][0]["count"] = count
    document["duration_s"] = duration_s
    path = workdir / "fleet.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _proxy_config(workdir: Path, ids: list[str], port: int) -> Path:
    def address(access: int, n: int) -> str:
        return f"10.{access}.{n // 250}.{n % 250 + 1}"

    config = {
        "role": "proxy",
        "accesses": {
            name: {"interface": f"{name}0", "address": f"10.{i}.255.254"}
            for i, name in enumerate(("nr", "wifi", "lifi"), 1)
        },
        "cpes": {
            cpe_id: {name: address(i, n) for i, name in enumerate(("nr", "wifi", "lifi"), 1)}
            for n, cpe_id in enumerate(ids)
        },
        "listen": f"127.0.0.1:{port}",
        "token_file": str(workdir / "token"),
        "state_file": str(workdir / "proxy-state.json"),
        "backend": "dry-run",
        "max_rules": max(64, 3 * len(ids)),  # three accesses per CPE it serves
        "watch_carrier": False,
    }
    path = workdir / "proxy.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@contextlib.contextmanager
def _process(argv: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[Any]:
    with log.open("a") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _start_agent_host(workdir: Path, kinds: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    document = {
        "instances": {
            cpe_id: {"kind": kind, "token": TOKEN if kind != "wrong-token" else "not-the-token"}
            for cpe_id, kind in kinds.items()
        }
    }
    path = workdir / "agent-host.json"
    path.write_text(json.dumps(document))
    with (workdir / "agent-host.log").open("a") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.agent_host", str(path)],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
        )
    assert process.stdout is not None
    line = process.stdout.readline()  # the port it took itself
    if not line.strip().isdigit():
        process.kill()
        process.wait()
        process.stdout.close()
        raise LiveSystemError(
            "the agent host did not start: " + (workdir / "agent-host.log").read_text()
        )
    return process, int(line)


def _xapp_config(
    workdir: Path,
    scenario: Path,
    kinds: dict[str, str],
    host_port: int,
    proxy_url: str,
    period_ms: int,
    estimator: str,
) -> Path:
    path = workdir / "xapp-config.json"
    done = subprocess.run(
        atsss(
            "e2sim",
            "config",
            "--scenario",
            str(scenario),
            "--period-ms",
            str(period_ms),
            "--proxy-agent",
            proxy_url,
            "--out",
            str(path),
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise LiveSystemError(done.stderr.strip())
    document = json.loads(path.read_text())
    closed = free_ports(1)[0]  # nothing listens there: the "down" agents
    for cpe in document["cpes"]:
        kind = kinds[cpe["id"]]
        port = closed if kind == "down" else host_port
        cpe["agent"] = {"url": f"http://127.0.0.1:{port}/a/{cpe['id']}"}
    document["agents"]["token_file"] = str(workdir / "token")
    document["estimator"] = estimator
    secret = workdir / "operator-secret"
    secret.write_text(OPERATOR_TOKEN + "\n")
    tokens = workdir / "tokens.yaml"
    tokens.write_text(
        yaml.safe_dump([{"name": "bench", "role": "operator", "token_file": str(secret)}])
    )
    document["operator_api"] = {"tokens_file": str(tokens)}
    path.write_text(json.dumps(document))
    return path


def _cpu_s(pid: int) -> float:
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


@dataclass(frozen=True)
class RunningFleet:
    """The live fleet as ``running_fleet`` started it."""

    xapp: subprocess.Popen[str]
    api: str  # the xApp's HTTP address
    operator_token: str
    kinds: dict[str, str]  # CPE id → its agent's kind ("good" or a hostile kind)
    good: list[str]
    proxy_state_file: Path
    host_port: int  # the agent host's port
    started_s: float  # monotonic: when the xApp was started


@contextlib.contextmanager
def running_fleet(
    workdir: Path,
    cpes: int = 1000,
    bad_share: float = 0.05,
    period_ms: int = 1000,
    estimator: str = "fused",
    progress: Any = None,
) -> Iterator[RunningFleet]:
    """The whole live system with ``cpes`` CPEs, until the block ends (then SIGKILL whatever is
    still running: a caller that measures the stop sends SIGTERM itself)."""
    say = progress or (lambda text: None)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "token").write_text(TOKEN + "\n")
    ids = [f"cpe-{n:04d}" for n in range(cpes)]
    kinds = dict(zip(ids, kinds_for(cpes, bad_share), strict=True))
    good = [c for c in ids if kinds[c] == "good"]
    scenario = _scenario(workdir, cpes, period_ms / 1000)
    say(f"{cpes} CPEs, {cpes - len(good)} hostile agents; starting the agents")
    host, host_port = _start_agent_host(workdir, kinds)
    proxy_port = free_ports(1)[0]
    try:
        with (
            persistent_redis(workdir / "redis") as redis,
            _process(
                atsss("agent", "run", "--config", str(_proxy_config(workdir, ids, proxy_port))),
                workdir / "proxy.log",
            ),
        ):
            proxy_url = f"http://127.0.0.1:{proxy_port}"
            wait_until(lambda: answers_200(proxy_url + "/v1/health"), 30, "the proxy agent")
            config = _xapp_config(
                workdir, scenario, kinds, host_port, proxy_url, period_ms, estimator
            )
            e2_port, http_port = free_ports(2)
            env = {"DBAAS_SERVICE_HOST": "127.0.0.1", "DBAAS_SERVICE_PORT": str(redis.port)}
            say("starting the xApp and the simulator")
            with (workdir / "xapp.log").open("a") as log:
                xapp = popen_xapp(log, config, "standalone", e2_port, http_port, env)
            api = f"http://127.0.0.1:{http_port}"
            try:
                started = time.monotonic()
                wait_until(lambda: answers_200(api + "/ric/v1/health/alive"), 60, "the xApp")
                with _process(
                    atsss(
                        "e2sim",
                        "run",
                        "--scenario",
                        str(scenario),
                        "--connect",
                        f"127.0.0.1:{e2_port}",
                        "--period-ms",
                        str(period_ms),
                        "--duration",
                        "3600",
                    ),
                    workdir / "e2sim.log",
                ):
                    yield RunningFleet(
                        xapp,
                        api,
                        OPERATOR_TOKEN,
                        kinds,
                        good,
                        workdir / "proxy-state.json",
                        host_port,
                        started,
                    )
            finally:
                if xapp.poll() is None:
                    xapp.kill()
                    xapp.wait()
    finally:
        host.terminate()
        host.wait(timeout=10)
        if host.stdout is not None:
            host.stdout.close()


def run_fleet(
    workdir: Path,
    cpes: int = 1000,
    bad_share: float = 0.05,
    period_ms: int = 1000,
    settle_s: float = 30.0,
    overrides: int = 20,
    progress: Any = None,
    estimator: str = "fused",
) -> FleetResult:
    """The whole run; ``progress(text)`` hears what it is doing."""
    say = progress or (lambda text: None)
    with running_fleet(workdir, cpes, bad_share, period_ms, estimator, say) as fleet:
        counts = {k: sum(1 for v in fleet.kinds.values() if v == k) for k in KIND_ORDER}
        result = FleetResult(cpes, bad_share, period_ms / 1000, counts, estimator)
        _measure(
            result,
            fleet.xapp.pid,
            fleet.api,
            fleet.proxy_state_file,
            fleet.host_port,
            fleet.good,
            fleet.started_s,
            period_ms / 1000,
            settle_s,
            overrides,
            say,
        )
        say("stopping the xApp")
        begun = time.monotonic()
        fleet.xapp.send_signal(signal.SIGTERM)
        try:
            result.stop_code = fleet.xapp.wait(timeout=30)
        except subprocess.TimeoutExpired:
            result.notes.append("the xApp did not stop within 30 s")
        result.stop_s = round(time.monotonic() - begun, 2)
    return result


def _proxy_holds(state_file: Path) -> set[str]:
    """The CPEs the proxy agent holds downlink weights for, from the state file it keeps."""
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        return {entry["cpe_id"] for entry in json.loads(state_file.read_text())["applied"]}
    return set()


def _measure(
    result: FleetResult,
    pid: int,
    api: str,
    proxy_state: Path,
    host_port: int,
    good: list[str],
    started: float,
    period_s: float,
    settle_s: float,
    overrides: int,
    say: Any,
) -> None:
    first_up: dict[str, float] = {}
    first_down: dict[str, float] = {}
    first_report: float | None = None
    rss_peak = 0.0
    cpu_start = _cpu_s(pid)
    wall_start = time.monotonic()
    deadline = time.monotonic() + settle_s
    say(f"watching the weights for {settle_s:.0f} s")
    while time.monotonic() < deadline:
        now = time.monotonic()
        try:
            held = httpx.get(f"http://127.0.0.1:{host_port}/host/weights", timeout=10).json()
        except httpx.HTTPError as error:  # a busy host: this look is skipped, not the run
            result.notes.append(f"the agent host did not answer a look: {error!r}")
            held = {}
        for cpe_id in good:
            if cpe_id not in first_up and held.get(cpe_id):
                first_up[cpe_id] = now
        for cpe_id in (_proxy_holds(proxy_state) & set(good)) - set(first_down):
            first_down[cpe_id] = now
        if first_report is None:
            with contextlib.suppress(httpx.HTTPError, ValueError, TypeError, KeyError):
                nodes = httpx.get(
                    api + "/v1/nodes",
                    timeout=5,
                    headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
                ).json()
                if any(n["last_report_age_s"] is not None for n in nodes):
                    first_report = now
        rss_peak = max(rss_peak, rss_mb(pid))
        time.sleep(min(1.0, period_s))
    result.good_uplink_held = round(len(first_up) / max(1, len(good)), 4)
    result.good_downlink_held = round(len(first_down) / max(1, len(good)), 4)
    origin = first_report if first_report is not None else started
    both = [
        max(first_up[c], first_down[c]) - origin for c in good if c in first_up and c in first_down
    ]
    result.within_3_periods = round(
        sum(1 for s in both if s <= 3 * period_s + 1.0) / max(1, len(good)), 4
    )
    result.first_weights_p50_s = _round(percentile(both, 0.5))
    result.first_weights_p99_s = _round(percentile(both, 0.99))
    say("overrides on good CPEs")
    latencies = []
    for n, cpe_id in enumerate(good[:overrides]):
        weights = {"nr": 7 + n % 5, "wifi": 11, "lifi": 3}

        def held_by_host(cpe_id: str = cpe_id) -> Any:
            found = httpx.get(
                f"http://127.0.0.1:{host_port}/host/weights", params={"cpe_id": cpe_id}, timeout=10
            ).json()
            return (found.get(cpe_id) or {}).get("weights")

        outcome = timed_override(
            api, cpe_id, "uplink", weights, "fleet bench", 10, held_by_host, 20 * period_s + 10
        )
        if isinstance(outcome, float):
            latencies.append(outcome)
        elif outcome.refused:  # an answer other than 201: noted, not counted as lost
            result.notes.append(f"override on {cpe_id}: {outcome.why}")
        else:
            if outcome.why:
                result.notes.append(f"override on {cpe_id}: the xApp {outcome.why}")
            result.overrides_lost += 1
        rss_peak = max(rss_peak, rss_mb(pid))
    result.override_p50_s = _round(percentile(latencies, 0.5))
    result.override_p99_s = _round(percentile(latencies, 0.99))
    result.rss_mb = round(rss_mb(pid), 1)
    result.rss_peak_mb = round(max(rss_peak, result.rss_mb), 1)
    result.cpu_cores = round((_cpu_s(pid) - cpu_start) / (time.monotonic() - wall_start), 2)


@dataclass(frozen=True)
class OverrideMissed:
    why: str  # "" when it was stored but never reached the agent
    refused: bool = False  # the API answered, not with 201


def timed_override(
    api: str,
    cpe_id: str,
    direction: str,
    weights: dict[str, int],
    reason: str,
    timeout_s: float,
    held: Any,
    wait_s: float,
) -> float | OverrideMissed:
    """Set a weights override through ``api`` and wait (``wait_s`` at most) until ``held()``
    (what the agent holds) equals it: the seconds it took, or why it did not arrive."""
    sent = time.monotonic()
    try:
        answer = httpx.post(
            f"{api}/v1/cpes/{cpe_id}/overrides",
            json={
                "kind": "weights",
                "directions": [direction],
                "weights": weights,
                "reason": reason,
                "expires_in_s": 600,
            },
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
            timeout=timeout_s,
        )
    except httpx.HTTPError as error:
        return OverrideMissed(f"did not answer: {error!r}")
    if answer.status_code != 201:
        return OverrideMissed(f"{answer.status_code} {answer.text[:200]}", refused=True)
    while time.monotonic() - sent < wait_s:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
            if held() == weights:
                return time.monotonic() - sent
        time.sleep(0.02)
    return OverrideMissed("")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
