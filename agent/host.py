"""Facts about the host the agent runs on."""

from __future__ import annotations

import json
import subprocess
from ipaddress import IPv4Address


def local_addresses() -> set[IPv4Address]:
    """The IPv4 addresses configured on this host (its network namespace)."""
    done = subprocess.run(
        ["ip", "-j", "-4", "addr", "show"], capture_output=True, text=True, check=False
    )
    try:
        interfaces = json.loads(done.stdout or "[]")
    except json.JSONDecodeError:
        return set()
    return {
        IPv4Address(info["local"])
        for interface in interfaces
        for info in interface.get("addr_info", [])
        if "local" in info
    }
