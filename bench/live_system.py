"""The live system as real processes on loopback: dry-run agents (their REST API under uvicorn),
the xApp (`atsss xapp serve`) and the KPM simulator (`atsss e2sim run`). The live demo and the
service's tests start it the same way; nothing here needs root or a network."""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

TOKEN = "live-token"
ACCESSES = {"nr": "10.1.0.", "wifi": "10.2.0.", "lifi": "10.3.0."}


class LiveSystemError(RuntimeError):
    """A process of the live system did not start or answer; the message says which."""


def free_port() -> int:
    return free_ports(1)[0]


# Where the kernel takes the local ports of outgoing connections from (Linux's default below).
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports for servers that must be told their port before they
    start (child processes: redis-server, the xApp and its RMR listener, the agents). They
    are chosen below the kernel's ephemeral range: a port from bind(0) lies inside it, where
    any outgoing connection on the machine may take it before the server binds it (a RIC
    test's xApp found its RMR port taken so, once, seconds after it was chosen). Held
    together while chosen, so none comes twice."""
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    lowest = max(1024, low - 16384)
    rng = random.SystemRandom()
    with contextlib.ExitStack() as stack:
        chosen: list[int] = []
        tries = 0
        while len(chosen) < count and low - lowest >= 1024 and tries < 500:
            tries += 1
            port = rng.randrange(lowest, low)
            sock = stack.enter_context(socket.socket())
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (or just chosen)
            chosen.append(port)
        while len(chosen) < count:  # no room below the range: bind(0)'s, as a last resort
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            chosen.append(int(sock.getsockname()[1]))
        return chosen


def atsss(*args: str) -> list[str]:
    return [sys.executable, "-m", "atsss", *args]


@dataclass
class Agent:
    url: str
    process: subprocess.Popen[str]
    state_file: Path

    def weights(self, direction: str, cpe_id: str) -> dict[str, Any] | None:
        """What the agent holds for the CPE (weights, sequence), None before the first push."""
        response = httpx.get(
            f"{self.url}/v1/weights/{direction}",
            params={"cpe_id": cpe_id},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=5,
        )
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return dict(response.json())


def write_agent_config(
    workdir: Path, name: str, role: str, cpe_ids: list[str], **extra: Any
) -> tuple[Path, int]:
    """``extra``: further settings of the agent's configuration."""
    port = free_port()
    token = workdir / "token"
    token.write_text(TOKEN + "\n")
    config: dict[str, Any] = {
        "role": role,
        # A CPE agent takes only weights for its own addresses: on one host, loopback's.
        "accesses": {
            access: {
                "interface": f"{access}0",
                "address": "127.0.0.1" if role == "cpe" else prefix + "254",
            }
            for access, prefix in ACCESSES.items()
        },
        "listen": f"127.0.0.1:{port}",
        "token_file": str(token),
        "state_file": str(workdir / f"{name}-state.json"),
        "backend": "dry-run",
    }
    if role == "proxy":
        config["cpes"] = {
            cpe_id: {access: prefix + str(n) for access, prefix in ACCESSES.items()}
            for n, cpe_id in enumerate(cpe_ids, 1)
        }
        config["max_rules"] = max(64, len(ACCESSES) * len(cpe_ids))  # a rule per CPE and access
    else:
        config["cpe_id"] = cpe_ids[0]
    config.update(extra)
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, port


@contextlib.contextmanager
def agent_process(
    workdir: Path, name: str, role: str, cpe_ids: list[str], **extra: Any
) -> Iterator[Agent]:
    config, port = write_agent_config(workdir, name, role, cpe_ids, **extra)
    log = (workdir / f"{name}.log").open("w")
    process = subprocess.Popen(
        atsss("agent", "run", "--config", str(config)),
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    # A fault may restart the agent: what is stopped at the end is its process then.
    agent = Agent(url, process, workdir / f"{name}-state.json")
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200:
                    break
            if process.poll() is not None:
                raise LiveSystemError(
                    f"agent {name} ended: {(workdir / f'{name}.log').read_text()}"
                )
            if time.monotonic() > deadline:
                raise LiveSystemError(f"agent {name} did not start")
            time.sleep(0.1)
        yield agent
    finally:
        agent.process.terminate()
        agent.process.wait(timeout=30)
        log.close()


@dataclass
class Xapp:
    process: subprocess.Popen[str]
    log_path: Path
    e2_port: int
    http_url: str

    def log(self) -> str:
        return self.log_path.read_text()

    def ready(self) -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{self.http_url}/ric/v1/health/ready", timeout=2).status_code == 200
        return False

    def terminate_within(self, seconds: float) -> tuple[int, float]:
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=seconds + 30)
        return code, time.monotonic() - started


def start_xapp(
    workdir: Path,
    config: Path,
    env: dict[str, str] | None = None,
    e2_port: int | None = None,
    name: str = "xapp",
    mode: str = "standalone",
    http_port: int | None = None,
) -> Xapp:
    spare = free_ports(2)
    e2_port = e2_port or next(p for p in spare if p != http_port)
    http_port = http_port or next(p for p in spare if p != e2_port)
    log_path = workdir / f"{name}.log"
    with log_path.open("a") as log:  # the child keeps its own descriptor
        process = popen_xapp(log, config, mode, e2_port, http_port, env)
    xapp = Xapp(process, log_path, e2_port, f"http://127.0.0.1:{http_port}")
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{xapp.http_url}/ric/v1/health/alive", timeout=1).status_code == 200:
                break
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise LiveSystemError("the xApp did not start:\n" + xapp.log())
        time.sleep(0.1)
    return xapp


def popen_xapp(
    log: Any,
    config: Path,
    mode: str,
    e2_port: int,
    http_port: int,
    env: dict[str, str] | None,
    command: Sequence[str] | None = None,
) -> subprocess.Popen[str]:
    """``command``: the ``atsss`` to run (default: this Python's)."""
    base = list(command) if command is not None else atsss()
    serve = ["xapp", "serve", "--config", str(config), "--e2", mode]
    serve += ["--listen", f"127.0.0.1:{e2_port}", "--http", f"127.0.0.1:{http_port}"]
    return subprocess.Popen(
        [*base, *serve],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )


def start_simulator(
    workdir: Path,
    scenario: str,
    e2_port: int,
    duration_s: float,
    config: Path | None = None,
    truth: Path | None = None,
    extra: Sequence[str] = (),
) -> subprocess.Popen[str]:
    """``extra``: further options of `atsss e2sim run`."""
    args = [
        "e2sim",
        "run",
        "--scenario",
        scenario,
        "--connect",
        f"127.0.0.1:{e2_port}",
        "--duration",
        str(duration_s),
        "--json",
    ]
    if config is not None:
        args += ["--config", str(config)]
    if truth is not None:
        args += ["--truth", str(truth)]
    args += list(extra)
    with (workdir / "e2sim.log").open("a") as log:
        return subprocess.Popen(atsss(*args), stdout=subprocess.DEVNULL, stderr=log, text=True)


def write_xapp_config(
    workdir: Path,
    scenario: str,
    agents: dict[str, str],
    proxy: str | None,
    period_ms: int | None = None,
    **extra: Any,
) -> Path:
    """``period_ms``: every node's reporting period (default: the simulator's, 1 s)."""
    path = workdir / "xapp-config.json"
    args = ["e2sim", "config", "--scenario", scenario, "--out", str(path)]
    if period_ms is not None:
        args += ["--period-ms", str(period_ms)]
    for cpe_id, url in agents.items():
        args += ["--agent", f"{cpe_id}={url}"]
    if proxy:
        args += ["--proxy-agent", proxy]
    done = subprocess.run(atsss(*args), capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise LiveSystemError(done.stderr.strip())
    document = json.loads(path.read_text())
    document.setdefault("agents", {})["token_file"] = str(workdir / "token")
    document["agents"]["wait_s"] = 10
    document.update(extra)
    path.write_text(json.dumps(document, indent=2))
    return path


def wait_until(
    predicate: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.2
) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise LiveSystemError(f"timed out waiting for {what}")
        time.sleep(interval_s)


@dataclass
class PersistentRedis:
    """A redis-server that keeps every acknowledged write (append-only file, fsync always), as
    a RIC's database does; ``kill`` ends it at once, ``start`` brings it up on the same data."""

    port: int
    folder: Path
    processes: list[subprocess.Popen[bytes]]

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--dir", str(self.folder), "--appendonly", "yes", "--appendfsync", "always"]
        self.processes.append(subprocess.Popen([*argv, "--save", ""], stdout=subprocess.DEVNULL))
        wait_until(lambda: _pong(self.port), 10, "redis-server")

    def kill(self) -> None:
        self.processes[-1].kill()
        self.processes[-1].wait(timeout=10)

    def restart(self) -> None:
        self.processes[-1].terminate()
        self.processes[-1].wait(timeout=10)
        self.start()


@contextlib.contextmanager
def persistent_redis(folder: Path) -> Iterator[PersistentRedis]:
    folder.mkdir(exist_ok=True)
    redis = PersistentRedis(free_port(), folder, [])
    redis.start()
    try:
        yield redis
    finally:
        if redis.processes[-1].poll() is None:
            redis.processes[-1].terminate()
            redis.processes[-1].wait(timeout=10)


def _pong(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5) as s:
        s.sendall(b"PING\r\n")
        return bool(s.recv(16).startswith(b"+PONG"))
    return False


FIRST_PUSH = re.compile(r"first weights for (\S+) ([0-9.]+) s after")


def rss_mb(pid: int) -> float:
    """A process's resident memory (MB), 0 once it is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def answers_200(url: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url, timeout=2).status_code == 200
    return False


def percentile(values: list[float], share: float) -> float | None:
    """The value below which ``share`` of ``values`` lie (nearest rank); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


@dataclass
class WeightHistory:
    """What each agent held, as seen by polling: (unix time, weights) per CPE and direction."""

    seen: dict[tuple[str, str], list[tuple[float, dict[str, int], int]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def record(self, cpe_id: str, direction: str, held: dict[str, object] | None) -> None:
        if held is None:
            return
        applied = held["applied"]
        assert isinstance(applied, dict)
        sequence = int(applied["sequence"])
        history = self.seen[(cpe_id, direction)]
        if not history or history[-1][2] != sequence:
            history.append((float(applied["applied_at_s"]), dict(applied["weights"]), sequence))

    def at(self, cpe_id: str, direction: str, unix_s: float) -> dict[str, int] | None:
        history = self.seen.get((cpe_id, direction), [])
        index = bisect.bisect_right([t for t, _, _ in history], unix_s) - 1
        return history[index][1] if index >= 0 else None


def poll_agents(
    agents: dict[str, Agent],
    cpe_id: str,
    history: WeightHistory,
    stop: threading.Event,
    interval_s: float = 0.25,
) -> None:
    """Until ``stop``: what each agent (direction → agent) holds for the CPE, into
    ``history``; each set is placed at the time its agent says it applied it."""
    while not stop.wait(interval_s):
        for direction, agent in agents.items():
            with contextlib.suppress(Exception):
                history.record(cpe_id, direction, agent.weights(direction, cpe_id))
