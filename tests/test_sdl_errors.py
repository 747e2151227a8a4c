"""SDL that is missing, refuses or does not answer: one line, bounded time; xapp run uses SDL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.live_system import persistent_redis
from core.domain import Direction
from tests.servers import misbehaving_server
from tests.test_agent_api import agent, put, write_config
from xapp.adapters.redis_documents import RedisDocuments
from xapp.adapters.sdl_store import SdlStateStore
from xapp.operator.state import SharedDocuments, StoreUnavailableError


def export(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "atsss", "xapp", "export-dataset", "--out", str(tmp_path / "d.csv")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_sdl_unset_refused_or_silent_is_one_line_in_bounded_time(tmp_path: Path) -> None:
    """Before: a traceback when unset or refused, and a hang when the address was not Redis."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DBAAS_")}
    unset = export(base, tmp_path)
    assert unset.returncode == 2
    assert unset.stderr.startswith("error: cannot reach SDL")
    assert "Traceback" not in unset.stderr
    refused = export(
        {**base, "DBAAS_SERVICE_HOST": "127.0.0.1", "DBAAS_SERVICE_PORT": "1"}, tmp_path
    )
    assert refused.returncode == 2
    assert "cannot reach SDL at 127.0.0.1:1" in refused.stderr
    with misbehaving_server("silent") as port:
        silent = export(
            {**base, "DBAAS_SERVICE_HOST": "127.0.0.1", "DBAAS_SERVICE_PORT": str(port)}, tmp_path
        )
    assert silent.returncode == 2
    assert "cannot reach SDL" in silent.stderr


def test_xapp_run_keeps_its_state_in_sdl(redis_port: int, tmp_path: Path) -> None:
    """Before: `xapp run` kept everything in memory, so SDL stayed empty."""
    config, port = write_config(tmp_path)
    with agent(config, port) as client:
        assert put(client, {"nr": 3, "wifi": 10, "lifi": 1}, 9).status_code == 200
        done = subprocess.run(
            [
                sys.executable, "-m", "atsss", "xapp", "run", "--scenario", "paper-static",
                "--listen", "127.0.0.1:0", "--proxy-agent", f"http://127.0.0.1:{port}",
                "--token-file", str(tmp_path / "token"), "--direction", "downlink",
                "--duration", "1",
            ],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stored = SdlStateStore().load_weights("cpe-1", Direction.DOWNLINK)
    assert stored is not None
    assert stored.sequence == 9


def test_shared_documents_read_while_redis_restarts_is_sdl_unavailable_then_reads(
    tmp_path: Path,
) -> None:
    """Before: Redis gone between the version check and the read raised redis's own error,
    which ended the thread that follows other replicas' changes: that replica never saw
    another run-time CPE (tests/test_replicas_agree.py, once in a full run)."""
    with persistent_redis(tmp_path / "redis") as server:
        here = SharedDocuments(RedisDocuments("follow-test", port=server.port), "operator/cpe/")
        there = SharedDocuments(RedisDocuments("follow-test", port=server.port), "operator/cpe/")
        assert there.commit({"operator/cpe/cpe-7": {"cpe": {"id": "cpe-7"}}}, [])
        assert here.moved()
        server.kill()
        with pytest.raises(StoreUnavailableError, match="SDL did not answer"):
            here.read()
        server.start()  # on the same data: what was committed is read now
        assert here.read() == {"operator/cpe/cpe-7": {"cpe": {"id": "cpe-7"}}}
        assert not here.moved()
