"""The live part of ``atsss demo``: the xApp as it runs, against the simulator and two agents.

Processes on loopback, no root: a CPE agent and an MPTCP proxy agent (dry-run backend: they
take and hold weights, the kernel is left alone), ``atsss xapp serve`` in standalone mode with
the real estimators, and the KPM simulator, which also writes its ground truth. While it runs,
the agents are asked what they hold; afterwards every period's truth is scored with the weights
in force at that moment: the WRR fluid model's aggregate over the sum of the capacities (what
MPTCP reaches with those weights when nothing else is in the way).
"""

from __future__ import annotations

import bisect
import contextlib
import json
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.live_system import (
    FIRST_PUSH,
    Agent,
    agent_process,
    start_simulator,
    start_xapp,
    write_xapp_config,
)
from core.fluid import aggregate_mbps

ACCESS_ORDER = ("nr", "wifi", "lifi")
DIRECTIONS = {"downlink": "capacity_dl_mbps", "uplink": "capacity_ul_mbps"}


@dataclass
class WeightHistory:
    """What each agent held, as seen by polling: (unix time, weights) per CPE and direction."""

    seen: dict[tuple[str, str], list[tuple[float, dict[str, int], int]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def record(self, cpe_id: str, direction: str, held: dict[str, object] | None) -> None:
        if held is None:
            return
        applied = held["applied"]
        assert isinstance(applied, dict)
        sequence = int(applied["sequence"])
        history = self.seen[(cpe_id, direction)]
        if not history or history[-1][2] != sequence:
            history.append((float(applied["applied_at_s"]), dict(applied["weights"]), sequence))

    def at(self, cpe_id: str, direction: str, unix_s: float) -> dict[str, int] | None:
        history = self.seen.get((cpe_id, direction), [])
        index = bisect.bisect_right([t for t, _, _ in history], unix_s) - 1
        return history[index][1] if index >= 0 else None


def poll_agents(
    agents: dict[str, Agent],
    cpe_id: str,
    history: WeightHistory,
    stop: threading.Event,
    interval_s: float = 0.25,
) -> None:
    """Until ``stop``: what each agent (direction → agent) holds for the CPE, into
    ``history``; each set is placed at the time its agent says it applied it."""
    while not stop.wait(interval_s):
        for direction, agent in agents.items():
            with contextlib.suppress(Exception):
                history.record(cpe_id, direction, agent.weights(direction, cpe_id))


def score(truth_lines: list[dict[str, object]], history: WeightHistory) -> dict[str, object]:
    """Per direction: time-averaged efficiency with the pushed weights, and with round robin
    (the kernel's weights before the xApp's first push and for subflows no rule matches)."""
    periods: dict[tuple[float, str], dict[str, dict[str, object]]] = defaultdict(dict)
    for line in truth_lines:
        periods[(float(line["unix_s"]), str(line["cpe_id"]))][str(line["access"])] = line  # type: ignore[arg-type]
    result: dict[str, object] = {}
    for direction, key in DIRECTIONS.items():
        carried = rr_carried = total = 0.0
        for (unix_s, cpe_id), accesses in sorted(periods.items()):
            names = [a for a in ACCESS_ORDER if a in accesses]
            capacities = [
                float(accesses[a][key]) if accesses[a]["available"] else 0.0  # type: ignore[arg-type]
                for a in names
            ]
            weights = history.at(cpe_id, direction, unix_s) or dict.fromkeys(names, 1)
            carried += aggregate_mbps([weights.get(a, 0) for a in names], capacities)
            rr_carried += aggregate_mbps([1] * len(names), capacities)
            total += sum(capacities)
        result[direction] = {
            "efficiency": carried / total if total else 0.0,
            "round_robin": rr_carried / total if total else 0.0,
            "pushes": sum(len(h) for (_, d), h in history.seen.items() if d == direction),
        }
    return result


def run_live_demo(
    console: Console, scenario: str = "paper-dynamic", duration_s: float = 60.0
) -> None:
    console.print(
        f"[bold]The live system[/bold]: simulator, `atsss xapp serve` (fused estimator) and two "
        f"dry-run agents as processes on loopback, {duration_s:g} s of {scenario}"
    )
    with tempfile.TemporaryDirectory(prefix="atsss-demo-") as folder:
        workdir = Path(folder)
        history = WeightHistory()
        with (
            agent_process(workdir, "cpe", "cpe", ["cpe-1"]) as cpe,
            agent_process(workdir, "proxy", "proxy", ["cpe-1"]) as proxy,
        ):
            config = write_xapp_config(workdir, scenario, {"cpe-1": cpe.url}, proxy.url)
            xapp = start_xapp(workdir, config)
            truth = workdir / "truth.jsonl"
            simulator = start_simulator(workdir, scenario, xapp.e2_port, duration_s, config, truth)
            stop = threading.Event()
            poller = threading.Thread(
                target=poll_agents,
                args=({"downlink": proxy, "uplink": cpe}, "cpe-1", history, stop),
                daemon=True,
            )
            poller.start()
            started = time.monotonic()
            try:
                with console.status("running …") as status:
                    while simulator.poll() is None:
                        time.sleep(1)
                        down = history.seen.get(("cpe-1", "downlink"))
                        shown = "-".join(str(w) for w in down[-1][1].values()) if down else "none"
                        status.update(
                            f"{time.monotonic() - started:.0f} s: downlink weights {shown}"
                        )
            finally:
                stop.set()
                poller.join(timeout=5)
                simulator.kill()
                xapp.terminate_within(5)
            log = xapp.log()
        lines = [json.loads(line) for line in truth.read_text().splitlines() if line]
    first = FIRST_PUSH.search(log)
    result = score(lines, history)
    table = Table(title=f"cpe-1 on {scenario}, live", title_justify="left")
    for column in (
        "direction",
        "weight pushes",
        "last weights nr-wifi-lifi",
        "efficiency",
        "round robin",
    ):
        table.add_column(column, justify="right" if column != "direction" else "left")
    for direction in DIRECTIONS:
        figures = result[direction]
        assert isinstance(figures, dict)
        seen = history.seen.get(("cpe-1", direction), [])
        last = "-".join(str(seen[-1][1].get(a, 0)) for a in ACCESS_ORDER) if seen else "none"
        table.add_row(
            direction,
            str(figures["pushes"]),
            last,
            f"{figures['efficiency']:.3f}",
            f"{figures['round_robin']:.3f}",
        )
    table.caption = (
        "Efficiency: the WRR fluid model's aggregate with the weights each agent held, over the "
        "sum of the true capacities, averaged over the simulator's periods (before the first "
        "push the kernel's round robin counts)."
        + (
            f" First weights {first.group(2)} s after the last access's first report."
            if first
            else ""
        )
    )
    console.print(table)
