"""Real servers for tests: a private redis-server, and FastAPI apps under uvicorn on loopback."""

from __future__ import annotations

import contextlib
import http.server
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from bench.live_system import free_ports


def free_port() -> int:
    """A port for a server started as its own process (below the ephemeral range: see
    ``free_ports``)."""
    return free_ports(1)[0]


@contextlib.contextmanager
def redis_server() -> Iterator[int]:
    """A redis-server of our own on a free loopback port, stopped and wiped afterwards."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed; run scripts/setup.sh")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="atsss-redis-") as workdir:
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                workdir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while True:
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", port), 0.2) as s,
                ):
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        break
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.05)
            yield port
        finally:
            process.terminate()
            process.wait(timeout=10)


@contextlib.contextmanager
def uvicorn_thread(app: Any, port: int | None = None) -> Iterator[int]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a background thread; yields the port. Without
    ``port`` the socket is bound to port 0 first and the port read back from it, so a busy
    machine's other servers cannot take it between the choice and the bind."""
    sock = socket.create_server(("127.0.0.1", port or 0))
    chosen = int(sock.getsockname()[1])
    config = uvicorn.Config(app, host="127.0.0.1", port=chosen, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield chosen
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextlib.contextmanager
def misbehaving_server(kind: str) -> Iterator[int]:
    """A loopback TCP server that misbehaves, on the port it yields. ``silent``: accepts and
    never answers (a hung agent, a DBAAS address that is not Redis); ``trickle``: answers an
    HTTP 200 whose body comes a byte every 0.3 s; ``not-found``: answers 404 to every request
    (an agent of an older release, without the endpoint asked)."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        held = []
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            held.append(connection)
            if kind == "not-found":
                with contextlib.suppress(OSError):
                    connection.recv(65536)
                    connection.sendall(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 22\r\nConnection: close\r\n"
                        b'\r\n{"detail":"Not Found"}'
                    )
                connection.close()
                continue
            if kind == "trickle":
                connection.recv(65536)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
                while not stop.is_set():
                    with contextlib.suppress(OSError):
                        connection.sendall(b" ")
                    stop.wait(0.3)
        for connection in held:
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        server.close()


def answer_json(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    """A stand-in agent's answer from a stdlib handler: ``body`` (JSON) with its length."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
