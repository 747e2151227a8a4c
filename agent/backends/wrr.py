"""The 5G-CLARITY WRR kernel (multipath-tcp.org v0.96 with the WRR patch).

Facts from its public controller: the scheduler is `net.mptcp.mptcp_scheduler = roundrobin`;
WRR needs the round-robin module's parameter `cwnd_limited = N` (a module parameter, so under
sysfs: /sys/module/mptcp_rr/parameters/cwnd_limited; with Y the scheduler fills each subflow's
congestion window and the weights barely matter, the paper's "RR (Y)"); weights go to
`net.mptcp.mptcp_wrr_li_weights` as groups of five unsigned decimals per rule — src_ip, dst_ip,
weight, src_port, dst_port, 0 a wildcard — where an IPv4 address is the 32-bit integer whose
in-memory bytes are the address in network order read on a little-endian host (10.0.0.20 →
335544330) and a port is its byte-swapped 16-bit value. A subflow no rule matches gets weight 1.
Uplink rules on the CPE match src_ip (the CPE's address on the access); downlink rules on the
proxy match dst_ip (the CPE's address). Weight 0 is standby: that kernel's iproute2 sets
`ip link set dev IF multipath backup` on the CPE; the proxy writes weight 1 for such a path,
which the backup flag (signalled to the proxy) keeps idle anyway.

Files are written directly, never through a shell, under configurable procfs and sysfs roots so
that tests can point the backend at directories.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

from agent.backends.base import BackendError, KernelState, PathWeight

log = logging.getLogger(__name__)

WEIGHTS = Path("sys/net/mptcp/mptcp_wrr_li_weights")
SCHEDULER = Path("sys/net/mptcp/mptcp_scheduler")
CWND_LIMITED = Path("module/mptcp_rr/parameters/cwnd_limited")  # under the sysfs root
SRTT = Path("sys/net/mptcp/mptcp_wrr_srtt")
CWND = Path("sys/net/mptcp/mptcp_wrr_cwnd")


def encode_address(address: IPv4Address) -> int:
    """10.0.0.20 → 335544330: network-order bytes read as a little-endian integer."""
    return int.from_bytes(address.packed, "little")


def decode_address(value: int) -> IPv4Address:
    return IPv4Address(value.to_bytes(4, "little"))


def encode_port(port: int) -> int:
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is outside 0..65535")
    return int.from_bytes(port.to_bytes(2, "big"), "little")


@dataclass(frozen=True)
class WrrRule:
    src: IPv4Address | None
    dst: IPv4Address | None
    weight: int
    src_port: int = 0
    dst_port: int = 0

    def fields(self) -> tuple[int, int, int, int, int]:
        return (
            encode_address(self.src) if self.src else 0,
            encode_address(self.dst) if self.dst else 0,
            self.weight,
            encode_port(self.src_port),
            encode_port(self.dst_port),
        )


def rules_text(rules: Sequence[WrrRule]) -> str:
    """The exact text written to mptcp_wrr_li_weights: one group of five per rule."""
    return " ".join(" ".join(str(f) for f in rule.fields()) for rule in rules) + "\n"


def parse_rules(text: str) -> list[tuple[int, int, int, int, int]]:
    """Read back the kernel's tab-separated groups of five."""
    numbers = [int(token) for token in text.split()]
    if len(numbers) % 5:
        raise BackendError(f"mptcp_wrr_li_weights holds {len(numbers)} numbers, not groups of five")
    return [tuple(numbers[i : i + 5]) for i in range(0, len(numbers), 5)]  # type: ignore[misc]


Runner = Callable[[list[str]], str]


def run_command(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except OSError as error:
        raise BackendError(f"{argv[0]}: {error.strerror}") from error
    if done.returncode != 0:
        raise BackendError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


class WrrBackend:
    name = "wrr"
    lever = "weights"
    steers_peer = False

    def __init__(
        self,
        role: str,
        procfs_root: Path = Path("/proc"),
        interfaces: dict[str, str] | None = None,
        runner: Runner = run_command,
        sysfs_root: Path = Path("/sys"),
    ) -> None:
        self.role = role
        self.root = procfs_root
        self.sysfs = sysfs_root
        self._warned = False
        self.interfaces = interfaces or {}
        self.runner = runner

    def rules(self, paths: Sequence[PathWeight]) -> list[WrrRule]:
        rules = []
        for path in paths:
            weight = path.weight if path.weight > 0 else 1  # 0 is carried by the backup flag
            if self.role == "cpe":
                rules.append(WrrRule(src=path.cpe_address, dst=None, weight=weight))
            else:
                rules.append(WrrRule(src=None, dst=path.cpe_address, weight=weight))
        return rules

    def write(self, paths: list[PathWeight]) -> None:
        self._prepare()
        text = rules_text(self.rules(paths))
        self._write(WEIGHTS, text)
        if self.role == "cpe":
            for path in paths:
                interface = self.interfaces.get(path.access)
                if interface is not None:
                    mode = "backup" if path.weight == 0 else "on"
                    self.runner(["ip", "link", "set", "dev", interface, "multipath", mode])

    def read(self, paths: list[PathWeight]) -> KernelState:
        rules = parse_rules(self._read(WEIGHTS))
        key = 0 if self.role == "cpe" else 1  # match on src_ip (cpe) or dst_ip (proxy)
        by_address = {rule[key]: rule[2] for rule in rules}
        state = {}
        for path in paths:
            weight = by_address.get(encode_address(path.cpe_address), 1)
            state[(path.cpe_id, path.access)] = 0 if path.weight == 0 and weight == 1 else weight
        return state

    def describe(self) -> dict[str, object]:
        out: dict[str, object] = {
            "backend": self.name,
            "procfs_root": str(self.root),
            "sysfs_root": str(self.sysfs),
        }
        out["scheduler"] = (
            self._read(SCHEDULER).strip() if (self.root / SCHEDULER).exists() else None
        )
        cwnd_limited = self.sysfs / CWND_LIMITED
        out["cwnd_limited"] = _read(cwnd_limited).strip() if cwnd_limited.exists() else None
        if out["cwnd_limited"] != "N":
            out["warning"] = (
                f"{cwnd_limited} is {out['cwnd_limited'] or 'missing'}, not N: the round-robin "
                "scheduler fills each subflow's congestion window and the weights barely matter"
            )
        out["rules"] = [
            {
                "src": str(decode_address(r[0])) if r[0] else "*",
                "dst": str(decode_address(r[1])) if r[1] else "*",
                "weight": r[2],
                "src_port": int.from_bytes(r[3].to_bytes(2, "little"), "big"),
                "dst_port": int.from_bytes(r[4].to_bytes(2, "little"), "big"),
            }
            for r in parse_rules(self._read(WEIGHTS))
        ]
        for label, relative in (("srtt", SRTT), ("cwnd", CWND)):
            if (self.root / relative).exists():
                out[label] = self._read(relative).split()
        return out

    def _prepare(self) -> None:
        """WRR is the roundrobin scheduler with cwnd_limited off."""
        if self._read(SCHEDULER).strip() != "roundrobin":
            self._write(SCHEDULER, "roundrobin\n")
        cwnd_limited = self.sysfs / CWND_LIMITED
        if not cwnd_limited.exists():
            if not self._warned:
                log.warning(
                    "%s is missing: is the mptcp_rr module (the WRR kernel's round-robin "
                    "scheduler) loaded? Weights are written, but may barely matter",
                    cwnd_limited,
                )
                self._warned = True
            return
        if _read(cwnd_limited).strip() != "N":
            _write(cwnd_limited, "N\n")
            if _read(cwnd_limited).strip() != "N":
                raise BackendError(f"{cwnd_limited} does not take N: WRR would not weigh")

    def _read(self, relative: Path) -> str:
        return _read(self.root / relative)

    def _write(self, relative: Path, text: str) -> None:
        _write(self.root / relative, text)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as error:
        raise BackendError(f"cannot read {path}: {error.strerror}") from error


def _write(path: Path, text: str) -> None:
    try:
        with path.open("w") as handle:
            handle.write(text)
    except OSError as error:
        raise BackendError(f"cannot write {path}: {error.strerror}") from error
