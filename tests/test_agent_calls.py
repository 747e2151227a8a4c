"""Every call to an agent is bounded: the whole exchange in time (headers too), the answer in
size, against agents that misbehave at the socket level (real TCP servers on loopback)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from xapp.adapters.agent_http import (
    AgentEndpoint,
    AgentSetupError,
    AnswerTooLargeError,
    DeadlineExceededError,
    request_within,
)

Behaviour = Callable[[socket.socket], None]


@contextlib.contextmanager
def raw_agent(behaviour: Behaviour) -> Iterator[str]:
    """A TCP server that reads a request and then does ``behaviour`` with the socket."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                sock, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(sock,), daemon=True).start()

    def handle(sock: socket.socket) -> None:
        with sock:
            sock.settimeout(10)
            with contextlib.suppress(OSError):
                sock.recv(65536)
                behaviour(sock)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        server.close()


def trickle_headers(sock: socket.socket) -> None:
    for byte in b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n":
        sock.sendall(bytes([byte]))
        time.sleep(0.2)


def endless_body(sock: socket.socket) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    chunk = b"x" * 65536
    for _ in range(10_000):
        sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))


def lying_length(sock: socket.socket) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 5000000000\r\n\r\n{")
    time.sleep(5)


def never_answers(sock: socket.socket) -> None:
    time.sleep(10)


@pytest.mark.parametrize("behaviour", [trickle_headers, never_answers])
def test_the_deadline_covers_the_status_line_and_headers(behaviour: Behaviour) -> None:
    with raw_agent(behaviour) as url:
        started = time.monotonic()
        with pytest.raises(httpx.TimeoutException) as caught:
            request_within(AgentEndpoint(url), "GET", "/v1/health", 1.0)
        took = time.monotonic() - started
    assert took < 2.0, f"the call took {took:.1f} s against a 1 s deadline"
    assert isinstance(caught.value, DeadlineExceededError) or "timed out" in str(caught.value)


def test_an_endless_answer_is_cut_off_at_its_cap() -> None:
    with raw_agent(endless_body) as url, pytest.raises(AnswerTooLargeError):
        request_within(AgentEndpoint(url), "GET", "/v1/events", 5.0, max_bytes=100_000)


def test_a_declared_length_over_the_cap_fails_before_reading() -> None:
    with raw_agent(lying_length) as url:
        started = time.monotonic()
        with pytest.raises(AnswerTooLargeError):
            request_within(AgentEndpoint(url), "GET", "/v1/health", 5.0)
        assert time.monotonic() - started < 2.0


def test_a_missing_ca_file_is_refused_where_the_agent_is_configured() -> None:
    with pytest.raises(AgentSetupError, match=r"CA file /nonexistent/ca\.pem"):
        AgentEndpoint("https://agent.example:8443", "t", "/nonexistent/ca.pem")
    with pytest.raises(AgentSetupError, match="is not http"):
        AgentEndpoint("ftp://agent.example", "t")
