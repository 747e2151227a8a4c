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

A subflow's priority travels in its join (the endpoint's backup flag then) and later only in
MP_PRIO, which the kernel sends for established subflows alone: a flag changed while a subflow
is still joining never reaches it, and the subflow stays backup (or active) at both ends while
the endpoint says otherwise. So a returning endpoint is added with the priority its weight will
have, and wherever an established subflow's priority differs from its endpoint's flag, the flag
is flipped and flipped back, which sends MP_PRIO again.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from ipaddress import IPv4Address
from pathlib import Path

from agent.backends.base import BackendError, KernelState, PathWeight
from agent.backends.wrr import Runner, run_command

log = logging.getLogger(__name__)

# After an endpoint is added back: how long until its subflows are checked, and how often.
REJOIN_CHECK_S = 1.0
REJOIN_ATTEMPTS = 6
# How often a returning endpoint is looked at for a finished join (to align its priority).
JOIN_POLL_S = 0.1


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
        self.realigned = 0  # subflows whose priority had to be sent again

    def set_carrier(
        self, address: IPv4Address, interface: str, up: bool, carries: bool = False
    ) -> None:
        """Remove the address's endpoint while its access has no carrier; put it back after
        (also when an earlier run of the agent took it out: as a subflow endpoint), active if
        its path ``carries`` (weight > 0) once back, else backup."""
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
        # With the priority it will have: one changed during the join would not reach it.
        self.runner(_add_argv(key, {**removed, "backup": not carries}))
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

        def wanted() -> bool:  # False once the carrier went again or came back again
            return self._returned.get(address) == turn and address not in self._removed

        for _ in range(REJOIN_ATTEMPTS):
            if self._align_once_joined(address, self.rejoin_check_s, wanted):
                return
            try:
                if not self.runner(["ss", "-MnH"]).strip():
                    return  # no MPTCP connection: nothing to join
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

    def _align_once_joined(
        self, address: str, timeout_s: float, wanted: Callable[[], bool] = lambda: True
    ) -> bool:
        """Up to ``timeout_s``: True once a subflow from the address is established (its
        priority then aligned with its endpoint's flag), or once this is no longer ``wanted``;
        False when none is established by then."""
        deadline = time.monotonic() + timeout_s
        while True:
            time.sleep(max(0.0, min(JOIN_POLL_S, deadline - time.monotonic())))
            if not wanted():
                return True
            try:
                if self.runner(["ss", "-tnH", "state", "established", "src", address]).strip():
                    self.align_priorities([address])
                    return True
            except BackendError as error:
                log.warning("waiting for %s's subflow to join: %s", address, error)
                return True
            if time.monotonic() >= deadline:
                return False

    def align_priorities(self, addresses: list[str]) -> None:
        """Send MP_PRIO again (flip the endpoint's flag and back) wherever an established
        subflow from one of ``addresses`` has another priority than its endpoint's flag."""
        endpoints = {str(e.get("address")): e for e in self.endpoints()}
        self._align(
            {a: (str(e["id"]), _is_backup(e)) for a in addresses if (e := endpoints.get(a))}
        )

    def _align(self, flags: dict[str, tuple[str, bool]]) -> None:
        """``flags``: address → (endpoint id, backup) as the endpoints now hold them."""
        asked = _subflow_priorities(self.runner(["ss", "-tinH", "state", "established"]))
        for address, (endpoint_id, backup) in flags.items():
            if all(b == backup for b in asked.get(address, [])):
                continue
            wanted, other = ("backup", "nobackup") if backup else ("nobackup", "backup")
            change = ["ip", "mptcp", "endpoint", "change", "id", endpoint_id]
            self.runner([*change, other])
            self.runner([*change, wanted])
            self.realigned += 1
            log.warning(
                "subflows from %s kept the priority of their join: %s sent again",
                address,
                wanted,
            )

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
        changed = []
        flags: dict[str, tuple[str, bool]] = {}  # as written: address → (endpoint id, backup)
        for path in paths:
            if str(path.cpe_address) in self._removed:
                continue  # no carrier: no endpoint, nothing carried there until it is back
            endpoint = by_address.get(str(path.cpe_address))
            if endpoint is None:
                raise BackendError(
                    f"no MPTCP endpoint for {path.cpe_address} ({path.access}); add one with "
                    f"`ip mptcp endpoint add {path.cpe_address} dev IF subflow`"
                )
            if _is_backup(endpoint) != (path.weight == 0):
                # Only a flag that changes is written: at 100 ms reports most sets change
                # none, and each write is a process and a netlink request for nothing.
                changed.append(str(path.cpe_address))
                flag = "backup" if path.weight == 0 else "nobackup"
                self.runner(["ip", "mptcp", "endpoint", "change", "id", str(endpoint["id"]), flag])
            flags[str(path.cpe_address)] = (str(endpoint["id"]), path.weight == 0)
        # A subflow that was joining at an earlier change kept its join's priority.
        self._align(flags)
        # One joining now will keep its join's: it is aligned once established.
        for address in changed:
            if self.runner(["ss", "-tnH", "state", "syn-sent", "src", address]).strip():
                threading.Thread(
                    target=self._align_once_joined,
                    args=(address, REJOIN_CHECK_S * REJOIN_ATTEMPTS),
                    name=f"align {address}",
                    daemon=True,
                ).start()

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
            # Mainline cannot hold a weight: "active" reads back as the weight asked for.
            state[(path.cpe_id, path.access)] = 0 if _is_backup(endpoint) else max(path.weight, 1)
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


def _is_backup(endpoint: dict[str, object]) -> bool:
    # `ip -j` shows flags as boolean keys ("backup": true); older builds as a list
    flags = endpoint.get("flags") or []
    return endpoint.get("backup") is True or (isinstance(flags, list) and "backup" in flags)


# A record's first line: [state] Recv-Q Send-Q local-address... (no state column when `ss`
# was asked for one state)
_SOURCE = re.compile(r"^(?:[A-Z][A-Z0-9-]*\s+)?\d+\s+\d+\s+(?:\[::ffff:)?(\d+\.\d+\.\d+\.\d+)")
_MPTCP_FLAGS = re.compile(r"tcp-ulp-mptcp flags:(\S+)")


def _subflow_priorities(shown: str) -> dict[str, list[bool]]:
    """Source address → whether each established MPTCP subflow from it asked for backup, from
    `ss -tinH state established` (a lowercase b among a subflow's flags)."""
    out: dict[str, list[bool]] = {}
    for record in re.split(r"\n(?=\S)", shown):
        source, flags = _SOURCE.match(record), _MPTCP_FLAGS.search(record)
        if source and flags:
            out.setdefault(source.group(1), []).append("b" in flags.group(1))
    return out
