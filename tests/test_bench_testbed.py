"""`atsss bench testbed` end to end, as root: the whole system on real MPTCP.

The simulator, the xApp (standalone E2, live control loop) and the CPE agent run as their own
processes; the xApp must put the slow LiFi path on backup through the agent (mainline MPTCP)
and the transfer must then carry most of the shaped capacity. Throughput figures are the
benchmark's to print; this test checks the behaviour, with a floor far below the benchmark's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import host_network
from tests.test_testbed import _netns_usable

pytestmark = [
    pytest.mark.skipif(not _netns_usable(), reason="needs root and network namespaces"),
    host_network,
]


def bench(*args: str) -> dict[str, object]:
    prefix = f"b{os.getpid() % 10000}"
    done = subprocess.run(
        [sys.executable, "-m", "atsss", "bench", "testbed", "--prefix", prefix, "--json", *args],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    leftover = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"{prefix}-cpe" not in leftover
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_xapp_puts_the_slow_path_on_backup_and_the_transfer_uses_the_rest() -> None:
    result = bench("--scenario", "paper-static", "--scale", "0.1", "--duration", "8", "--step", "4")
    backup = result["backup"]
    assert isinstance(backup, dict)
    with_xapp = backup["xapp"]
    assert with_xapp, "no endpoint flags were recorded"
    assert all(flags["lifi"] and not flags["nr"] and not flags["wifi"] for flags in with_xapp)
    assert not any(any(flags.values()) for flags in backup["all-active"])
    ratio = result["ratio"]
    assert isinstance(ratio, dict)
    assert ratio["xapp"] > 0.6, result
    assert result["shaped_mbps"] == pytest.approx(34.2 + 119.0 + 1.21, rel=0.01)
    # what the pushes cost the connection, counted by the kernel and from the agent's log
    churn = result["churn"]
    assert isinstance(churn, dict)
    assert set(churn) == {"xapp"}
    assert churn["xapp"]["seconds"] >= 8
    # static capacities: LiFi went to backup before the transfer and stayed there
    assert churn["xapp"]["flips"] == 0
    assert churn["xapp"]["mp_prio_sent"] >= 0
