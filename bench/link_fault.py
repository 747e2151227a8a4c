"""The link fault of `atsss bench faults`: an access going down and up under a real MPTCP
transfer, with the CPE's agent on mainline MPTCP (root: network namespaces, tc).

The netns testbed (agent/testbed.py) shaped to nr 30, wifi 100, lifi 1.2 Mbit/s; the agent
holds weights nr 1, wifi 1, lifi 0 (acknowledged, sequence 1); a 22 s MPTCP iperf3 download
runs; after 5 s Wi-Fi's link goes down at the proxy's end (the CPE loses carrier) for 4 s. The
agent reacts by itself (the xApp is not part of this fault). Lost: the agent must still hold
the set it acknowledged, and put Wi-Fi back in use after the return. Recovery: from the link's
return to the first second carrying 90 % of the rate before the fault. Efficiency: carried
over the capacity of the links that were up, from the fault's start to the recovery.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml

from agent.testbed import Testbed
from bench.testbed_bench import MPTCP_PORT, _process, _transfer

RATES_MBPS = {"nr": 30.0, "wifi": 100.0, "lifi": 1.2}
WEIGHTS = {"nr": 1, "wifi": 1, "lifi": 0}
DOWN_AT_S, DOWN_FOR_S, TRANSFER_S = 5.0, 4.0, 22  # 13 s after the return to recover in
AGENT_PORT = 8701


def link_fault_missing() -> str | None:
    """Why the link fault cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc)"
    missing = [tool for tool in ("iperf3", "mptcpize", "tc") if shutil.which(tool) is None]
    return f"needs {', '.join(missing)}" if missing else None


@dataclass(frozen=True)
class LinkFaultOutcome:
    acknowledged: int
    lost: int
    recovery_s: float | None
    efficiency: float | None
    notes: list[str]
    per_second_mbps: list[float]


def run_link_fault() -> LinkFaultOutcome:
    bed = Testbed(prefix="flk", subnet=197)
    bed.down()
    bed.up()
    with contextlib.ExitStack() as stack:
        stack.callback(bed.down)
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="atsss-link-")))
        bed.shape(RATES_MBPS)
        argv = ["mptcpize", "run", "iperf3", "-s", "-p", str(MPTCP_PORT)]
        stack.enter_context(_process(bed.in_proxy(argv), workdir / "server.log"))
        bed.wait_listening(MPTCP_PORT)
        config = bed.cpe_agent_config(
            workdir / "agent-state.json", listen=f"{bed.management_address}:{AGENT_PORT}"
        )
        (workdir / "agent.yaml").write_text(yaml.safe_dump(config))
        run_agent = [sys.executable, "-m", "atsss", "agent", "run", "--config"]
        stack.enter_context(
            _process(bed.in_cpe([*run_agent, str(workdir / "agent.yaml")]), workdir / "agent.log")
        )
        url = f"http://{bed.management_address}:{AGENT_PORT}"
        with httpx.Client(base_url=url, timeout=5) as agent:
            _wait_for(lambda: agent.get("/v1/health").status_code == 200, 30)
            body: dict[str, Any] = {"cpe_id": "cpe-1", "weights": WEIGHTS, "sequence": 1}
            acknowledged = agent.put("/v1/weights/downlink", json=body)
            acknowledged.raise_for_status()
            client = ["mptcpize", "run", "iperf3", "-c", str(bed.server), "-p", str(MPTCP_PORT)]
            client += ["-t", str(TRANSFER_S), "-i", "1", "--forceflush", "-f", "m", "-R"]
            marks: dict[str, float] = {}

            def fault() -> None:
                time.sleep(DOWN_AT_S)
                marks["down"] = time.monotonic()
                bed.set_link("wifi", False)
                time.sleep(DOWN_FOR_S)
                marks["up"] = time.monotonic()
                bed.set_link("wifi", True)

            started = time.monotonic()
            maker = threading.Thread(target=fault, daemon=True)
            maker.start()
            intervals, failure = _transfer(bed.in_cpe(client), TRANSFER_S + 30)
            maker.join(timeout=DOWN_AT_S + DOWN_FOR_S + 5)
            held = agent.get("/v1/weights/downlink", params={"cpe_id": body["cpe_id"]}).json()
        log = (workdir / "agent.log").read_text()
    if not intervals or "down" not in marks or "up" not in marks:
        raise RuntimeError(f"the transfer or the fault did not run: {failure}")
    return _judge(intervals, marks, started, held, log)


def _judge(
    intervals: list[tuple[float, float, float]],
    marks: dict[str, float],
    started: float,
    held: dict[str, object],
    log: str,
) -> LinkFaultOutcome:
    # Each interval's line arrives as it ends: (end on the monotonic clock, Mbit/s).
    seconds = [(arrived, mbps) for arrived, _, mbps in intervals]
    before = [mbps for end, mbps in seconds if started + 1.5 < end <= marks["down"]]
    rate_before = float(np.mean(before)) if before else 0.0
    recovered_at = next(
        (end for end, mbps in seconds if end > marks["up"] + 1.0 and mbps >= 0.9 * rate_before),
        None,
    )
    end = recovered_at if recovered_at is not None else seconds[-1][0]
    during = [(e, mbps) for e, mbps in seconds if marks["down"] < e <= end]
    capacity = [
        RATES_MBPS["nr"]
        if marks["down"] < e - 0.5 < marks["up"]
        else RATES_MBPS["nr"] + RATES_MBPS["wifi"]
        for e, _ in during
    ]
    carried = [mbps for _, mbps in during]
    applied = held.get("applied") if isinstance(held, dict) else None
    notes = []
    lost = 0
    if not isinstance(applied, dict) or applied.get("sequence") != 1:
        lost += 1
        notes.append(f"the agent holds {applied} instead of sequence 1")
    if held.get("effective") != WEIGHTS:
        lost += 1
        notes.append(f"after the return the kernel holds {held.get('effective')}, not {WEIGHTS}")
    if "carrier lost on wifi" not in log:
        notes.append("the agent did not see the carrier go")
    notes.append(f"{rate_before:.0f} Mbit/s before the fault; the agent took wifi out and back")
    if recovered_at is None:
        # what the agent did about it, for whoever has to find out why
        said = [line for line in log.splitlines() if "wifi" in line or "endpoint" in line]
        notes.append("agent log: " + " | ".join(said[-12:]))
    return LinkFaultOutcome(
        acknowledged=1,
        lost=lost,
        recovery_s=None if recovered_at is None else max(0.0, recovered_at - 1.0 - marks["up"]),
        efficiency=float(sum(carried) / sum(capacity)) if capacity else None,
        notes=notes,
        per_second_mbps=[round(mbps, 1) for _, mbps in seconds],
    )


def _wait_for(predicate: object, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if predicate():  # type: ignore[operator]
                return
        time.sleep(0.2)
    raise RuntimeError(f"the agent did not answer within {timeout_s:.0f} s")
