"""Mainline Linux MPTCP (5.6+): no weights; the lever is each endpoint's backup flag.

Weight 0 → the CPE's endpoint on that access is `backup`, weight > 0 → active. Changing the
flag of an endpoint in use signals MP_PRIO, so the proxy stops sending on that subflow too; the
proxy itself has no per-path lever in mainline, so a proxy agent on this backend refuses.
Endpoints are read and changed through iproute2 (`ip -j mptcp endpoint`), without a shell.
"""

from __future__ import annotations

import json
from pathlib import Path

from agent.backends.base import BackendError, KernelState, PathWeight
from agent.backends.wrr import Runner, run_command


class MainlineBackend:
    name = "mainline"
    lever = "active-backup"
    steers_peer = True

    def __init__(
        self, role: str, procfs_root: Path = Path("/proc"), runner: Runner = run_command
    ) -> None:
        self.role = role
        self.root = procfs_root
        self.runner = runner

    def endpoints(self) -> list[dict[str, object]]:
        raw = self.runner(["ip", "-j", "mptcp", "endpoint", "show"])
        try:
            parsed = json.loads(raw or "[]")
        except json.JSONDecodeError as error:
            raise BackendError(f"ip -j mptcp endpoint show: not JSON: {error}") from error
        return [e for e in parsed if isinstance(e, dict)]

    def write(self, paths: list[PathWeight]) -> None:
        if self.role != "cpe":
            raise BackendError(
                "mainline MPTCP has no per-path lever at the proxy; run the agent on the CPE, "
                "whose endpoint backup flags also steer the proxy's sending (MP_PRIO)"
            )
        by_address = {str(e.get("address")): e for e in self.endpoints()}
        for path in paths:
            endpoint = by_address.get(str(path.cpe_address))
            if endpoint is None:
                raise BackendError(
                    f"no MPTCP endpoint for {path.cpe_address} ({path.access}); add one with "
                    f"`ip mptcp endpoint add {path.cpe_address} dev IF subflow`"
                )
            flag = "backup" if path.weight == 0 else "nobackup"
            self.runner(["ip", "mptcp", "endpoint", "change", "id", str(endpoint["id"]), flag])

    def read(self, paths: list[PathWeight]) -> KernelState:
        by_address = {str(e.get("address")): e for e in self.endpoints()}
        state = {}
        for path in paths:
            endpoint = by_address.get(str(path.cpe_address))
            if endpoint is None:
                continue
            # `ip -j` shows flags as boolean keys ("backup": true); older builds as a list
            flags = endpoint.get("flags") or []
            backup = endpoint.get("backup") is True or (
                isinstance(flags, list) and "backup" in flags
            )
            # Mainline cannot hold a weight: "active" reads back as the weight asked for.
            state[(path.cpe_id, path.access)] = 0 if backup else max(path.weight, 1)
        return state

    def describe(self) -> dict[str, object]:
        scheduler = self.root / "sys/net/mptcp/scheduler"
        return {
            "backend": self.name,
            "scheduler": scheduler.read_text().strip() if scheduler.exists() else None,
            "endpoints": self.endpoints(),
        }
