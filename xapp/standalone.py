"""The xApp without a RIC: the standalone E2 termination, fed by the simulator's nodes.

CPE identities and E2 node names follow the scenario naming convention
(core/scenario/e2_identities.py) the simulator uses too, so a
scenario file is all the configuration both sides need. Received KPI samples are summarised
while running and can be written as JSON lines.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from core.domain import KpiSample
from core.scenario.e2_identities import DEFAULT_SUBSCRIBED, e2_cpes, node_name, subscribed
from core.scenario.model import Scenario
from xapp.adapters.memory_store import MemoryStateStore
from xapp.e2.config import E2NodeConfig, E2Settings
from xapp.e2.indications import IndicationProcessor
from xapp.e2.stream import StandaloneE2Termination


@dataclass
class ReceivedStats:
    samples: int = 0
    by_access: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    cpes: set[str] = field(default_factory=set)


def run_standalone(
    scenario: Scenario,
    host: str,
    port: int,
    duration_s: float | None,
    samples_out: TextIO | None = None,
    report_period_ms: int = 1000,
    on_ready: Callable[[tuple[str, int]], None] = lambda address: None,
    on_summary: Callable[[ReceivedStats, dict[str, str]], None] = lambda stats, status: None,
    on_samples: Callable[[Sequence[KpiSample]], None] = lambda samples: None,
) -> ReceivedStats:
    """Serve E2 until ``duration_s`` has passed or SIGTERM; ``on_samples`` gets every batch of
    decoded samples (the live control loop's buffer), from the transport's threads."""
    settings = E2Settings(
        nodes=e2_node_configs(
            scenario.access_names,
            report_period_ms,
            measurements={a: subscribed(scenario, a) for a in scenario.access_names},
        )
    )
    processor = IndicationProcessor(e2_cpes(scenario))
    stats = ReceivedStats()
    lock = threading.Lock()

    def received(samples: Sequence[KpiSample]) -> None:
        on_samples(samples)
        with lock:
            stats.samples += len(samples)
            for sample in samples:
                stats.by_access[sample.access] += 1
                stats.cpes.add(sample.cpe_id)
                if samples_out is not None:
                    samples_out.write(json.dumps(_sample_json(sample)) + "\n")

    termination = StandaloneE2Termination(
        settings, processor, received, MemoryStateStore(), host, port
    )
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    termination.start()
    on_ready(termination.address)
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            stop.wait(1.0 if deadline is None else min(1.0, max(0.0, deadline - time.monotonic())))
            status = {
                n: f"{r.status}{' (' + r.cause + ')' if r.cause else ''}"
                for n, r in termination.records().items()
            }
            with lock:
                on_summary(stats, status)
    except KeyboardInterrupt:
        pass
    finally:
        termination.stop()
        signal.signal(signal.SIGTERM, previous)
        if samples_out is not None:
            samples_out.flush()
    return stats


def e2_node_configs(
    accesses: Sequence[str],
    report_period_ms: int = 1000,
    per_ue: bool = True,
    measurements: Mapping[str, Sequence[str]] | None = None,
) -> tuple[E2NodeConfig, ...]:
    """What the standalone xApp subscribes to on a scenario's nodes: ``measurements`` per
    access where given (what a node that offers less does offer), else the usual few."""
    chosen = measurements or {}
    return tuple(
        E2NodeConfig(
            node=node_name(access),
            access=access,
            measurements=tuple(chosen.get(access, DEFAULT_SUBSCRIBED[access])),
            report_period_ms=report_period_ms,
            report="per-ue" if per_ue else "cell",
        )
        for access in accesses
    )


def _sample_json(sample: KpiSample) -> dict[str, object]:
    return {
        "cpe_id": sample.cpe_id,
        "access": sample.access,
        "direction": sample.direction.value,
        "time_s": round(sample.time_s, 3),
        "period_s": sample.period_s,
        "throughput_mbps": sample.throughput_mbps,
        "available": sample.available,
        "measurements": dict(sample.measurements),
    }
