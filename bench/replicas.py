"""`atsss bench replicas`: several `xapp serve` replicas sharing a fleet through one real Redis.

What a cluster needs of its replicas, with thousands of CPEs: every CPE leased by exactly one
live replica at every look (a lease that ran out is a CPE nobody controls), the CPEs shared out
between the replicas, and an operator's override, sent to whichever replica a Service picks,
reaching the CPE's agent within a couple of periods. The replicas control the downlink through
one MPTCP-proxy agent (a real `atsss agent run`, dry-run kernel) that serves every CPE; no E2
node reports, so what is measured is the replicas' own machinery (leases, the shared operator
state, the override path), not the processing path (`atsss bench xapp` measures that).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis

from bench.fleet import OPERATOR_TOKEN, _process, _proxy_config, _scenario, timed_override
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
from xapp.ownership import assigned_replica


@dataclass
class ReplicasResult:
    cpes: int
    replicas: int
    period_s: float
    # from starting the replicas to every CPE leased by the replica meant for it
    leased_after_s: float | None = None
    checks: int = 0
    # per look: CPEs whose lease is live and held by a live replica (the worst look)
    worst_leased: int = 0
    looks_all_leased: int = 0
    share: dict[str, int] = field(default_factory=dict)  # CPEs per replica at the last look
    override_p50_s: float | None = None
    override_p99_s: float | None = None
    overrides_lost: int = 0
    rss_mb: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Replica:
    name: str
    process: subprocess.Popen[str]
    api: str


def run_replicas(
    workdir: Path,
    cpes: int = 10_000,
    replicas: int = 2,
    period_ms: int = 1000,
    checks: int = 10,
    overrides: int = 20,
    progress: Callable[[str], None] | None = None,
) -> ReplicasResult:
    say = progress or (lambda text: None)
    period_s = period_ms / 1000
    result = ReplicasResult(cpes, replicas, period_s)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "token").write_text(TOKEN + "\n")
    ids = [f"cpe-{n:04d}" for n in range(cpes)]
    proxy_port = free_ports(1)[0]
    with (
        persistent_redis(workdir / "redis") as store,
        _process(
            atsss("agent", "run", "--config", str(_proxy_config(workdir, ids, proxy_port))),
            workdir / "proxy.log",
        ),
    ):
        proxy = f"http://127.0.0.1:{proxy_port}"
        wait_until(lambda: answers_200(proxy + "/v1/health"), 60, "the proxy agent")
        say(f"{cpes} CPEs: writing the configuration")
        config = _config(workdir, cpes, period_ms, proxy)
        env = {"DBAAS_SERVICE_HOST": "127.0.0.1", "DBAAS_SERVICE_PORT": str(store.port)}
        client = redis.Redis(port=store.port)
        say(f"starting {replicas} replicas")
        started = time.monotonic()
        with _replicas(workdir, config, env, replicas) as running:
            names = {r.name for r in running}
            meant = {cpe: assigned_replica(cpe, sorted(names)) for cpe in ids}
            wait_until(
                lambda: _leased(client, ids, names, meant)[2] == len(ids),
                60 + cpes / 100,
                "every CPE leased by the replica meant for it",
                interval_s=0.5,
            )
            result.leased_after_s = round(time.monotonic() - started, 2)
            say(
                f"every CPE leased by its replica after {result.leased_after_s} s;"
                f" {checks} looks, a period apart"
            )
            result.worst_leased = len(ids)
            for _ in range(checks):
                time.sleep(period_s)  # a look a period: the pace of the leases themselves
                leased, share, _ = _leased(client, ids, names, meant)
                result.checks += 1
                result.worst_leased = min(result.worst_leased, leased)
                result.looks_all_leased += leased == len(ids)
                result.share = share
            say(f"{overrides} overrides, through each replica in turn")
            latencies = _overrides(running, proxy, ids, overrides, period_s, result)
            result.override_p50_s = _round(percentile(latencies, 0.5))
            result.override_p99_s = _round(percentile(latencies, 0.99))
            result.rss_mb = [round(rss_mb(r.process.pid), 1) for r in running]
        client.close()
    return result


def _config(workdir: Path, cpes: int, period_ms: int, proxy: str) -> Path:
    path = workdir / "xapp-config.json"
    # no simulator runs it: the scenario only names the CPEs and their nodes
    scenario = _scenario(workdir, cpes, period_ms / 1000, duration_s=60)
    args = ["e2sim", "config", "--scenario", str(scenario), "--period-ms", str(period_ms)]
    args += ["--proxy-agent", proxy, "--out", str(path)]
    done = subprocess.run(atsss(*args), capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise LiveSystemError(done.stderr.strip())
    document = json.loads(path.read_text())
    document["agents"]["token_file"] = str(workdir / "token")
    document["directions"] = ["downlink"]  # the proxy's: no CPE agents to run
    secret = workdir / "operator-secret"
    secret.write_text(OPERATOR_TOKEN + "\n")
    tokens = workdir / "tokens.json"
    tokens.write_text(
        json.dumps([{"name": "bench", "role": "operator", "token_file": str(secret)}])
    )
    document["operator_api"] = {"tokens_file": str(tokens)}
    path.write_text(json.dumps(document))
    return path


@contextlib.contextmanager
def _replicas(
    workdir: Path, config: Path, env: dict[str, str], count: int
) -> Iterator[list[_Replica]]:
    running: list[_Replica] = []
    try:
        for n in range(count):
            name = f"replica-{n}"
            e2_port, http_port = free_ports(2)
            with (workdir / f"{name}.log").open("a") as log:
                process = popen_xapp(
                    log, config, "standalone", e2_port, http_port, {**env, "HOSTNAME": name}
                )
            running.append(_Replica(name, process, f"http://127.0.0.1:{http_port}"))
        for replica in running:
            wait_until(
                lambda r=replica: answers_200(r.api + "/ric/v1/health/alive"),  # type: ignore[misc]
                120,
                f"{replica.name} to start",
            )
        yield running
    finally:
        for replica in running:
            if replica.process.poll() is None:
                replica.process.send_signal(signal.SIGTERM)
        for replica in running:
            try:
                replica.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                replica.process.kill()
                replica.process.wait()


def _leased(
    client: redis.Redis, ids: list[str], live: set[str], meant: dict[str, str]
) -> tuple[int, dict[str, int], int]:
    """How many CPEs a live replica holds an unexpired lease on now, how many each holds, and
    how many are held by the replica the assignment means them for."""
    now = time.time()
    leased, placed, share = 0, 0, dict.fromkeys(sorted(live), 0)
    for start in range(0, len(ids), 5000):
        chunk = ids[start : start + 5000]
        keys = [f"{{atsss}},lease/cpe/{cpe}" for cpe in chunk]
        for cpe, raw in zip(chunk, client.mget(keys), strict=True):
            if raw is None:
                continue
            lease = json.loads(raw)
            if lease.get("owner") in live and float(lease.get("expires_at_s", 0)) >= now:
                leased += 1
                share[lease["owner"]] += 1
                placed += lease["owner"] == meant[cpe]
    return leased, share, placed


def _overrides(
    running: list[_Replica],
    proxy: str,
    ids: list[str],
    count: int,
    period_s: float,
    result: ReplicasResult,
) -> list[float]:
    """Weights overrides on CPEs spread over the fleet, each through the next replica (as a
    Service's round robin would send them); how long each took to be held by the proxy."""
    latencies = []
    step = max(1, len(ids) // max(1, count))
    for n, cpe_id in enumerate(ids[::step][:count]):
        replica = running[n % len(running)]
        weights = {"nr": 3 + n % 5, "wifi": 11, "lifi": 2}

        def held_by_proxy(cpe_id: str = cpe_id) -> Any:
            found = httpx.get(
                f"{proxy}/v1/weights/downlink",
                params={"cpe_id": cpe_id},
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=10,
            ).json()
            return found["applied"]["weights"]

        outcome = timed_override(
            replica.api,
            cpe_id,
            "downlink",
            weights,
            "replicas bench",
            30,
            held_by_proxy,
            10 * period_s + 10,
        )
        if isinstance(outcome, float):
            latencies.append(outcome)
            continue
        if outcome.refused:
            result.notes.append(f"override on {cpe_id}: {outcome.why}")
        elif outcome.why:
            result.notes.append(f"override on {cpe_id}: {replica.name} {outcome.why}")
        result.overrides_lost += 1
    return latencies


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
