"""Pick the backend for this kernel."""

from __future__ import annotations

from pathlib import Path

from agent.backends.base import Backend
from agent.backends.dry_run import DryRunBackend
from agent.backends.mainline import MainlineBackend
from agent.backends.wrr import WEIGHTS, WrrBackend
from agent.config import AgentConfig


def detect_kernel(procfs_root: Path) -> str:
    """`wrr` where the WRR sysctl exists, `mainline` where MPTCP does, else `dry-run`."""
    if (procfs_root / WEIGHTS).exists():
        return "wrr"
    if (procfs_root / "sys/net/mptcp/enabled").exists():
        return "mainline"
    return "dry-run"


def make_backend(config: AgentConfig, name: str | None = None) -> Backend:
    chosen = name or config.backend
    if chosen == "auto":
        chosen = detect_kernel(config.procfs_root)
    if chosen == "wrr":
        interfaces = {access: c.interface for access, c in config.accesses.items()}
        return WrrBackend(config.role, config.procfs_root, interfaces, sysfs_root=config.sysfs_root)
    if chosen == "mainline":
        return MainlineBackend(config.role, config.procfs_root)
    if chosen == "dry-run":
        return DryRunBackend()
    raise ValueError(f"unknown backend {chosen!r}: wrr, mainline, dry-run or auto")
