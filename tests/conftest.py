"""Fixtures that start real parts: Redis for SDL."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from tests.servers import redis_server


def pytest_configure(config: pytest.Config) -> None:
    """``--dist loadgroup`` groups tests by writing the group into each test's id, which must
    then be what the id reads (pytest-xdist sets ``_nodeid``; pytest 9.2 reads the id from
    elsewhere): said here, on the controller, before the workers start, in one line."""
    if config.getoption("dist", default="no") != "loadgroup":
        return
    probe = SimpleNamespace(_nodeid="probe@group")  # (a test as pytest-xdist leaves it)
    try:
        grouped = pytest.Item.nodeid.fget(probe) == "probe@group"  # type: ignore[attr-defined]
    except AttributeError:
        grouped = False
    if not grouped:
        raise pytest.UsageError(
            f"--dist loadgroup cannot group tests with pytest {pytest.__version__}: the tests "
            "that change the host's network would run two at once; see pyproject.toml"
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    """On a worker of ``--dist loadgroup`` (make unit), every test marked ``xdist_group`` must
    carry its group in its id, as pytest-xdist puts it there to send the group to one worker;
    where it does not (pytest 9.2 with pytest-xdist 3.8), the groups silently do nothing and
    the tests that change the host's network run two at once: stop before any runs."""
    if not session.config.getoption("loadgroup", default=False):
        return
    lost = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid
    ]
    if lost:
        raise pytest.UsageError(
            f"--dist loadgroup did not group {len(lost)} tests marked xdist_group (first: "
            f"{lost[0]}): pytest {pytest.__version__} with this pytest-xdist; see pyproject.toml"
        )


@pytest.fixture
def redis_port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A private redis-server; ricsdl finds it through DBAAS_SERVICE_HOST/PORT."""
    with redis_server() as port:
        monkeypatch.setenv("DBAAS_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("DBAAS_SERVICE_PORT", str(port))
        yield port
