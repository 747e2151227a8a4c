"""Real Linux MPTCP in network namespaces: probes against shaped paths, and the mainline lever.

Needs root and network namespaces (CI has both); the testbed is always torn down.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from agent.backends.mainline import MainlineBackend
from agent.backends.wrr import run_command
from agent.config import load_config
from agent.probes import iperf3_probe
from agent.service import WeightService, WeightUpdate
from agent.testbed import ACCESSES, Testbed
from core.domain import Direction
from tests.helpers import host_network

RATES = {"nr": 34.2, "wifi": 119.0, "lifi": 1.21}  # the paper's capacities, scaled by 1/10
PROBE_PORT, MPTCP_PORT = 5201, 5202


@functools.cache
def _netns_usable() -> bool:
    if os.geteuid() != 0:
        return False
    # A name of this process's own: the suite's workers each ask at once, and a shared name
    # made the one that came second skip every namespace test as if it were not root.
    name = f"atsss-probe-check-{os.getpid()}"
    probe = subprocess.run(["ip", "netns", "add", name], capture_output=True, check=False)
    subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
    return probe.returncode == 0


pytestmark = [
    pytest.mark.skipif(not _netns_usable(), reason="needs root and network namespaces"),
    host_network,
]


@pytest.fixture(scope="module")
def testbed() -> Iterator[Testbed]:
    bed = Testbed(prefix=f"t{os.getpid() % 10000}", subnet=90 + os.getpid() % 100)
    bed.down()
    bed.up()
    servers = []
    try:
        bed.shape(RATES, RATES)
        servers.append(
            subprocess.Popen(
                bed.in_proxy(["iperf3", "-s", "-p", str(PROBE_PORT)]),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        servers.append(
            subprocess.Popen(
                bed.in_proxy(["mptcpize", "run", "iperf3", "-s", "-p", str(MPTCP_PORT)]),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        for port in (PROBE_PORT, MPTCP_PORT):
            bed.wait_listening(port)
        yield bed
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)
        bed.down()
    assert not bed.exists()


def test_probes_measure_the_shaped_rates(testbed: Testbed) -> None:
    for access in ACCESSES:
        result = iperf3_probe(
            access,
            testbed.cpe_address(access),
            testbed.server,
            seconds=3,
            parallel=10,
            port=PROBE_PORT,
            prefix=tuple(testbed.in_cpe([])),
        )
        # Never above the shaped rate, and not far below: the links are shaped, not the CPU,
        # and a machine busy with the rest of the suite only takes throughput away (Wi-Fi
        # 107.0 of 119 Mbit/s in one fresh-clone run, as the agent's probe below once read
        # 106), so "not far" is three quarters, as there.
        assert 0.75 * RATES[access] <= result.mbps <= 1.10 * RATES[access], (access, result)
        assert result.bytes > 0
        assert result.duration_s >= 3


def cpe_agent_config(testbed: Testbed, tmp_path: Path, extra: dict[str, object]) -> Path:
    config = tmp_path / "cpe.yaml"
    config.write_text(yaml.safe_dump(testbed.cpe_agent_config(tmp_path / "state.json", **extra)))
    return config


def mptcp_uplink_mbps(testbed: Testbed, seconds: int = 4) -> float:
    done = subprocess.run(
        testbed.in_cpe(
            [
                "mptcpize",
                "run",
                "iperf3",
                "-c",
                str(testbed.server),
                "-p",
                str(MPTCP_PORT),
                "-t",
                str(seconds),
                "-J",
            ]
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report = json.loads(done.stdout)
    assert "error" not in report, report.get("error")
    return float(report["end"]["sum_received"]["bits_per_second"]) / 1e6


def test_mainline_weight_zero_puts_the_slow_path_on_backup_and_the_aggregate_rises(
    testbed: Testbed, tmp_path: Path
) -> None:
    config = cpe_agent_config(testbed, tmp_path, {})

    def apply(weights: str) -> None:
        done = subprocess.run(
            testbed.in_cpe(
                [
                    sys.executable,
                    "-m",
                    "atsss",
                    "agent",
                    "apply",
                    "--config",
                    str(config),
                    "--direction",
                    "up",
                    "--weights",
                    weights,
                ]
            ),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    apply("nr=30,wifi=100,lifi=1")
    assert testbed.backup_flags() == {"nr": False, "wifi": False, "lifi": False}
    all_active = mptcp_uplink_mbps(testbed)
    apply("nr=30,wifi=100,lifi=0")
    assert testbed.backup_flags() == {"nr": False, "wifi": False, "lifi": True}
    slow_on_backup = mptcp_uplink_mbps(testbed)
    most = 0.7 * (RATES["nr"] + RATES["wifi"])
    if slow_on_backup <= most:
        # The links are shaped, not the CPU: a busy machine can only take throughput away
        # (106.3 against 107.2 Mbit/s once, under a parallel test run). Measured once more,
        # the better of the two counts; LiFi left active would drag both far below.
        slow_on_backup = max(slow_on_backup, mptcp_uplink_mbps(testbed))
    assert slow_on_backup > 2 * all_active, (all_active, slow_on_backup)
    assert slow_on_backup > most, slow_on_backup


def test_probe_through_the_agents_http_api(testbed: Testbed, tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t0ken\n")
    config = cpe_agent_config(
        testbed,
        tmp_path,
        {
            "probe_server": str(testbed.server),
            "listen": "127.0.0.1:8711",
            "token_file": str(tmp_path / "token"),
        },
    )
    agent = subprocess.Popen(
        testbed.in_cpe([sys.executable, "-m", "atsss", "agent", "run", "--config", str(config)]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = (
        "import httpx, json, time\n"
        "for _ in range(100):\n"
        "    try:\n"
        "        httpx.get('http://127.0.0.1:8711/v1/health'); break\n"
        "    except httpx.HTTPError: time.sleep(0.1)\n"
        "r = httpx.post('http://127.0.0.1:8711/v1/probes', json={'access': 'wifi', 'seconds': 2},"
        " headers={'Authorization': 'Bearer t0ken'}, timeout=60)\n"
        "print(json.dumps(r.json()))\n"
    )
    try:
        done = subprocess.run(
            testbed.in_cpe([sys.executable, "-c", client]),
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    finally:
        agent.terminate()
        agent.wait(timeout=30)
    probe = json.loads(done.stdout)["probe"]
    assert probe["access"] == "wifi"
    assert probe["method"] == "iperf3"
    # The Wi-Fi path's shaped rate (NR's is 34.2, LiFi's 1.21): never above it, and not far
    # below. A 2 s TCP probe on a machine busy with the rest of the suite can fall a tenth
    # short (106 of 119 Mbit/s in one CI run), so "not far" is three quarters.
    assert 0.75 * RATES["wifi"] <= probe["mbps"] <= 1.10 * RATES["wifi"]
    # Nothing else crosses the path, so the interface carried about what the probe did.
    assert 0.75 * RATES["wifi"] <= probe["path_mbps"] <= 1.15 * RATES["wifi"]
    assert probe["bytes"] > 0


def test_testbed_commands(testbed: Testbed) -> None:
    prefix = f"c{os.getpid() % 10000}"
    run = [sys.executable, "-m", "atsss", "testbed"]
    try:
        up = subprocess.run(
            [*run, "up", "--prefix", prefix], capture_output=True, text=True, timeout=60
        )
        assert up.returncode == 0, up.stderr
        again = subprocess.run(
            [*run, "up", "--prefix", prefix], capture_output=True, text=True, timeout=60
        )
        assert again.returncode == 2
        assert "exists already" in again.stderr
        shaped = subprocess.run(
            [*run, "shape", "--prefix", prefix, "--scenario", "paper-static", "--scale", "0.1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shaped.returncode == 0, shaped.stderr
        classes = subprocess.run(
            ["ip", "netns", "exec", f"{prefix}-proxy", "tc", "class", "show", "dev", "wifi1"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "rate 119Mbit" in classes.stdout
        bad = subprocess.run(
            [*run, "shape", "--prefix", prefix, "--rates", "nr=0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode == 2
        assert "outside" in bad.stderr
    finally:
        subprocess.run([*run, "down", "--prefix", prefix], capture_output=True, timeout=60)
    assert not Testbed(prefix=prefix).exists()


def test_agent_prober_measures_a_path_through_a_real_agent(
    testbed: Testbed, tmp_path: Path
) -> None:
    """The xApp's AgentProber, in the host's namespace, over the management link to the CPE's
    agent, which runs iperf3 over the shaped path and counts the interface's bytes."""
    from core.domain import Direction, ProbeOutcome, ProbeRequest
    from xapp.adapters.agent_http import AgentEndpoint
    from xapp.adapters.agent_prober import AgentProber

    listen = f"{testbed.management_address}:8712"
    config = cpe_agent_config(
        testbed, tmp_path, {"probe_server": str(testbed.server), "listen": listen}
    )
    agent = subprocess.Popen(
        testbed.in_cpe([sys.executable, "-m", "atsss", "agent", "run", "--config", str(config)]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    prober = AgentProber({"cpe-1": AgentEndpoint(f"http://{listen}")})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://{listen}/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        prober.start(ProbeRequest("cpe-1", "wifi", Direction.DOWNLINK, 2.0, 4, "test"), 100.0)
        outcomes: list[ProbeOutcome] = []
        while not outcomes and time.monotonic() < deadline + 30:
            outcomes = list(prober.collect(0.0))
            time.sleep(0.1)
    finally:
        prober.close()
        agent.terminate()
        agent.wait(timeout=30)
    assert len(outcomes) == 1, "no probe result"
    outcome = outcomes[0]
    assert not outcome.path_down, outcome.error
    assert outcome.capacity_mbps == pytest.approx(RATES["wifi"], rel=0.15), outcome
    assert outcome.probe_mbit > 0


def _subflow_flags(testbed: Testbed, side: str, cpe_address: str) -> list[str]:
    """The MPTCP flags `ss` shows for each established subflow from a CPE address (in the CPE
    a lowercase b is the backup priority it asked for, in the proxy a B the one it heard)."""
    run_in = testbed.in_cpe if side == "cpe" else testbed.in_proxy
    shown = subprocess.run(
        run_in(["ss", "-tinH", "state", "established"]), capture_output=True, text=True
    ).stdout
    flags = []
    for record in re.split(r"\n(?=\S)", shown):
        plain = record.replace("[::ffff:", "").replace("]", "")
        if re.search(re.escape(cpe_address) + r"[%:]", plain):
            found = re.search(r"tcp-ulp-mptcp flags:(\S+)", record)
            if found:
                flags.append(found.group(1))
    return flags


def test_a_path_back_after_a_carrier_loss_carries_as_its_weight_says(
    testbed: Testbed, tmp_path: Path
) -> None:
    """The agent puts a returning access's endpoint back and applies the xApp's weight at once;
    a priority changed while the kernel is still joining that subflow never reaches it (no
    MP_PRIO before the join completes), so Wi-Fi, weighted 100, stayed a backup subflow at both
    ends and carried nothing while NR was active (seen on the testbed as seconds of NR alone)."""
    config = load_config(cpe_agent_config(testbed, tmp_path, {}))
    backend = MainlineBackend("cpe", runner=lambda argv: run_command(testbed.in_cpe(argv)))
    service = WeightService(config, backend)
    service.apply(WeightUpdate("cpe-1", Direction.DOWNLINK, {"nr": 30, "wifi": 100, "lifi": 0}, 1))
    wifi = str(testbed.cpe_address("wifi"))
    transfer = subprocess.Popen(
        testbed.in_cpe(
            [
                *("mptcpize", "run", "iperf3", "-c", str(testbed.server)),
                *("-p", str(MPTCP_PORT), "-t", "12", "-R"),
            ]
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.5)
        assert _subflow_flags(testbed, "cpe", wifi), "no Wi-Fi subflow before the loss"
        for _ in range(3):  # the race is lost nearly every time; three returns make sure
            testbed.set_link("wifi", False)
            service.set_carrier("wifi", False)
            time.sleep(0.5)
            testbed.set_link("wifi", True)
            service.set_carrier("wifi", True)
            deadline = time.monotonic() + 5
            while not _subflow_flags(testbed, "cpe", wifi) and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(1.5)  # the agent's own check after a return
            at_cpe, at_proxy = (_subflow_flags(testbed, s, wifi) for s in ("cpe", "proxy"))
            assert at_cpe, "no Wi-Fi subflow at the CPE after the return"
            assert at_proxy, "no Wi-Fi subflow at the proxy after the return"
            assert not any("b" in f for f in at_cpe), at_cpe
            assert not any("B" in f for f in at_proxy), at_proxy
    finally:
        transfer.kill()
        transfer.wait()
        testbed.set_link("wifi", True)


def _buffer_limit(bed: Testbed, ns: str, device: str) -> str:
    """The byte limit of the FIFO under the device's htb class, as tc shows it."""
    shown = subprocess.run(
        bed.in_ns(ns, ["tc", "qdisc", "show", "dev", device, "parent", "1:10"]),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = re.search(r"bfifo 10: .*limit (\S+)", shown)
    assert found is not None, shown
    return found.group(1)


def test_link_buffers_follow_the_rate_and_the_receive_buffer_is_set() -> None:
    """With the realistic settings, each shaped link buffers 50 ms of its rate (at least 30 kB),
    through rate changes and an outage; both namespaces' default receive buffer is 2 MiB."""
    pid = os.getpid()
    bed = Testbed(
        prefix=f"b{pid % 10000}",
        subnet=190 + pid % 50,
        link_buffer_ms=50.0,
        receive_buffer_bytes=2 * 1024 * 1024,
    )
    bed.down()
    bed.up()
    try:
        bed.shape(RATES, RATES)
        # 34.2 Mbit/s × 50 ms = 213,750 bytes; LiFi's 7,562 is raised to the 30 kB floor.
        assert _buffer_limit(bed, bed.proxy_ns, "nr1") == "213750b"
        assert _buffer_limit(bed, bed.cpe_ns, "wifi0") == "743750b"
        assert _buffer_limit(bed, bed.proxy_ns, "lifi1") == "30000b"
        bed.set_rate("nr", "proxy", 10.0)
        assert _buffer_limit(bed, bed.proxy_ns, "nr1") == "62500b"
        bed.set_outage("nr", True)
        assert _buffer_limit(bed, bed.proxy_ns, "nr1") == "1b"
        bed.set_rate("nr", "proxy", 20.0)  # while it drops everything, it stays dropping
        assert _buffer_limit(bed, bed.proxy_ns, "nr1") == "1b"
        bed.set_outage("nr", False)
        assert _buffer_limit(bed, bed.proxy_ns, "nr1") == "125000b"
        for ns in (bed.cpe_ns, bed.proxy_ns):
            rmem = subprocess.run(
                bed.in_ns(ns, ["sysctl", "-n", "net.ipv4.tcp_rmem"]),
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            assert int(rmem[1]) == 2 * 1024 * 1024
            assert int(rmem[2]) >= int(rmem[1])
    finally:
        bed.down()
    assert not bed.exists()
