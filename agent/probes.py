"""Per-access capacity probes: iperf3 bound to the access's source address, or byte counters.

The paper's active probe: TCP, 10 parallel flows, 5 s, from each access's address toward the
proxy's iperf3 server. The passive one reads the interface's byte counters over an interval
while traffic flows (it costs nothing, and measures what is carried, not what could be).
"""

from __future__ import annotations

import bisect
import json
import subprocess
import time
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

BUSY_RETRIES = 10
BUSY_WAIT_S = 0.5


class ProbeError(RuntimeError):
    pass


class PathDownError(ProbeError):
    """The probe found no route: the path is down."""


@dataclass(frozen=True)
class ProbeResult:
    access: str
    method: str
    mbps: float
    duration_s: float
    bytes: int  # what the probe itself cost (0 for the passive probe)
    direction: str
    # Everything the access's interface carried that way during the probe, per second: the
    # probe plus the data beside it, i.e. the path's capacity while the probe saturated it.
    # None when the interface's counters could not be read.
    path_mbps: float | None = None


def iperf3_probe(
    access: str,
    source: IPv4Address,
    server: IPv4Address,
    seconds: float = 5.0,
    parallel: int = 10,
    reverse: bool = False,
    port: int = 5201,
    prefix: tuple[str, ...] = (),
    interface: str | None = None,
    sysfs: Path = Path("/sys"),
) -> ProbeResult:
    """``reverse``: the server sends (downlink as seen from the CPE). With ``interface``, its
    byte counter over the probe gives ``path_mbps``."""
    counter = (
        sysfs / "class/net" / interface / "statistics" / ("rx_bytes" if reverse else "tx_bytes")
        if interface is not None
        else None
    )
    argv = [
        *prefix,
        "iperf3",
        "-c",
        str(server),
        "-B",
        str(source),
        "-p",
        str(port),
        "-P",
        str(parallel),
        "-t",
        f"{seconds:g}",
        "-J",
    ]
    if reverse:
        argv.append("-R")
    started = time.monotonic()
    counted_from = counted_at = 0.0
    for attempt in range(BUSY_RETRIES + 1):
        counted_from, counted_at = _read_counter(counter), time.monotonic()
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=seconds + 30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ProbeError(f"iperf3 on {access}: {error}") from error
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError as error:
            raise ProbeError(
                f"iperf3 on {access}: no JSON ({done.stderr.strip()[:200]})"
            ) from error
        problem = str(report.get("error", ""))
        # iperf3 serves one test at a time, and between two it closes and reopens its listening
        # socket: "busy" and a refused connection both mean the last test is ending.
        busy = "busy" in problem or "Connection refused" in problem
        if not busy or attempt == BUSY_RETRIES:
            break
        time.sleep(BUSY_WAIT_S)
    counted_to, elapsed_s = _read_counter(counter), time.monotonic() - counted_at
    if "error" in report:
        raise ProbeError(f"iperf3 on {access}: {report['error']}")
    received = report["end"]["sum_received"]
    # The counter spans iperf3's start-up too; its own test time is the sharper divisor.
    test_s = float(received.get("seconds") or elapsed_s)
    path_mbps = (
        (counted_to - counted_from) * 8 / test_s / 1e6
        if counter is not None and counted_to >= counted_from > 0 and test_s > 0
        else None
    )
    return ProbeResult(
        access,
        "iperf3",
        received["bits_per_second"] / 1e6,
        time.monotonic() - started,
        int(report["end"]["sum_sent"]["bytes"]),
        "downlink" if reverse else "uplink",
        path_mbps,
    )


def _read_counter(counter: Path | None) -> float:
    if counter is None:
        return 0.0
    try:
        return float(counter.read_text())
    except (OSError, ValueError):
        return 0.0


def counter_probe(
    access: str, interface: str, seconds: float = 1.0, sysfs: Path = Path("/sys")
) -> ProbeResult:
    """Bytes the interface carried per second over ``seconds`` (rx: downlink at the CPE)."""
    counter = sysfs / "class/net" / interface / "statistics/rx_bytes"
    try:
        first = int(counter.read_text())
        time.sleep(seconds)
        second = int(counter.read_text())
    except (OSError, ValueError) as error:
        raise ProbeError(f"cannot read {counter}: {error}") from error
    return ProbeResult(
        access, "counters", (second - first) * 8 / seconds / 1e6, seconds, 0, "downlink"
    )


def truth_probe(
    cpe_id: str, access: str, seconds: float, reverse: bool, truth_file: Path
) -> ProbeResult:
    """A probe on a dry-run host, answered from the simulator's ground truth: after the
    probe's ``seconds`` (a probe takes its time), the mean capacity the truth gives the CPE's
    path over them, for the direction (``reverse``: downlink). A path down when the probe
    starts or ends has no route, as iperf3 would find."""
    started = time.time()
    time.sleep(seconds)
    ended = time.time()
    key = "capacity_dl_mbps" if reverse else "capacity_ul_mbps"
    periods: list[tuple[float, float, bool]] = []
    try:
        lines = truth_file.read_text().splitlines()
    except OSError as error:
        raise ProbeError(f"probe_truth {truth_file}: {error.strerror}") from error
    for line in lines:
        try:
            entry = json.loads(line)
            if entry["cpe_id"] == cpe_id and entry["access"] == access:
                periods.append(
                    (float(entry["unix_s"]), float(entry[key]), bool(entry["available"]))
                )
        except (ValueError, KeyError, TypeError):
            continue  # a line being written
    periods.sort()
    # each period's line is stamped with its start: the ones in force over the probe
    starts = [at for at, _, _ in periods]
    first = max(0, bisect.bisect_right(starts, started) - 1)
    last = max(first, bisect.bisect_right(starts, ended) - 1)
    window = periods[first : last + 1]
    if not window:
        raise ProbeError(f"probe_truth {truth_file}: nothing on {cpe_id} {access} yet")
    if not window[0][2] or not window[-1][2]:
        raise PathDownError(f"{access}: no route (the path is down)")
    mbps = sum(capacity if up else 0.0 for _, capacity, up in window) / len(window)
    return ProbeResult(
        access,
        "truth",
        mbps,
        ended - started,
        int(mbps * 1e6 / 8 * seconds),
        "downlink" if reverse else "uplink",
        mbps,
    )
