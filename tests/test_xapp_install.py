"""What the image would run, without Docker: the wheel the Dockerfile builds, installed with the
runtime dependencies only (the `xapp` extra) into a fresh virtualenv, serves in RIC mode against
the stand-ins of RMR, E2 termination, submgr and appmgr, and becomes ready."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.live_system import (
    Xapp,
    free_ports,
    popen_xapp,
    start_simulator,
    wait_until,
    write_xapp_config,
)
from tests.ric_standin import RicStandIn, point_at_stand_ins
from tests.servers import redis_server
from tests.wheels import ROOT, build_wheel, run, virtualenv_with

pytestmark = pytest.mark.slow

DEVELOPMENT_ONLY = ("pytest", "hypothesis", "ruff", "mypy", "schemathesis", "playwright")


def test_the_installed_wheel_serves_in_ric_mode(tmp_path: Path) -> None:
    env = virtualenv_with(tmp_path, build_wheel(tmp_path), "xapp")
    python = str(env / "bin" / "python")
    for name in DEVELOPMENT_ONLY:
        assert run([python, "-c", f"import {name}"]).returncode != 0, f"{name} came along"
    where = run([python, "-c", "import xapp, models.runtime; print(xapp.__file__)"])
    assert where.returncode == 0, where.stderr
    assert str(env) in where.stdout, "the xApp was imported from the checkout, not the wheel"

    # The RMR stand-in is a test file: only it is put on the installed xApp's path.
    standin = tmp_path / "standin"
    standin.mkdir()
    shutil.copy(ROOT / "tests" / "rmr_standin.py", standin / "rmr_standin.py")

    rmr_port, http_port = free_ports(2)
    ric = RicStandIn()
    with redis_server() as redis_port, ric.running(rmr_port) as (e2t_port, platform_port):
        config = write_xapp_config(tmp_path, "paper-static", {}, None, directions=["downlink"])
        point_at_stand_ins(config, platform_port, http_port, rmr_port)
        simulator = start_simulator(tmp_path, "paper-static", e2t_port, 60)
        wait_until(lambda: len(ric.nodes) == 3, 30, "the simulated nodes")
        seed = tmp_path / "routes.rt"
        seed.write_text("newrt|start\nrte|101|127.0.0.1:4560\nnewrt|end\n")
        variables = {
            "ATSSS_RMR_LIBRARY": "rmr_standin",
            "RMR_SEED_RT": str(seed),
            "PYTHONPATH": str(standin),
            "DBAAS_SERVICE_HOST": "127.0.0.1",
            "DBAAS_SERVICE_PORT": str(redis_port),
        }
        with (tmp_path / "xapp.log").open("a") as log:
            process = popen_xapp(
                log, config, "ric", 0, http_port, variables, [str(env / "bin" / "atsss")]
            )
        xapp = Xapp(process, tmp_path / "xapp.log", 0, f"http://127.0.0.1:{http_port}")
        try:
            wait_until(xapp.ready, 60, "readiness of the installed xApp:\n" + xapp.log())
            assert ric.registered, "no registration with the appmgr"
            code, _ = xapp.terminate_within(5)
            assert code == 0, xapp.log()
        finally:
            simulator.kill()
            simulator.wait()
            if process.poll() is None:
                process.kill()
                process.wait()
