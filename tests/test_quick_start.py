"""The Quick start's set-up: `make demo` sets up only what the demo needs (no Helm, no Debian
packages), `make test` everything. Run on the checkout's own virtualenv, which is already set up:
what is checked is what each mode asks of the machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_make_demo_sets_up_the_virtualenv_only() -> None:
    planned = subprocess.run(
        ["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert planned.returncode == 0, planned.stderr
    assert "scripts/setup.sh demo" in planned.stdout
    assert "atsss demo" in planned.stdout


def test_the_demo_set_up_runs_on_a_machine_without_helm_or_go(tmp_path: Path) -> None:
    # No go and no helm on PATH (they live under /usr/local/go and ~/go here), and no dpkg
    # either: the demo's set-up must not reach for any of them.
    bare_bin = tmp_path / "bin"
    bare_bin.mkdir()
    for tool in ("bash", "python3.11", "python3", "sha256sum", "cut", "rm", "touch", "dirname"):
        found = next(
            (Path(d) / tool for d in ("/usr/bin", "/bin") if (Path(d) / tool).exists()), None
        )
        if found is not None:
            (bare_bin / tool).symlink_to(found)
    done = subprocess.run(
        [str(bare_bin / "bash"), "scripts/setup.sh", "demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={"PATH": str(bare_bin), "HOME": os.environ.get("HOME", "/root")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ready for the demo" in done.stdout
    assert "helm" not in (done.stdout + done.stderr).lower()


def test_an_unknown_set_up_mode_is_one_line_and_exit_2() -> None:
    done = subprocess.run(
        ["scripts/setup.sh", "everything"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "setup: error: unknown mode 'everything' (demo, or nothing for everything)"
    )
