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
import logging
import threading
import time
from ipaddress import IPv4Address
from pathlib import Path

from agent.backends.base import BackendError, KernelState, PathWeight
from agent.backends.wrr import Runner, run_command

log = logging.getLogger(__name__)

# After an endpoint is added back: how long until its subflows are checked, and how often.
REJOIN_CHECK_S = 1.0
REJOIN_ATTEMPTS = 6


class MainlineBackend:
    name = "mainline"
    lever = "active-backup"
    steers_peer = True

    def __init__(
        self,
        role: str,
        procfs_root: Path = Path("/proc"),
        runner: Runner = run_command,
        rejoin_check_s: float = REJOIN_CHECK_S,
    ) -> None:
        self.role = role
        self.root = procfs_root
        self.runner = runner
        self.rejoin_check_s = rejoin_check_s
        # Endpoints taken out while their access has no carrier, by address, as they were.
        self._removed: dict[str, dict[str, object]] = {}
        self._returned: dict[str, int] = {}  # address → which return it is (to drop stale checks)
        self.rejoins = 0

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
        # Back on standby first; the weights written next decide whether it carries.
        self.runner(_add_argv(key, {**removed, "backup": True}))
        turn = self._returned.get(key, 0) + 1
        self._returned[key] = turn
        threading.Thread(
            target=self._see_it_joined, args=(key, turn), name=f"rejoin {key}", daemon=True
        ).start()

    def _see_it_joined(self, address: str, turn: int) -> None:
        """An endpoint added back whose join failed gets no subflow, and the kernel does not
        try again: while MPTCP connections exist and none of their subflows leaves from the
        address, take the endpoint out and add it again (as it is now, flags included). A join
        still under way (its SYN sent, perhaps again after a lost first one: TCP retries after
        1 s) is left to finish: restarting it at each check could keep it from ever joining."""
        for _ in range(REJOIN_ATTEMPTS):
            time.sleep(self.rejoin_check_s)
            if self._returned.get(address) != turn or address in self._removed:
                return  # the carrier went again, or came back again: a newer check runs
            try:
                if not self.runner(["ss", "-MnH"]).strip():
                    return  # no MPTCP connection: nothing to join
                if self.runner(["ss", "-tnH", "state", "established", "src", address]).strip():
                    return
                if self.runner(["ss", "-tnH", "state", "syn-sent", "src", address]).strip():
                    log.info("a subflow from %s is still joining", address)
                    continue
                current = {str(e.get("address")): e for e in self.endpoints()}.get(address)
                if current is None:
                    return
                self.runner(["ip", "mptcp", "endpoint", "delete", "id", str(current["id"])])
                self.runner(_add_argv(address, current))
                self.rejoins += 1
                log.warning("no subflow from %s after its return: endpoint added again", address)
            except BackendError as error:
                log.warning("checking %s's subflows after its return: %s", address, error)
                return

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


def _add_argv(address: str, endpoint: dict[str, object]) -> list[str]:
    """`ip mptcp endpoint add` for an endpoint as `ip -j mptcp endpoint show` described it."""
    argv = ["ip", "mptcp", "endpoint", "add", address]
    if endpoint.get("dev"):
        argv += ["dev", str(endpoint["dev"])]
    if endpoint.get("id") is not None:
        argv += ["id", str(endpoint["id"])]
    listed = endpoint.get("flags")
    flags = set(listed) if isinstance(listed, list) else set()
    flags |= {name for name in _FLAGS if endpoint.get(name) is True}
    return argv + sorted(flags & set(_FLAGS))
