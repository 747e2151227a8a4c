"""`atsss bench api`: how long the xApp's HTTP API takes to answer, on a kept-alive connection
and on a new one each time (what the dashboard, `atsss ctl` and a metrics scraper pay)."""

from __future__ import annotations

import http.client
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.live_system import LiveSystemError, atsss, free_ports, popen_xapp, wait_until


@dataclass(frozen=True)
class ApiLatency:
    path: str
    keep_alive_p50_ms: float
    keep_alive_p99_ms: float
    new_connection_p50_ms: float
    new_connection_p99_ms: float

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(host: str, port: int, path: str, requests: int) -> tuple[list[float], list[float]]:
    """Milliseconds per request, kept-alive and on new connections. The standard library's
    client: what is timed is the server, not a client's own set-up (httpx builds an SSL
    context per client)."""
    kept, fresh = [], []
    connection = http.client.HTTPConnection(host, port, timeout=10)
    try:
        _ask(connection, path)  # the connection is open before the first timed request
        for _ in range(requests):
            started = time.perf_counter()
            _ask(connection, path)
            kept.append((time.perf_counter() - started) * 1000)
    finally:
        connection.close()
    for _ in range(requests):
        started = time.perf_counter()
        connection = http.client.HTTPConnection(host, port, timeout=10)
        try:
            _ask(connection, path)
        finally:
            connection.close()
        fresh.append((time.perf_counter() - started) * 1000)
    return kept, fresh


def _ask(connection: http.client.HTTPConnection, path: str) -> None:
    connection.request("GET", path)
    answer = connection.getresponse()
    answer.read()
    if answer.status != 200:
        raise LiveSystemError(f"GET {path}: {answer.status}")


def run_api_bench(
    requests: int = 200, paths: tuple[str, ...] = ("/ric/v1/health/alive",)
) -> list[ApiLatency]:
    """``atsss xapp serve`` (standalone, no Redis) for the paper-static scenario's CPE."""
    with tempfile.TemporaryDirectory(prefix="atsss-api-bench-") as folder:
        workdir = Path(folder)
        config = workdir / "config.json"
        done = subprocess.run(
            atsss("e2sim", "config", "--scenario", "paper-static", "--out", str(config)),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise LiveSystemError(done.stderr.strip())
        e2_port, http_port = free_ports(2)
        with (workdir / "xapp.log").open("a") as log:
            xapp = popen_xapp(log, config, "standalone", e2_port, http_port, None)
        base = f"http://127.0.0.1:{http_port}"
        try:
            wait_until(lambda: _alive(base), 60, "the xApp")
            results = []
            for path in paths:
                kept, fresh = measure("127.0.0.1", http_port, path, requests)
                results.append(
                    ApiLatency(
                        path,
                        round(statistics.median(kept), 2),
                        round(_percentile(kept, 0.99), 2),
                        round(statistics.median(fresh), 2),
                        round(_percentile(fresh, 0.99), 2),
                    )
                )
            return results
        finally:
            xapp.terminate()
            try:
                xapp.wait(timeout=30)
            except subprocess.TimeoutExpired:
                xapp.kill()
                xapp.wait()


def _alive(base: str) -> bool:
    try:
        return httpx.get(base + "/ric/v1/health/alive", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
