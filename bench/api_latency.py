"""`atsss bench api`: how long the xApp's HTTP API takes to answer, on a kept-alive connection
and on a new one each time (what the dashboard, `atsss ctl` and a metrics scraper pay); how
it meets bodies it must not read (five parallel 100 MB bodies without a token); and how long a
page of a long audit log takes (entries written straight into the log's Redis stream)."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis

from bench.live_system import (
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
from xapp.adapters.audit_log import RedisAuditLog


@dataclass(frozen=True)
class ApiLatency:
    path: str
    keep_alive_p50_ms: float
    keep_alive_p99_ms: float
    new_connection_p50_ms: float
    new_connection_p99_ms: float

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


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


@dataclass
class ApiBenchResult:
    latencies: list[ApiLatency]
    unauthenticated_bodies: int = 0
    unauthenticated_401_ms_max: float = 0.0
    unauthenticated_rss_growth_mb: float = 0.0
    audit_entries: int = 0
    audit_page_p50_ms: float = 0.0
    audit_page_p99_ms: float = 0.0
    audit_keys_calls: int = 0  # KEYS or SCAN run by Redis while the pages were read
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


TOKEN = "bench-operator-token-0123456789"
BODY_BYTES = 100 << 20


def run_api_bench(
    requests: int = 200,
    paths: tuple[str, ...] = ("/ric/v1/health/alive",),
    audit_entries: int = 300_000,
) -> ApiBenchResult:
    """``atsss xapp serve`` (standalone, on a Redis of its own) for the paper-static scenario's
    CPE, with an operator token."""
    with (
        tempfile.TemporaryDirectory(prefix="atsss-api-bench-") as folder,
        persistent_redis(Path(folder) / "redis") as redis_server,
    ):
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
        document = json.loads(config.read_text())
        secret = workdir / "operator-secret"
        secret.write_text(TOKEN + "\n")
        tokens = workdir / "tokens.json"
        tokens.write_text(
            json.dumps([{"name": "bench", "role": "operator", "token_file": str(secret)}])
        )
        document["operator_api"] = {"tokens_file": str(tokens), "audit_max_entries": 1_000_000}
        config.write_text(json.dumps(document))
        namespace = document.get("sdl_namespace", "atsss")
        e2_port, http_port = free_ports(2)
        env = {"DBAAS_SERVICE_HOST": "127.0.0.1", "DBAAS_SERVICE_PORT": str(redis_server.port)}
        with (workdir / "xapp.log").open("a") as log:
            xapp = popen_xapp(log, config, "standalone", e2_port, http_port, env)
        base = f"http://127.0.0.1:{http_port}"
        try:
            wait_until(lambda: answers_200(base + "/ric/v1/health/alive"), 60, "the xApp")
            result = ApiBenchResult([])
            results = result.latencies
            for path in paths:
                kept, fresh = measure("127.0.0.1", http_port, path, requests)
                results.append(
                    ApiLatency(
                        path,
                        round(statistics.median(kept), 2),
                        round(percentile(kept, 0.99) or 0.0, 2),
                        round(statistics.median(fresh), 2),
                        round(percentile(fresh, 0.99) or 0.0, 2),
                    )
                )
            _unauthenticated(result, http_port, xapp.pid)
            if audit_entries:
                _audit_pages(result, base, namespace, redis_server.port, audit_entries, requests)
            return result
        finally:
            xapp.terminate()
            try:
                xapp.wait(timeout=30)
            except subprocess.TimeoutExpired:
                xapp.kill()
                xapp.wait()


def _unauthenticated(result: ApiBenchResult, port: int, pid: int) -> None:
    """Five parallel POSTs declaring 100 MB bodies, no token: how soon each 401 comes (from the
    end of its headers) and what the xApp's memory does."""
    before = rss_mb(pid)
    answers: list[float] = []

    def post() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            head = (
                "POST /v1/cpes/import HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {BODY_BYTES}\r\n\r\n"
            ).encode()
            sock.sendall(head)
            started = time.perf_counter()
            chunk = b" " * (1 << 20)
            sock.setblocking(False)
            status = b""
            sent = 0
            while b"\r\n" not in status:
                with contextlib.suppress(BlockingIOError, InterruptedError):
                    status += sock.recv(4096)
                    continue
                if sent < BODY_BYTES:
                    with contextlib.suppress(BlockingIOError, BrokenPipeError, ConnectionError):
                        sent += sock.send(chunk)
                if time.perf_counter() - started > 30:
                    return
            if status.startswith(b"HTTP/1.1 401"):
                answers.append((time.perf_counter() - started) * 1000)

    threads = [threading.Thread(target=post) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.unauthenticated_bodies = len(answers)
    result.unauthenticated_401_ms_max = round(max(answers), 2) if answers else 0.0
    result.unauthenticated_rss_growth_mb = round(rss_mb(pid) - before, 1)
    if len(answers) < 5:
        result.notes.append(f"only {len(answers)} of 5 unauthenticated bodies got a 401")


def _audit_pages(
    result: ApiBenchResult, base: str, namespace: str, port: int, entries: int, requests: int
) -> None:
    log = RedisAuditLog(namespace, 1_000_000, 365 * 86400, port=port)
    try:
        for first in range(0, entries, 10_000):
            log.append_many(
                [
                    {
                        "at_s": float(n),
                        "who": "bench",
                        "action": "override set",
                        "what": "override",
                        "cpe_id": f"cpe-{n % 1000}",
                        "why": "bench",
                        "before": None,
                        "after": None,
                    }
                    for n in range(first, min(entries, first + 10_000))
                ]
            )
        result.audit_entries = log.size()
    finally:
        log.close()
    database = redis.Redis(port=port)
    database.config_resetstat()  # from here on: what the reads cost Redis
    headers = {"Authorization": f"Bearer {TOKEN}"}
    timings = []
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        for _ in range(max(10, requests // 10)):
            started = time.perf_counter()
            page = client.get("/v1/audit", params={"limit": 100})
            timings.append((time.perf_counter() - started) * 1000)
            if page.status_code != 200 or len(page.json()) != 100:
                result.notes.append(f"GET /v1/audit: {page.status_code} {page.text[:200]}")
                return
    stats = database.info("commandstats")
    result.audit_keys_calls = sum(
        int(stats.get(name, {}).get("calls", 0)) for name in ("cmdstat_keys", "cmdstat_scan")
    )
    database.close()
    result.audit_page_p50_ms = round(statistics.median(timings), 2)
    result.audit_page_p99_ms = round(percentile(timings, 0.99) or 0.0, 2)
