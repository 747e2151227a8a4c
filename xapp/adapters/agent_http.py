"""How the xApp reaches an agent's REST API: base URL, bearer token, TLS trust, and one bounded
exchange for every call (push, settle, lever, health, events, probes).

Agents run on customer premises; some are down, slow or broken, a few hostile. So every call
is bounded:

- in **time**, the whole exchange: connect, TLS, request, status line, headers and body, under
  one deadline (an agent sending its answer a byte at a time, headers included, is cut off when
  the deadline passes);
- in **size**: an answer longer than its cap is cut off and fails, whatever Content-Length says;
- one call at a time per use: callers decide their own rate (backoff per agent, ``AgentBook``).

A fleet has thousands of agents, each called every period and each holding a long poll open for
its events. So every call runs on one event loop in one thread (``AgentIO``), as a small
HTTP/1.1 exchange over asyncio streams, and connections are kept and reused per agent host: a
thread per call or per long poll, and a new connection each time, cost a fleet more than a core
(1,000 threads and about 2.5 ms of CPU a call through a fresh httpx client). Threads that need
an answer wait for it with ``request_within``; the events watcher runs on the loop itself.
"""

from __future__ import annotations

import asyncio
import functools
import json as jsonlib
import os
import ssl
import threading
import time
import urllib.parse
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import certifi
import httpx

# An agent's answers are small (a weight set, its health, a page of events): 256 KiB is far
# more than any honest one, and caps what a hostile one can make the xApp hold per call.
MAX_ANSWER_BYTES = 256 * 1024
MAX_HEADER_BYTES = 16 * 1024  # status line and headers together
# A kept connection is reused only while the agent would still keep it: uvicorn closes an idle
# one after 5 s, and a request written into a closing connection is lost.
KEEP_IDLE_S = 4.0
KEEP_PER_HOST = 256  # idle connections kept per agent host (a proxy serves many CPEs at once)

T = TypeVar("T")


class AgentSetupError(ValueError):
    """An agent cannot be set up as configured (its CA file, its URL); one line says why."""


@dataclass(frozen=True)
class AgentEndpoint:
    base_url: str
    token: str | None = None
    verify: bool | str = True  # a CA bundle path for an agent with its own certificate

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise AgentSetupError(f"agent URL {self.base_url!r} is not http(s)")
        if isinstance(self.verify, str):
            _ = self.ssl_context  # a missing or unreadable CA file fails here, with its name

    @property
    def ssl_context(self) -> ssl.SSLContext:
        try:
            return _ssl_context(self.verify)
        except AgentSetupError as error:
            raise AgentSetupError(f"agent {self.base_url}: {error}") from None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


@functools.lru_cache(maxsize=64)
def _ssl_context(verify: bool | str) -> ssl.SSLContext:
    """One context per kind of trust, shared by every agent: a context with the system's CA
    bundle holds about a megabyte, and a fleet has thousands of agents."""
    if isinstance(verify, str):
        try:
            return ssl.create_default_context(cafile=verify)
        except (OSError, ssl.SSLError) as error:
            raise AgentSetupError(
                f"CA file {verify}: {getattr(error, 'strerror', None) or error}"
            ) from None
    if verify:
        return ssl.create_default_context(cafile=certifi.where())
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class DeadlineExceededError(httpx.TimeoutException):
    """The whole exchange took longer than its deadline (an agent trickling its answer)."""


class AnswerTooLargeError(httpx.RequestError):
    """The agent's answer is longer than the cap for that call."""


def request_within(
    agent: AgentEndpoint,
    method: str,
    path: str,
    deadline_s: float,
    max_bytes: int = MAX_ANSWER_BYTES,
    *,
    params: Mapping[str, Any] | None = None,
    json: Any = None,
) -> httpx.Response:
    """One request whose whole exchange ends within ``deadline_s``, its answer capped at
    ``max_bytes``, waited for by the calling thread. The response returned has its body read;
    a failure is raised as the httpx error it is (connect, timeout, protocol, too large)."""
    return agent_io().wait(exchange(agent, method, path, deadline_s, max_bytes, params, json))


async def exchange(
    agent: AgentEndpoint,
    method: str,
    path: str,
    deadline_s: float,
    max_bytes: int = MAX_ANSWER_BYTES,
    params: Mapping[str, Any] | None = None,
    json: Any = None,
) -> httpx.Response:
    """``request_within`` for code running on the agents' event loop."""
    target = _target_of(agent.base_url)
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    request_path = target.path + path + query
    request = None  # httpx.Request costs ~20 µs a call and is read by nothing here
    body = b"" if json is None else jsonlib.dumps(json).encode()
    head = [f"{method} {request_path} HTTP/1.1", f"Host: {target.host_header}"]
    head += [f"{name}: {value}" for name, value in agent.headers().items()]
    head.append("Accept: application/json")
    if json is not None or method in ("PUT", "POST"):
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    wire = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
    io = agent_io()
    try:
        async with asyncio.timeout(deadline_s):
            return await io.send(target, agent, wire, request, max_bytes)
    except TimeoutError:
        raise DeadlineExceededError(
            f"the call's deadline passed ({deadline_s:g} s)", request=request
        ) from None


def response_detail(response: httpx.Response) -> str:
    """The agent's ``detail`` message, or the start of the body when it sent none."""
    try:
        return str(response.json().get("detail", response.text))[:300]
    except (ValueError, AttributeError):
        return response.text[:300]


def refusal(agent: AgentEndpoint, response: httpx.Response) -> str:
    """One line naming the agent, its status code and its reason."""
    return f"agent at {agent.base_url} answered {response.status_code}: {response_detail(response)}"


# ------------------------------------------------------------------------- the exchange itself


@dataclass(frozen=True)
class _Target:
    """Where an agent's base URL points: the connection's key and the path prefix."""

    scheme: str
    host: str
    port: int
    path: str  # the base URL's own path, without a trailing slash ("/a/cpe-0001" or "")

    @property
    def origin(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


@functools.lru_cache(maxsize=65536)
def _target_of(base_url: str) -> _Target:
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AgentSetupError(f"agent URL {base_url!r} is not http(s)")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return _Target(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0

    def close(self) -> None:
        self.writer.close()

    def usable(self) -> bool:
        return (
            not self.reader.at_eof()
            and not self.writer.is_closing()
            and time.monotonic() - self.idle_since < KEEP_IDLE_S
        )


class _NothingReadError(Exception):
    """A kept connection failed before any byte of the answer: the agent closed it meanwhile,
    so the request is sent again on a fresh one."""


class AgentIO:
    """One event loop, in its own thread, for every call to every agent; kept connections per
    agent host (touched only by the loop's thread)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._thread = threading.Thread(target=self._run, name="agent-io", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def wait(self, call: Coroutine[Any, Any, T]) -> T:
        """Run ``call`` on the loop and wait for its outcome (from any other thread)."""
        if threading.current_thread() is self._thread:
            call.close()
            raise RuntimeError("request_within called on the agents' own event loop")
        return asyncio.run_coroutine_threadsafe(call, self.loop).result()

    def submit(self, call: Coroutine[Any, Any, Any]) -> Any:
        """Start ``call`` on the loop; its concurrent future."""
        return asyncio.run_coroutine_threadsafe(call, self.loop)

    async def send(
        self,
        target: _Target,
        agent: AgentEndpoint,
        wire: bytes,
        request: httpx.Request | None,
        max_bytes: int,
    ) -> httpx.Response:
        connection = self._take(target)
        if connection is not None:
            try:
                return await self._over(connection, target, wire, request, max_bytes, kept=True)
            except _NothingReadError:
                pass  # the agent closed the kept connection: once more, on a fresh one
        connection = await self._connect(target, agent, request)
        try:
            return await self._over(connection, target, wire, request, max_bytes, kept=False)
        except _NothingReadError as error:
            raise httpx.RemoteProtocolError(
                "the agent closed the connection without answering", request=request
            ) from error

    def _take(self, target: _Target) -> _Connection | None:
        idle = self._idle.get(target.key)
        while idle:
            connection = idle.pop()
            if connection.usable():
                return connection
            connection.close()
        return None

    def _keep(self, target: _Target, connection: _Connection) -> None:
        idle = self._idle.setdefault(target.key, [])
        if len(idle) >= KEEP_PER_HOST:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)

    async def _connect(
        self, target: _Target, agent: AgentEndpoint, request: httpx.Request | None
    ) -> _Connection:
        tls = agent.ssl_context if target.scheme == "https" else None
        try:
            reader, writer = await asyncio.open_connection(
                target.host,
                target.port,
                ssl=tls,
                server_hostname=target.host if tls else None,
                limit=MAX_HEADER_BYTES,
            )
        except (OSError, ssl.SSLError) as error:
            raise httpx.ConnectError(_connect_problem(error), request=request) from None
        return _Connection(reader, writer)

    async def _over(
        self,
        connection: _Connection,
        target: _Target,
        wire: bytes,
        request: httpx.Request | None,
        max_bytes: int,
        kept: bool,
    ) -> httpx.Response:
        """The exchange over one connection; the connection is kept again only when the
        answer was read whole and the agent did not ask to close it."""
        done = False
        try:
            try:
                connection.writer.write(wire)
                await connection.writer.drain()
                status_line = await connection.reader.readuntil(b"\r\n")
            except (OSError, asyncio.IncompleteReadError) as error:
                partial = getattr(error, "partial", b"")
                if kept and not partial:
                    raise _NothingReadError from error
                if isinstance(error, asyncio.IncompleteReadError):
                    raise httpx.RemoteProtocolError(
                        "the agent closed the connection mid-answer", request=request
                    ) from None
                raise httpx.ReadError(str(error), request=request) from None
            response, reusable = await _answer(connection.reader, status_line, request, max_bytes)
            done = reusable
            return response
        except asyncio.LimitOverrunError:
            raise AnswerTooLargeError(
                f"headers longer than the {MAX_HEADER_BYTES} bytes allowed", request=request
            ) from None
        except asyncio.IncompleteReadError:
            raise httpx.RemoteProtocolError(
                "the agent closed the connection mid-answer", request=request
            ) from None
        except ValueError as error:  # a line over the reader's limit
            raise AnswerTooLargeError(str(error), request=request) from None
        except OSError as error:
            raise httpx.ReadError(str(error), request=request) from None
        finally:
            if done:
                self._keep(target, connection)
            else:
                connection.close()


def _connect_problem(error: Exception) -> str:
    """The usual words for a failed connect ("[Errno 111] Connection refused"), where asyncio
    says "Connect call failed (...)"."""
    number = getattr(error, "errno", None)
    if isinstance(number, int) and not isinstance(error, ssl.SSLError):
        return f"[Errno {number}] {os.strerror(number)}"
    return str(error) or type(error).__name__


async def _answer(
    reader: asyncio.StreamReader, status_line: bytes, request: httpx.Request | None, max_bytes: int
) -> tuple[httpx.Response, bool]:
    """Read the answer after its status line: the response, and whether the connection may
    carry another request."""
    version, _, rest = status_line.decode("latin-1").strip().partition(" ")
    code = rest.partition(" ")[0]
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise httpx.RemoteProtocolError(
            f"not an HTTP answer: {status_line[:60]!r}", request=request
        )
    headers: list[tuple[str, str]] = []
    header_bytes = len(status_line)
    while True:
        line = await reader.readuntil(b"\r\n")
        header_bytes += len(line)
        if header_bytes > MAX_HEADER_BYTES:
            raise AnswerTooLargeError(
                f"headers longer than the {MAX_HEADER_BYTES} bytes allowed", request=request
            )
        if line == b"\r\n":
            break
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon:
            raise httpx.RemoteProtocolError(
                f"a header without a colon: {line[:60]!r}", request=request
            )
        headers.append((name.strip().lower(), value.strip()))
    fields = dict(headers)
    status = int(code)
    reusable = version == "HTTP/1.1" and fields.get("connection", "").lower() != "close"
    if status in (204, 304) or 100 <= status < 200:
        body = b""
    elif "chunked" in fields.get("transfer-encoding", "").lower():
        body = await _chunked(reader, request, max_bytes)
    elif (declared := fields.get("content-length")) is not None:
        if not declared.isdigit():
            raise httpx.RemoteProtocolError(f"Content-Length {declared[:30]!r}", request=request)
        if int(declared) > max_bytes:
            raise AnswerTooLargeError(
                f"answer of {int(declared)} bytes, more than the {max_bytes} allowed",
                request=request,
            )
        body = await reader.readexactly(int(declared))
    else:  # the answer ends where the connection does
        body = await _until_closed(reader, request, max_bytes)
        reusable = False
    return httpx.Response(status, headers=headers, content=body, request=request), reusable


async def _chunked(
    reader: asyncio.StreamReader, request: httpx.Request | None, max_bytes: int
) -> bytes:
    body = bytearray()
    while True:
        size_line = (await reader.readuntil(b"\r\n")).split(b";")[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            raise httpx.RemoteProtocolError(
                f"a chunk size that does not read: {size_line[:20]!r}", request=request
            ) from None
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, if any
                pass
            return bytes(body)
        if len(body) + size > max_bytes:
            raise AnswerTooLargeError(
                f"answer longer than the {max_bytes} bytes allowed", request=request
            )
        body += (await reader.readexactly(size + 2))[:-2]


async def _until_closed(
    reader: asyncio.StreamReader, request: httpx.Request | None, max_bytes: int
) -> bytes:
    body = bytearray()
    while chunk := await reader.read(65536):
        body += chunk
        if len(body) > max_bytes:
            raise AnswerTooLargeError(
                f"answer longer than the {max_bytes} bytes allowed", request=request
            )
    return bytes(body)


_io: AgentIO | None = None
_io_lock = threading.Lock()


def agent_io() -> AgentIO:
    """The process's one loop for agent calls, started at its first use."""
    global _io
    if _io is None:
        with _io_lock:
            if _io is None:
                _io = AgentIO()
    return _io
