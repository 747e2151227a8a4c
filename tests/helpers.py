"""Small builders and marks shared by the tests."""

import hashlib
import os
from pathlib import Path

import pytest

from core.domain import CapacityEstimate, Direction
from xapp.policy.weight_policy import PathView

# The tests that change the host's network (namespaces, veth pairs, addresses, routes) run on
# one worker of the parallel suite, one after another (make unit: --dist loadgroup).
host_network = pytest.mark.xdist_group("host-network")


def sharing(fixture: str) -> pytest.MarkDecorator:
    """The mark of the tests that share a module-scoped ``fixture`` that is slow to make (a
    model trained, a wheel installed, a service started): one worker runs them all, so it is
    made once. Spread over two workers, each made its own (a model trained twice: 80 s)."""
    return pytest.mark.xdist_group(f"sharing-{fixture}")


DL = Direction.DOWNLINK

DOCS = Path(__file__).resolve().parents[1] / "docs"


def screenshot_path(name: str, tmp_path: Path) -> Path:
    """Where a browser test saves its screenshot: the docs' own picture when asked for
    (``ATSSS_SCREENSHOTS=1``), else the test's temporary folder, so that a test run leaves the
    tree as it found it."""
    if os.environ.get("ATSSS_SCREENSHOTS") == "1":
        return DOCS / name
    return tmp_path / name


def estimate(
    access: str,
    capacity_mbps: float,
    *,
    stddev_mbps: float = 0.0,
    at_s: float = 0.0,
    available: bool = True,
    cpe_id: str = "cpe-1",
) -> CapacityEstimate:
    return CapacityEstimate(cpe_id, access, DL, capacity_mbps, stddev_mbps, "test", at_s, available)


def paths(capacities: dict[str, float], **kwargs: object) -> tuple[PathView, ...]:
    return tuple(
        PathView(a, estimate(a, c, **kwargs))  # type: ignore[arg-type]
        for a, c in capacities.items()
    )


def assert_core_built(core: object, module: str, source: Path) -> None:
    """A C core with a pure-Python twin was built from its source as it is now: ``pip
    install`` builds it wherever a compiler is, and the setup script installs one (its
    differential tests then ran it). Skipped only where ATSSS_PURE_PYTHON=1 leaves it out."""
    if os.environ.get("ATSSS_PURE_PYTHON") == "1":
        pytest.skip("ATSSS_PURE_PYTHON=1 leaves the core out on purpose")
    assert core is not None, f"{module} was not built: a C compiler?"
    built_from = getattr(core, "SOURCE_SHA256", None)
    assert hashlib.sha256(source.read_bytes()).hexdigest() == built_from, (
        f"{module} was built from another source: it did not compile (pip install -v -e . says why)"
    )
