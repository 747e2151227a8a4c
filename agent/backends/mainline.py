"""Mainline Linux MPTCP (5.6+): no weights; the lever is each endpoint's backup flag.

Weight 0 → the CPE's endpoint on that access is `backup`, weight > 0 → active. Changing the
flag of an endpoint in use signals MP_PRIO, so the proxy stops sending on that subflow too; the
proxy itself has no per-path lever in mainline, so a proxy agent on this backend refuses.
Endpoints are read and changed through iproute2 (`ip -j mptcp endpoint`), without a shell.

When an access loses carrier (the agent's own reaction), its endpoint is removed, not only put
on backup: the kernel then closes the subflows on it (REMOVE_ADDR) and sends what was in flight
there again on the others at once, where a backup subflow on a dead link holds that data until
MPTCP's retransmission timer gives up on it (in the netns testbed, about 0.3 s of lost transfer
against 1.4 s). When the carrier is back the endpoint is added again with its id, device and
flags, and the kernel opens the subflows again on the connections that had them.
"""

from __future__ import annotations

import json
from ipaddress import IPv4Address
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
        # Endpoints taken out while their access has no carrier, by address, as they were.
        self._removed: dict[str, dict[str, object]] = {}

    def set_carrier(self, address: IPv4Address, interface: str, up: bool) -> None:
        """Remove the address's endpoint while its access has no carrier; put it back after
        (also when an earlier run of the agent took it out: as a subflow endpoint)."""
        key = str(address)
        if not up:
            endpoint = {str(e.get("address")): e for e in self.endpoints()}.get(key)
            if endpoint is None or key in self._removed:
                return
            self.runner(["ip", "mptcp", "endpoint", "delete", "id", str(endpoint["id"])])
            self._removed[key] = endpoint
            return
        removed = self._removed.pop(key, None)
        if removed is None:
            if any(str(e.get("address")) == key for e in self.endpoints()):
                return
            removed = {"dev": interface, "subflow": True}
        argv = ["ip", "mptcp", "endpoint", "add", key]
        if removed.get("dev"):
            argv += ["dev", str(removed["dev"])]
        if removed.get("id") is not None:
            argv += ["id", str(removed["id"])]
        listed = removed.get("flags")
        flags = set(listed) if isinstance(listed, list) else set()
        flags |= {name for name in _FLAGS if removed.get(name) is True}
        # Back on standby first; the weights written next decide whether it carries.
        kept = (flags - {"backup"}) & set(_FLAGS)
        argv += [*sorted(kept), "backup"]
        self.runner(argv)

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
            if str(path.cpe_address) in self._removed:
                continue  # no carrier: no endpoint, nothing carried there until it is back
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
            if str(path.cpe_address) in self._removed:
                # No endpoint while the carrier is gone: whatever weight is asked is moot.
                state[(path.cpe_id, path.access)] = path.weight
                continue
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


# The endpoint flags iproute2 shows and takes (`ip mptcp endpoint add … FLAGS`).
_FLAGS = ("signal", "subflow", "backup", "fullmesh")
