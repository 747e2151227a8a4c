"""How the xApp reaches an agent's REST API: base URL, bearer token, TLS trust, and one bounded
exchange for every call (push, settle, lever, health, events, probes).

Agents run on customer premises; some are down, slow or broken, a few hostile. So every call
is bounded:

- in **time**, the whole exchange: connect, TLS, request, status line, headers and body. httpx's
  timeouts bound each read, so an agent sending its answer a byte at a time, headers included,
  could hold a caller for ever; here every socket operation waits at most until the call's
  deadline (a network backend for httpcore that clamps each timeout to the time left);
- in **size**: an answer longer than its cap is cut off and fails, whatever Content-Length says;
- one call at a time per use: callers decide their own rate (backoff per agent, ``AgentBook``).
"""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import certifi
import httpcore
import httpx

# An agent's answers are small (a weight set, its health, a page of events): 256 KiB is far
# more than any honest one, and caps what a hostile one can make the xApp hold per call.
MAX_ANSWER_BYTES = 256 * 1024


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


class AnswerTooLargeError(httpx.HTTPError):
    """The agent's answer is longer than the cap for that call."""


def request_within(
    agent: AgentEndpoint,
    method: str,
    path: str,
    deadline_s: float,
    max_bytes: int = MAX_ANSWER_BYTES,
    **kwargs: Any,
) -> httpx.Response:
    """One request whose whole exchange ends within ``deadline_s``, its answer capped at
    ``max_bytes``. The response returned has its body read."""
    deadline = time.monotonic() + deadline_s
    transport = _DeadlineTransport(deadline, agent.ssl_context)
    with (
        httpx.Client(
            base_url=agent.base_url,
            headers=agent.headers(),
            transport=transport,
            timeout=deadline_s,
        ) as client,
        client.stream(method, path, **kwargs) as response,
    ):
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise AnswerTooLargeError(
                f"answer of {int(declared)} bytes, more than the {max_bytes} allowed"
            )
        body = bytearray()
        for chunk in response.iter_raw():
            body += chunk
            if len(body) > max_bytes:
                raise AnswerTooLargeError(f"answer longer than the {max_bytes} bytes allowed")
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            content=bytes(body),
            request=response.request,
        )


def response_detail(response: httpx.Response) -> str:
    """The agent's ``detail`` message, or the start of the body when it sent none."""
    try:
        return str(response.json().get("detail", response.text))[:300]
    except (ValueError, AttributeError):
        return response.text[:300]


def refusal(agent: AgentEndpoint, response: httpx.Response) -> str:
    """One line naming the agent, its status code and its reason."""
    return f"agent at {agent.base_url} answered {response.status_code}: {response_detail(response)}"


# ------------------------------------------------------------------ the deadline, per socket call


class _DeadlineStream(httpcore.NetworkStream):
    """A socket whose every read and write waits at most until the deadline."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline

    def _left(self, timeout: float | None, kind: type[Exception]) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise kind("the call's deadline passed")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, self._left(timeout, httpcore.ConnectTimeout)
        )
        return _DeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, deadline: float) -> None:
        self._inner = httpcore.SyncBackend()
        self._deadline = deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise httpcore.ConnectTimeout("the call's deadline passed")
        stream = self._inner.connect_tcp(
            host,
            port,
            left if timeout is None else min(timeout, left),
            local_address,
            socket_options,
        )
        return _DeadlineStream(stream, self._deadline)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


# httpcore's exceptions as httpx's, as httpx's own transport maps them.
_MAPPED: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.TimeoutException, httpx.TimeoutException),
)


def _mapped(error: Exception, request: httpx.Request) -> httpx.HTTPError:
    for theirs, ours in _MAPPED:
        if isinstance(error, theirs):
            if ours in (httpx.ReadTimeout, httpx.WriteTimeout, httpx.ConnectTimeout) and (
                "deadline" in str(error)
            ):
                return DeadlineExceededError(str(error), request=request)
            return ours(str(error), request=request)  # type: ignore[call-arg]
    raise error


class _DeadlineTransport(httpx.BaseTransport):
    """httpx's transport role over an httpcore pool whose sockets keep the deadline."""

    def __init__(self, deadline: float, context: ssl.SSLContext) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=context, network_backend=_DeadlineBackend(deadline), max_connections=1
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            answer = self._pool.handle_request(core_request)
        except Exception as error:
            raise _mapped(error, request) from error
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_ResponseStream(answer.stream, request),  # type: ignore[arg-type]
            extensions=answer.extensions,
        )

    def close(self) -> None:
        self._pool.close()


class _ResponseStream(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes], request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._stream
        except Exception as error:
            raise _mapped(error, self._request) from error

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()
