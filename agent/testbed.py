"""A one-box testbed: a CPE and an MPTCP proxy in two network namespaces, three shaped paths.

    CPE namespace                               proxy namespace
    nr0   10.77.1.1/24  <── veth ──>  nr1   10.77.1.2/24
    wifi0 10.77.2.1/24  <── veth ──>  wifi1 10.77.2.2/24
    lifi0 10.77.3.1/24  <── veth ──>  lifi1 10.77.3.2/24
                                      lo    10.77.0.1/32  (the proxy's service address)
    mgmt0 10.77.250.1/24  <── veth ──>  <prefix>-mgmt 10.77.250.2/24 in the host's namespace

In the CPE, each source address has its own routing table toward 10.77.0.1, so a subflow leaves
by its access; the default route is nr. MPTCP endpoints (`subflow`) exist for all three
addresses and the limits allow them. The management link lets programs in the host's
namespace (the xApp) reach the CPE's agent, as an operator's network would. Each side's egress
is shaped with htb: the CPE's is the uplink rate, the proxy's the downlink rate. Needs root;
everything is torn down by `down`.

Two settings make the links and hosts more like the real ones (both off by default):

- ``link_buffer_ms``: each shaped link buffers this much of its rate (a byte FIFO under the htb
  class). Without it the class keeps the kernel's default FIFO of 1,000 packets, 1.4 MB: 340 ms
  at NR's rate at a tenth of the paper's, and 10 s at LiFi's. Behind such a queue, data sent on
  NR arrives a third of a second after data sent at the same moment on Wi-Fi, and the MPTCP
  receiver holds the difference out of order.
- ``receive_buffer_bytes``: both namespaces' default TCP receive buffer (`tcp_rmem`'s middle
  value). A subflow that joins later announces at most about 0.9 of it as its window (its own
  buffer is not auto-tuned), and the connection's window is what its subflows announce.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from pathlib import Path

ACCESSES = ("nr", "wifi", "lifi")
# The least a shaped link buffers with ``link_buffer_ms`` (about 20 full packets): 50 ms of LiFi
# at a tenth of 12 Mbit/s is 5 packets, too few for a TCP flow to hold its rate.
MIN_LINK_BUFFER_BYTES = 30_000


class TestbedError(RuntimeError):
    __test__ = False


@dataclass(frozen=True)
class Testbed:
    __test__ = False  # not a pytest test class, despite the name

    prefix: str = "atsss"
    subnet: int = 77
    # Each shaped link's buffer in milliseconds of its rate; None: the kernel's default FIFO.
    link_buffer_ms: float | None = None
    # Both namespaces' default TCP receive buffer in bytes; None: the kernel's (128 KiB).
    receive_buffer_bytes: int | None = None
    # (namespace, device) → the byte limit of its buffer; the devices whose packets are dropped.
    _buffers: dict[tuple[str, str], int] = field(default_factory=dict, compare=False, repr=False)
    _dropping: set[tuple[str, str]] = field(default_factory=set, compare=False, repr=False)

    @property
    def cpe_ns(self) -> str:
        return f"{self.prefix}-cpe"

    @property
    def proxy_ns(self) -> str:
        return f"{self.prefix}-proxy"

    @property
    def server(self) -> IPv4Address:
        return IPv4Address(f"10.{self.subnet}.0.1")

    def cpe_address(self, access: str) -> IPv4Address:
        return IPv4Address(f"10.{self.subnet}.{ACCESSES.index(access) + 1}.1")

    def proxy_address(self, access: str) -> IPv4Address:
        return IPv4Address(f"10.{self.subnet}.{ACCESSES.index(access) + 1}.2")

    @property
    def management_address(self) -> IPv4Address:
        """The CPE's address on the management link (where its agent listens)."""
        return IPv4Address(f"10.{self.subnet}.250.1")

    @property
    def management_interface(self) -> str:
        return f"{self.prefix}-mgmt"

    def interface(self, access: str, side: str) -> str:
        return f"{access}{0 if side == 'cpe' else 1}"

    def exists(self) -> bool:
        listed = subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True, check=False
        ).stdout
        return any(line.split()[0] == self.cpe_ns for line in listed.splitlines() if line.strip())

    def up(self) -> None:
        if self.exists():
            raise TestbedError(
                f"namespace {self.cpe_ns} exists already; run `atsss testbed down` first"
            )
        try:
            self._up()
        except TestbedError:
            self.down()
            raise

    def _up(self) -> None:
        cpe, proxy = self.cpe_ns, self.proxy_ns
        _run(["ip", "netns", "add", cpe])
        _run(["ip", "netns", "add", proxy])
        for ns in (cpe, proxy):
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            _run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.mptcp.enabled=1"])
            if self.receive_buffer_bytes is not None:
                self._set_receive_buffer(ns, self.receive_buffer_bytes)
            _run(
                [
                    "ip",
                    "-n",
                    ns,
                    "mptcp",
                    "limits",
                    "set",
                    "subflows",
                    "8",
                    "add_addr_accepted",
                    "8",
                ]
            )
        _run(["ip", "-n", proxy, "addr", "add", f"{self.server}/32", "dev", "lo"])
        for index, access in enumerate(ACCESSES, 1):
            near, far = self.interface(access, "cpe"), self.interface(access, "proxy")
            _run(
                [
                    "ip",
                    "link",
                    "add",
                    near,
                    "netns",
                    cpe,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    far,
                    "netns",
                    proxy,
                ]
            )
            _run(["ip", "-n", cpe, "addr", "add", f"{self.cpe_address(access)}/24", "dev", near])
            _run(["ip", "-n", proxy, "addr", "add", f"{self.proxy_address(access)}/24", "dev", far])
            _run(["ip", "-n", cpe, "link", "set", near, "up"])
            _run(["ip", "-n", proxy, "link", "set", far, "up"])
            table = str(100 + index)
            _run(
                [
                    "ip",
                    "-n",
                    cpe,
                    "rule",
                    "add",
                    "from",
                    str(self.cpe_address(access)),
                    "table",
                    table,
                ]
            )
            _run(
                [
                    "ip",
                    "-n",
                    cpe,
                    "route",
                    "add",
                    f"{self.server}/32",
                    "via",
                    str(self.proxy_address(access)),
                    "dev",
                    near,
                    "table",
                    table,
                ]
            )
            _run(
                [
                    "ip",
                    "-n",
                    cpe,
                    "mptcp",
                    "endpoint",
                    "add",
                    str(self.cpe_address(access)),
                    "dev",
                    near,
                    "subflow",
                ]
            )
        host_side = self.management_interface
        _run(
            ["ip", "link", "add", host_side, "type", "veth", "peer", "name", "mgmt0", "netns", cpe]
        )
        _run(["ip", "addr", "add", f"10.{self.subnet}.250.2/24", "dev", host_side])
        _run(["ip", "link", "set", host_side, "up"])
        _run(["ip", "-n", cpe, "addr", "add", f"{self.management_address}/24", "dev", "mgmt0"])
        _run(["ip", "-n", cpe, "link", "set", "mgmt0", "up"])
        _run(
            [
                "ip",
                "-n",
                cpe,
                "route",
                "add",
                f"{self.server}/32",
                "via",
                str(self.proxy_address("nr")),
                "dev",
                "nr0",
            ]
        )

    def shape(
        self, downlink_mbps: Mapping[str, float], uplink_mbps: Mapping[str, float] | None = None
    ) -> None:
        """htb on each side's egress; replaces any earlier shaping."""
        for access in ACCESSES:
            for side, rates in (("proxy", downlink_mbps), ("cpe", uplink_mbps or downlink_mbps)):
                if access not in rates:
                    continue
                rate = rates[access]
                if not 0 < rate <= 100_000:
                    raise TestbedError(f"{access}: rate {rate} Mbit/s is outside 0..100000")
                ns = self.proxy_ns if side == "proxy" else self.cpe_ns
                device = self.interface(access, side)
                subprocess.run(
                    ["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", device, "root"],
                    capture_output=True,
                    check=False,
                )
                _run(
                    [
                        "ip",
                        "netns",
                        "exec",
                        ns,
                        "tc",
                        "qdisc",
                        "add",
                        "dev",
                        device,
                        "root",
                        "handle",
                        "1:",
                        "htb",
                        "default",
                        "10",
                    ]
                )
                _run(
                    [
                        "ip",
                        "netns",
                        "exec",
                        ns,
                        "tc",
                        "class",
                        "add",
                        "dev",
                        device,
                        "parent",
                        "1:",
                        "classid",
                        "1:10",
                        "htb",
                        "rate",
                        f"{rate:g}mbit",
                        "ceil",
                        f"{rate:g}mbit",
                    ]
                )
                self._set_link_buffer(ns, device, rate, "add")

    def set_rate(self, access: str, side: str, rate_mbps: float) -> None:
        """Change a shaped rate in place (``shape`` first); queues and flows are kept."""
        if not 0 < rate_mbps <= 100_000:
            raise TestbedError(f"{access}: rate {rate_mbps} Mbit/s is outside 0..100000")
        ns = self.proxy_ns if side == "proxy" else self.cpe_ns
        rate = f"{rate_mbps:g}mbit"
        device = self.interface(access, side)
        change = ["tc", "class", "change", "dev", device, "parent", "1:", "classid", "1:10"]
        _run(self.in_ns(ns, [*change, "htb", "rate", rate, "ceil", rate]))
        self._set_link_buffer(ns, device, rate_mbps, "change")

    def set_outage(self, access: str, down: bool) -> None:
        """Drop every packet of the access both ways (``shape`` first), or stop dropping.

        A one-byte fifo under the htb class drops every packet; it needs no classifier or
        netem module, which minimal kernels lack, and the links and routes stay as they are."""
        for side in ("cpe", "proxy"):
            ns = self.proxy_ns if side == "proxy" else self.cpe_ns
            device = self.interface(access, side)
            leaf = _leaf(device)
            if down:
                _run(self.in_ns(ns, ["tc", "qdisc", "replace", *leaf, "bfifo", "limit", "1"]))
                self._dropping.add((ns, device))
                continue
            self._dropping.discard((ns, device))
            limit = self._buffers.get((ns, device))
            if limit is not None:
                refill = ["tc", "qdisc", "replace", *leaf, "bfifo", "limit", f"{limit}"]
                _run(self.in_ns(ns, refill))
            else:
                subprocess.run(
                    self.in_ns(ns, ["tc", "qdisc", "del", *leaf]), capture_output=True, check=False
                )

    def _set_link_buffer(self, ns: str, device: str, rate_mbps: float, verb: str) -> None:
        """The class's leaf: a byte FIFO of ``link_buffer_ms`` at the rate (``add`` with a new
        class, ``change`` with its rate); nothing without ``link_buffer_ms``. A link dropping
        every packet (an outage) keeps dropping: its buffer comes back with its end."""
        if self.link_buffer_ms is None:
            return
        held = rate_mbps * 1e6 / 8 * self.link_buffer_ms / 1000
        limit = max(MIN_LINK_BUFFER_BYTES, round(held))
        self._buffers[(ns, device)] = limit
        if (ns, device) in self._dropping:
            return
        _run(self.in_ns(ns, ["tc", "qdisc", verb, *_leaf(device), "bfifo", "limit", f"{limit}"]))

    def _set_receive_buffer(self, ns: str, default_bytes: int) -> None:
        """tcp_rmem's middle value in the namespace; its largest is raised to it if below."""
        shown = subprocess.run(
            self.in_ns(ns, ["sysctl", "-n", "net.ipv4.tcp_rmem"]),
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if len(shown) != 3:
            raise TestbedError(f"{ns}: net.ipv4.tcp_rmem reads {' '.join(shown)!r}")
        least, largest = int(shown[0]), max(int(shown[2]), default_bytes)
        value = f"net.ipv4.tcp_rmem={least} {default_bytes} {largest}"
        _run(self.in_ns(ns, ["sysctl", "-q", "-w", value]))

    def set_link(self, access: str, up: bool) -> None:
        """Take the access's link down or up at the proxy's end, as a radio link is lost: the
        CPE's interface loses carrier (what its agent watches) and keeps its address, routes
        and MPTCP endpoint; the proxy's end gets its address's route back when it is up."""
        state = "up" if up else "down"
        _run(
            self.in_ns(self.proxy_ns, ["ip", "link", "set", self.interface(access, "proxy"), state])
        )

    def wait_listening(self, port: int, timeout_s: float = 20.0) -> None:
        """A loaded machine can take seconds to start a server in the proxy: wait for it."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            listening = subprocess.run(
                self.in_proxy(["ss", "-Hltn", f"sport = :{port}"]),
                capture_output=True,
                text=True,
                check=False,
            ).stdout
            if listening.strip():
                return
            time.sleep(0.1)
        raise TestbedError(f"nothing listens on port {port} in {self.proxy_ns} after {timeout_s} s")

    def down(self) -> None:
        for ns in (self.cpe_ns, self.proxy_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        # Gone with the namespace, unless the namespace never got its end of the link.
        subprocess.run(
            ["ip", "link", "del", self.management_interface], capture_output=True, check=False
        )

    def in_cpe(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.cpe_ns, *argv]

    def in_proxy(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.proxy_ns, *argv]

    def backup_flags(self) -> dict[str, bool]:
        """Access → whether the CPE's MPTCP endpoint on it is a backup (as the kernel says)."""
        shown = subprocess.run(
            self.in_cpe(["ip", "-j", "mptcp", "endpoint", "show"]), capture_output=True, text=True
        )
        try:
            endpoints = json.loads(shown.stdout or "[]")
        except json.JSONDecodeError as error:
            raise TestbedError(f"ip -j mptcp endpoint show: not JSON: {error}") from error
        by_address = {e.get("address"): bool(e.get("backup")) for e in endpoints}
        return {a: by_address.get(str(self.cpe_address(a)), False) for a in ACCESSES}

    def cpe_agent_config(self, state_file: Path, **extra: object) -> dict[str, object]:
        """An `atsss agent run` configuration for the CPE namespace (mainline backend)."""
        accesses = {
            a: {"interface": self.interface(a, "cpe"), "address": str(self.cpe_address(a))}
            for a in ACCESSES
        }
        return {
            "role": "cpe",
            "accesses": accesses,
            "backend": "mainline",
            "state_file": str(state_file),
            **extra,
        }

    @staticmethod
    def in_ns(ns: str, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", ns, *argv]


def _leaf(device: str) -> list[str]:
    """The qdisc under the htb class that `shape` makes (the link's buffer)."""
    return ["dev", device, "parent", "1:10", "handle", "10:"]


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise TestbedError(f"{' '.join(argv)}: {done.stderr.strip()}")
