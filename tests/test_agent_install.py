"""The agent installs alone: a fresh virtualenv with `pip install 'atsss-xapp[agent]'` runs it.

The wheel is built from this checkout, installed with the agent extra only, and the `atsss`
it installs applies weights, serves the agent's API, and says what to install for the parts it
does not have. Packages come from the package index (or pip's cache).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from agent.backends.wrr import WEIGHTS
from tests.helpers import sharing
from tests.test_agent_api import GOLDEN, agent, write_config
from tests.wheels import build_wheel, run, virtualenv_with

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("sklearn", "onnxruntime", "pycrate", "asn1tools", "ricxappframe", "ricsdl", "pandas")

pytestmark = [pytest.mark.slow, sharing("agent_env")]


@pytest.fixture(scope="module")
def agent_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("agent-env")
    return virtualenv_with(work, build_wheel(work), "agent")


def test_the_wheel_builds_without_licence_warnings_and_carries_its_licence(
    agent_env: Path,
) -> None:
    """The licence is an SPDX expression (no setuptools deprecation warnings on install), and
    LICENSE and NOTICE travel in the wheel."""
    log = (agent_env.parent / "build.log").read_text()
    warnings = [
        line for line in log.splitlines() if "warning" in line.lower() and "licen" in line.lower()
    ]
    assert warnings == [], warnings
    (wheel,) = agent_env.parent.glob("atsss_xapp-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert b"License-Expression: Apache-2.0" in metadata
    assert {n.rpartition("/")[2] for n in names if "/licenses/" in n} == {"LICENSE", "NOTICE"}


def test_the_agent_environment_has_none_of_the_xapp_dependencies(agent_env: Path) -> None:
    for name in HEAVY:
        probe = run([str(agent_env / "bin" / "python"), "-c", f"import {name}"])
        assert probe.returncode != 0, f"{name} is installed with the agent extra"


def test_agent_apply_with_only_the_agent_installed(agent_env: Path, tmp_path: Path) -> None:
    config, _ = write_config(tmp_path)
    applied = run(
        [
            str(agent_env / "bin" / "atsss"),
            "agent",
            "apply",
            "--config",
            str(config),
            "--direction",
            "down",
            "--cpe",
            "cpe-1",
            "--weights",
            "nr=28,wifi=99,lifi=1",
        ]
    )
    assert applied.returncode == 0, applied.stderr
    assert (tmp_path / "proc" / WEIGHTS).read_text() == GOLDEN
    dry = run(
        [
            str(agent_env / "bin" / "atsss"),
            "agent",
            "apply",
            "--config",
            str(config),
            "--backend",
            "dry-run",
            "--direction",
            "down",
            "--cpe",
            "cpe-1",
            "--weights",
            "nr=5,wifi=5,lifi=1",
        ]
    )
    assert dry.returncode == 0, dry.stderr
    assert (tmp_path / "proc" / WEIGHTS).read_text() == GOLDEN, "dry-run wrote to the kernel"


def test_agent_run_with_only_the_agent_installed(agent_env: Path, tmp_path: Path) -> None:
    config, port = write_config(tmp_path)
    with agent(config, port, [str(agent_env / "bin" / "atsss")]) as client:
        pushed = client.put(
            "/v1/weights/downlink",
            json={"cpe_id": "cpe-1", "sequence": 1, "weights": {"nr": 28, "wifi": 99, "lifi": 1}},
        )
        assert pushed.status_code == 200, pushed.text
    assert (tmp_path / "proc" / WEIGHTS).read_text() == GOLDEN


def test_a_part_that_is_not_installed_says_what_to_install(agent_env: Path) -> None:
    result = run([str(agent_env / "bin" / "atsss"), "kpm", "catalogue"])
    assert result.returncode == 2
    assert "not installed here" in result.stderr
    assert "atsss-xapp[xapp]" in result.stderr
    assert "Traceback" not in result.stderr
