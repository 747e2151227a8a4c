"""How the xApp reaches an agent's REST API: base URL, bearer token, TLS trust.

Shared by the adapters that talk to agents (weights, probes) so that they authenticate and
report an agent's refusals the same way.
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class AgentEndpoint:
    base_url: str
    token: str | None = None
    verify: bool | str = True  # a CA bundle path for an agent with its own certificate

    def client(self, timeout_s: float) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return httpx.Client(
            base_url=self.base_url,
            headers=headers,
            verify=_ssl_context(self.verify),
            timeout=timeout_s,
        )


class DeadlineExceededError(httpx.TimeoutException):
    """The whole exchange took longer than its deadline (an agent trickling its answer)."""


def request_within(
    agent: AgentEndpoint, method: str, path: str, deadline_s: float, **kwargs: Any
) -> httpx.Response:
    """One request whose whole exchange ends within ``deadline_s``, answer included.

    httpx's timeouts bound each phase and each read, so an agent sending its answer a byte at
    a time could hold a caller for ever; here the body is read chunk by chunk against the
    deadline. The response returned has its body read.
    """
    deadline = time.monotonic() + deadline_s
    with agent.client(deadline_s) as client, client.stream(method, path, **kwargs) as response:
        body = bytearray()
        for chunk in response.iter_raw():
            body += chunk
            if time.monotonic() > deadline:
                raise DeadlineExceededError(
                    f"no complete answer within {deadline_s:g} s", request=response.request
                )
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


def _ssl_context(verify: bool | str) -> bool | ssl.SSLContext:
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    return verify
