"""Mistakes on the command line get one line naming them and exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml


def atsss(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "atsss", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("xapp", "run", "--scenario", "paper-static", "--period-ms", "0"), "--period-ms"),
        (("xapp", "run", "--scenario", "paper-static", "--listen", "127.0.0.1:99999"), "--listen"),
        (
            ("xapp", "run", "--scenario", "paper-static", "--samples", "/nonexistent/s.jsonl"),
            "--samples: no directory /nonexistent",
        ),
        (("bench", "testbed", "--reporting-period-ms", "300"), "--reporting-period-ms"),
        (("bench", "testbed", "--reporting-period-ms", "50"), "--reporting-period-ms"),
        (("bench", "testbed", "--link-buffer-ms", "-5"), "--link-buffer-ms"),
        (("bench", "testbed", "--receive-buffer-kib", "-1"), "--receive-buffer-kib"),
        (("weights", "nr=nan"), "finite"),
        (("weights", "nr=inf,wifi=1"), "finite"),
    ],
)
def test_bad_options_are_one_line(args: tuple[str, ...], named: str) -> None:
    done = atsss(*args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert named in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def agent_config(tmp_path: Path, **changes: object) -> Path:
    config: dict[str, object] = {
        "role": "cpe",
        "accesses": {"nr": {"interface": "lo", "address": "127.0.0.1"}},
        "listen": "127.0.0.1:8799",
        "state_file": str(tmp_path / "state.json"),
        **changes,
    }
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_agent_mistakes_are_one_line(tmp_path: Path) -> None:
    bad_listen = agent_config(tmp_path, listen="127.0.0.1:notaport")
    done = atsss("agent", "run", "--config", str(bad_listen), "--backend", "dry-run")
    assert done.returncode == 2
    assert "listen" in done.stderr
    assert "Traceback" not in done.stderr
    (tmp_path / "blocked").write_text("a file where a directory should be")
    unwritable = agent_config(tmp_path, state_file=str(tmp_path / "blocked" / "state.json"))
    done = atsss(
        "agent", "apply", "--config", str(unwritable), "--direction", "up",
        "--weights", "nr=3", "--backend", "dry-run",
    )  # fmt: skip
    assert done.returncode == 2
    assert "cannot save the state file" in done.stderr
    assert "Traceback" not in done.stderr
