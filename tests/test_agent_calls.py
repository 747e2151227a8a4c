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


# ------------------------------------------------------------ kept connections, one I/O thread


@contextlib.contextmanager
def keep_alive_agent(
    answers_per_connection: int | None = None, chunked: bool = False
) -> Iterator[tuple[str, list[int]]]:
    """An HTTP/1.1 server answering every request with ``{"n": K}`` (K counting requests),
    keeping each connection for ``answers_per_connection`` answers (then closing it without
    saying so, as a server whose idle timeout struck would). Yields its URL and a list whose
    length is the number of connections it accepted."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []
    served = [0]

    def handle(sock: socket.socket) -> None:
        with sock, contextlib.suppress(OSError):
            sock.settimeout(10)
            stream = sock.makefile("rb")
            answered = 0
            while answers_per_connection is None or answered < answers_per_connection:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = stream.readline()
                    if not line:
                        return
                    head += line
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                stream.read(length)
                served[0] += 1
                body = b'{"n": %d}' % served[0]
                if chunked:
                    half = len(body) // 2
                    sock.sendall(
                        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                        + b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n"
                        % (half, body[:half], len(body) - half, body[half:])
                    )
                else:
                    sock.sendall(
                        b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
                    )
                answered += 1

    def serve() -> None:
        while True:
            try:
                sock, _ = server.accept()
            except OSError:
                return
            accepted.append(1)
            threading.Thread(target=handle, args=(sock,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", accepted
    finally:
        server.close()


def test_calls_to_an_agent_reuse_one_connection() -> None:
    with keep_alive_agent() as (url, accepted):
        answers = [
            request_within(
                AgentEndpoint(url, "t"), "PUT", "/v1/weights/uplink", 2.0, json={}
            ).json()
            for _ in range(50)
        ]
    assert [a["n"] for a in answers] == list(range(1, 51))
    assert len(accepted) == 1, f"{len(accepted)} connections for 50 calls in turn"


def test_a_kept_connection_the_agent_closed_is_replaced_without_a_failure() -> None:
    with keep_alive_agent(answers_per_connection=1) as (url, accepted):
        for n in range(1, 11):
            answer = request_within(AgentEndpoint(url), "GET", "/v1/health", 2.0)
            assert answer.json() == {"n": n}
    assert len(accepted) == 10


def test_a_chunked_answer_is_read_whole() -> None:
    with keep_alive_agent(chunked=True) as (url, accepted):
        for n in range(1, 4):
            assert request_within(AgentEndpoint(url), "GET", "/v1/health", 2.0).json() == {"n": n}
    assert len(accepted) == 1


def test_a_fleet_of_long_polls_holds_no_thread_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """1,000 agents' event long polls add no thread per agent: they wait on the agents' one
    event loop. (The agent here is a listening socket that never accepts: the kernel completes
    the connections and holds the requests, so every thread counted is the xApp side's.)"""
    from xapp.adapters import agent_events

    monkeypatch.setattr(agent_events, "STARTS_PER_S", 1e9)  # all at once
    before = threading.active_count()
    with socket.create_server(("127.0.0.1", 0), backlog=4096) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        agents = {f"{url}/a/{n}": AgentEndpoint(f"{url}/a/{n}") for n in range(1000)}
        watcher = agent_events.AgentEventWatcher(agents, lambda event: None)
        try:
            deadline = time.monotonic() + 10
            peak = 0
            while time.monotonic() < deadline and peak < 1000:  # until all polls are out
                peak = max(peak, len(_established_to(silent.getsockname()[1])))
                time.sleep(0.1)
            grown = threading.active_count() - before
        finally:
            watcher.stop()
    assert peak >= 900, f"only {peak} of 1,000 long polls reached the agent"
    assert grown <= 5, f"{grown} threads more with 1,000 long polls"


def _established_to(port: int) -> list[str]:
    """Connections this process holds to ``port`` on loopback, from /proc/net/tcp."""
    wanted = f":{port:04X}"
    with open("/proc/net/tcp") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return [r[1] for r in rows if r[2].endswith(wanted) and r[3] == "01"]
