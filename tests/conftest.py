"""Fixtures that start real parts: Redis for SDL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers import redis_server


@pytest.fixture
def redis_port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A private redis-server; ricsdl finds it through DBAAS_SERVICE_HOST/PORT."""
    with redis_server() as port:
        monkeypatch.setenv("DBAAS_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("DBAAS_SERVICE_PORT", str(port))
        yield port
