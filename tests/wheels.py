"""The project's wheel, built from a copy of this checkout, installed into fresh virtualenvs: what
a user gets from `pip install`, without the development environment around it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_SOURCE = (".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "tests")


def run(
    argv: list[str], timeout: float = 900, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``cwd``: where to run; not the checkout, whose packages would shadow the installed ones."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd or "/")


def build_wheel(work: Path) -> Path:
    # A copy, since setuptools builds in the source tree and keeps what it built there.
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    # -v: the build backend's own warnings are shown (pip hides them otherwise)
    built = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(work), str(source)]
    )
    assert built.returncode == 0, built.stderr
    (work / "build.log").write_text(built.stdout + built.stderr)
    (wheel,) = work.glob("atsss_xapp-*.whl")
    return wheel


def virtualenv_with(work: Path, wheel: Path, extra: str) -> Path:
    """A fresh virtualenv holding the wheel with one extra and nothing more."""
    env = work / f"venv-{extra}"
    venv.create(env, with_pip=True)
    # --no-compile: byte-compiling scipy, scikit-learn and matplotlib was two thirds of the
    # install (235 s against 70 s here); the interpreter compiles what it imports anyway
    installed = run(
        [str(env / "bin" / "pip"), "install", "-q", "--no-compile", f"{wheel}[{extra}]"]
    )
    assert installed.returncode == 0, installed.stderr
    return env
