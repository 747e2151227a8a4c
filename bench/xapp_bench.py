"""`atsss bench xapp`: the xApp's processing path without the network, at a given number of CPEs.

E2SM-KPM per-UE indications (Format 3, at most ``chunk`` UEs each, as the simulator's nodes
send them) are encoded beforehand from the simulator's own reports for a scaled `many-cpes`
site; then, for every reporting period, they are decoded into KPI samples, the control loop
decides for every CPE and direction as the service builds it (``service_loop``; pushes to a sink
that only counts), and the step's pushes are recorded as the service records them (counted,
remembered, logged in its JSON lines, which go nowhere here, and counted in its metrics).
Figures are per core (one process, one thread), for one replica's budget.

``run_replicas`` runs the same in N processes at once, each on its own share of the CPEs (as
replicas sharing the CPEs through their leases would), and reports the CPEs all of them
processed per second of wall time: whether N replicas handle N times the CPEs.
"""

from __future__ import annotations

import collections
import io
import logging
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from prometheus_client import CollectorRegistry

from core.collector import PassesBetweenSteps, settle_for_service
from core.domain import Cpe, Direction, KpiSample, ProbeOutcome, ProbeRequest, WeightSet
from core.logs import JsonLines
from core.sample_batch import SampleBacklog
from core.scenario.e2_identities import DEFAULT_SUBSCRIBED, e2_cpes, node_name
from core.scenario.load import load_scenario, parse_scenario
from core.scenario.model import Scenario
from e2sim.node import SimulatedNode
from e2sim.world import SimWorld
from kpm import e2ap
from kpm.builders import header
from kpm.codec import KpmPdu, codec_for
from kpm.fast_encode import encode_format3
from kpm.versions import KpmVersion
from models.runtime import every_table_made
from xapp.adapters.memory_store import MemoryStateStore
from xapp.control_loop import ControlLoop, StepOutcome
from xapp.e2 import indications
from xapp.e2.config import E2NodeConfig
from xapp.e2.indications import IndicationProcessor
from xapp.estimators.selection import EstimatorSelection, EstimatorSettings
from xapp.live import STEP_PART, LiveSettings
from xapp.metrics import XappMetrics
from xapp.operator.state import OperatorState
from xapp.policy.weight_policy import make_policy
from xapp.ports import KpiSource, WeightSink
from xapp.push_record import PushRecord, pushes_and_failures

VERSION = KpmVersion.V3_00


@dataclass(frozen=True)
class XappBenchRow:
    cpes: int
    indications: int  # per period
    ue_reports_per_s: float  # decoding into samples, one core
    decode_p50_ms: float  # per indication
    decode_p99_ms: float
    decisions_per_s: float  # one per CPE and direction
    decision_p50_ms: float
    decision_p99_ms: float
    period_busy_s: float  # decode + decide, per reporting period (the second half's median)
    # The process's CPU time (every thread's) in the same periods: above period_busy_s where
    # a library works on threads of its own.
    period_cpu_s: float
    cores_needed: float  # the larger of period_busy_s and period_cpu_s, over the period
    resident_kib_per_cpe: float
    pushes: int  # weight sets the loop sent, over all periods
    decisions: int
    estimator: str = "fused"
    # Milliseconds per reporting period in each stage of the path (STAGES, in order).
    stage_ms: dict[str, float] = field(default_factory=dict)


# The stages of the processing path, in the order a report goes through them.
STAGES = (
    "E2AP",  # the RICindication wrapper
    "KPM",  # the indication header and message
    "samples",  # records to KPI samples per CPE
    "estimator update",  # the period's samples into the estimators
    "state + estimate",  # per CPE and direction: weights in force, override; the beliefs
    "policy",  # the weights for every CPE and direction, in one batch
    "conclude + push",  # hysteresis, the sets to the sink, saved; the pushes recorded
)


class _Stopwatch:
    """Seconds spent in each stage over the run, by wrapping the function that does it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)

    def timed(self, stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[stage] += time.perf_counter() - started

        return run


class _Queue:
    """The period's samples as the E2 source keeps them for the loop: in the pieces (batches)
    they were decoded in, unbounded."""

    def __init__(self) -> None:
        self._backlog = SampleBacklog(max_samples=sys.maxsize)

    def keep(self, samples: Sequence[KpiSample]) -> None:
        self._backlog.keep(samples)

    def poll(self, now_s: float) -> Sequence[KpiSample]:
        return self._backlog.take()


class _CountingSink:
    def __init__(self) -> None:
        self.pushes = 0

    def push(self, weight_set: WeightSet) -> None:
        self.pushes += 1


def scaled_site(cpes: int, duration_s: float = 30.0) -> Scenario:
    """`many-cpes` with ``cpes`` CPEs, ``duration_s`` long (at least 30 s)."""
    shipped = load_scenario("many-cpes")
    document: dict[str, Any] = yaml.safe_load(Path(shipped.source).read_text())
    document["cpes"][0]["count"] = cpes
    document["duration_s"] = max(30, math.ceil(duration_s))
    return parse_scenario(document, f"many-cpes × {cpes}")


def encoded_periods(
    scenario: Scenario, periods: int, period_s: float, chunk: int
) -> list[list[tuple[str, bytes]]]:
    """Per period, (node, RIC indication PDU) pairs, as the nodes would send them."""
    world = SimWorld(scenario, period_s)
    codec = codec_for(VERSION)
    out = []
    for tick in range(periods):
        batch = []
        for access in world.accesses:
            truth = world.truth(tick, access)
            positions = [scenario.cpe_ids.index(c) + 1 for c in truth.cpe_ids]
            node = SimulatedNode(access, ("127.0.0.1", 9), positions, VERSION)
            names = DEFAULT_SUBSCRIBED[access]
            message = node._per_ue_message(names, world.report(truth, tick), int(period_s * 1000))
            reports = message["indicationMessage-formats"][1]["ueMeasReportList"]
            # Collected over the period before the step that takes it in (the run's clock, as
            # the loop's: a report's time is the end of its period, the step's now).
            head = codec.encode(KpmPdu.HEADER, header(tick * period_s, VERSION))
            for start in range(0, len(reports), chunk):
                part = {
                    "indicationMessage-formats": (
                        "indicationMessage-Format3",
                        {"ueMeasReportList": reports[start : start + chunk]},
                    )
                }
                # The simulator's fast writer where the shape allows (asn1tools' bytes, far
                # sooner: a long run's periods are quick to prepare), asn1tools otherwise.
                body = encode_format3(VERSION, part) or codec.encode(KpmPdu.MESSAGE, part)
                pdu = e2ap.Indication(e2ap.RicRequestId(1, 1), 2, 1, head, body, tick)
                batch.append((node_name(access), e2ap.encode(pdu)))
        out.append(batch)
    return out


class _NoAgents:
    """The Prober port without agents: the bench has none, so every probe the estimators ask
    for fails at once, as a probe to an unreachable agent does (saying nothing of the path)."""

    def __init__(self) -> None:
        self._asked: list[tuple[ProbeRequest, float]] = []

    def start(self, request: ProbeRequest, now_s: float) -> None:
        self._asked.append((request, now_s))

    def collect(self, now_s: float) -> Sequence[ProbeOutcome]:
        asked, self._asked = self._asked, []
        return [
            ProbeOutcome(r, at, now_s, None, 0.0, error="no agents in the bench") for r, at in asked
        ]


def default_periods(period_s: float) -> int:
    """Enough periods for a steady state: 16 (the models' histories fill over eleven), or 10 s
    of periods where that is more. The push limit's budgets start empty and settle over the
    first seconds whatever the period: at 100 ms reports over 16 periods (1.6 s) the second
    half fell in the seconds when most budgets were still spent and pushed little, and read
    8 % less CPU than the steady state from 5 s on (1,000 CPEs: 3.63 against 3.95 cores)."""
    return max(16, math.ceil(10.0 / period_s))


def service_loop(
    cpes: list[Cpe], source: KpiSource, sink: WeightSink, store: MemoryStateStore, estimator: str
) -> ControlLoop:
    """The loop as the service builds it by default (xapp/live.py, xapp/service.py): the
    estimators in their ``estimator`` mode with the shipped models (every probe fails: no
    agents) and the operator's choices, its policy, its hysteresis and push limit, and
    exploration of the paths known only from below."""
    # Every probe fails here (no agents); the service would log each path's failure once.
    logging.getLogger("xapp.estimators.probe").setLevel(logging.ERROR)
    # the operator's state, with no override set: the estimators ask it which estimator each
    # CPE is on, as the service's do (xapp/service.py)
    operator = OperatorState(store, store, lambda: cpes)
    operator.load()
    estimators = EstimatorSelection(
        _NoAgents(),
        EstimatorSettings(mode=estimator),
        choice=operator.estimator_choice,
        choices=operator.estimator_choices,
        records=store,
        labels=store,
        weights=lambda cpe_id, direction: (
            held.weights if (held := store.load_weights(cpe_id, direction)) else None
        ),
    )
    service = LiveSettings(cpe_agents={})
    return ControlLoop(
        cpes=cpes,
        directions=[Direction.DOWNLINK, Direction.UPLINK],
        source=source,
        estimator=estimators,
        policy=make_policy("optimal", service.policy),
        sink=sink,
        store=store,
        hysteresis=service.hysteresis(),
        exploration=service.new_exploration(),
        warmup_s=0.0,
    )


def run_xapp_bench(
    cpes: int,
    periods: int = 3,
    period_s: float = 1.0,
    chunk: int = 1000,
    before_processing: Callable[[], object] = lambda: None,
    estimator: str = "fused",
) -> XappBenchRow:
    """``estimator``: the mode the service's estimators run in (fused, the default, with the
    shipped models; kpi-only, model-only or probe-only), built as the service builds them."""
    # long enough for every period (one more: a period's truth is read at its end)
    scenario = scaled_site(cpes, (periods + 1) * period_s)
    payloads = encoded_periods(scenario, periods, period_s, chunk)
    before = _resident_bytes()
    domain_cpes: list[Cpe] = e2_cpes(scenario)
    processor = IndicationProcessor(domain_cpes)
    for access in scenario.access_names:
        config = E2NodeConfig(
            node=node_name(access), access=access, measurements=DEFAULT_SUBSCRIBED[access]
        )
        processor.set_node(config, VERSION)
    source = _Queue()
    sink = _CountingSink()
    store = MemoryStateStore()
    loop = service_loop(domain_cpes, source, sink, store, estimator)
    # (the models' tree tables are made beside a service's start: ready before the periods
    # are timed, as they are a few seconds into a service's life)
    every_table_made(timeout=300)
    # A step decides for all its CPEs together, in batches (their state read, their questions
    # put and answered, the rows concluded): each decision's cost is an equal share of its
    # part of the step's batches, plus its own conclusion where it is concluded alone (a
    # push, an override, a question put as an input).
    decision_s: list[float] = []
    watch = _Stopwatch()
    seconds = watch.seconds
    # the step part under way: its batches' seconds, its decisions
    part_s, part_decisions = [0.0], [0]
    own_s: list[float] = []  # its decisions concluded alone, each one's time

    def batched(stage: str, plain: Callable[..., Any]) -> Callable[..., Any]:
        """``plain`` as one of a step part's batches, in ``stage``."""

        def run(*args: Any) -> Any:
            started = time.perf_counter()
            answer = plain(*args)
            took = time.perf_counter() - started
            seconds[stage] += took
            part_s[0] += took
            return answer

        return run

    plain_begin_all, plain_conclude = loop._begin_all, loop._conclude
    plain_decide = loop._decide_and_push

    def begin_all(*args: Any) -> Any:
        begun = plain_begin_all(*args)
        # (counted by kind at C speed: a generator's frame per CPE was the bench's own cost)
        kinds = collections.Counter(map(type, begun.outcomes))
        part_decisions[0] = len(begun.outcomes) - kinds[StepOutcome]
        return begun

    def timed_conclude(begun: Any) -> Any:
        started = time.perf_counter()
        concluded = plain_conclude(begun)
        took = time.perf_counter() - started
        seconds["conclude + push"] += took
        own_s.append(took)
        return concluded

    def decide(*args: Any, **kwargs: Any) -> Any:
        part_s[0], part_decisions[0] = 0.0, 0
        own_s.clear()
        outcomes = plain_decide(*args, **kwargs)
        count = part_decisions[0]
        share = part_s[0] / max(1, count)
        decision_s.extend(share + own for own in own_s)
        decision_s.extend([share] * (count - len(own_s)))
        return outcomes

    loop._begin_all = batched("state + estimate", begin_all)  # type: ignore[method-assign]
    loop._ask_all = batched("state + estimate", loop._ask_all)  # type: ignore[method-assign]
    loop._propose_all = batched("policy", loop._propose_all)  # type: ignore[method-assign]
    loop._conclude_rows = batched("conclude + push", loop._conclude_rows)  # type: ignore[method-assign]
    loop._conclude = timed_conclude  # type: ignore[method-assign]
    loop._decide_and_push = decide  # type: ignore[method-assign]
    loop._push_all = watch.timed("conclude + push", loop._push_all)  # type: ignore[method-assign]
    loop._save = watch.timed("conclude + push", loop._save)  # type: ignore[method-assign]
    loop.take_reports = watch.timed("estimator update", loop.take_reports)  # type: ignore[method-assign]
    processor._samples = watch.timed("samples", processor._samples)  # type: ignore[method-assign]
    processor._samples_of_columns = watch.timed("samples", processor._samples_of_columns)  # type: ignore[method-assign]
    # The readers are module functions the processor calls by name: timed for this run only.
    readers = {
        "decode_header": (indications, "KPM"),
        "decode_message": (indications, "KPM"),
        "read_columns": (indications, "KPM"),
        "decode": (e2ap, "E2AP"),
    }
    plain_readers = {name: getattr(module, name) for name, (module, _) in readers.items()}
    for name, (module, stage) in readers.items():
        setattr(module, name, watch.timed(stage, plain_readers[name]))
    record = PushRecord(_push_log())
    metrics = XappMetrics(CollectorRegistry(), None)
    settle_for_service()  # as `xapp serve` does once it has started
    before_processing()
    decode_s: list[float] = []
    reports = 0
    busy_s: list[float] = []
    cpu_s: list[float] = []
    passes = PassesBetweenSteps()  # as the service's loop steps
    for tick, batch in enumerate(payloads):
        period_started = time.perf_counter()
        cpu_started = time.process_time()
        with passes.step():
            for node, payload in batch:
                started = time.perf_counter()
                samples = processor.handle_payload(node, payload)
                decode_s.append(time.perf_counter() - started)
                source.keep(samples)
            reports += sum(1 for _ in batch)
            # a step as the service takes it: the reports in, then the CPEs decided in parts
            now_s = tick * period_s + period_s
            loop.take_reports(now_s)
            outcomes: list[StepOutcome] = []
            for first in range(0, len(domain_cpes), STEP_PART):
                outcomes += loop.decide(domain_cpes[first : first + STEP_PART], now_s)
            # what the service keeps and says of the step: the pushes counted, remembered and
            # logged (xapp/live.py), counted in its metrics (xapp/service.py)
            started = time.perf_counter()
            sifted = pushes_and_failures(outcomes)
            metrics.observe_step(started - period_started, outcomes, False, sifted)
            record.take(outcomes, now_s, sifted)
            seconds["conclude + push"] += time.perf_counter() - started
        busy_s.append(time.perf_counter() - period_started)
        cpu_s.append(time.process_time() - cpu_started)
    for name, (module, _) in readers.items():
        setattr(module, name, plain_readers[name])
    resident = max(0, _resident_bytes() - before)
    ue_reports = cpes * len(scenario.access_names) * periods
    decode_total = sum(decode_s)
    decide_total = sum(decision_s)
    # The estimators' histories fill over the first periods (eleven periods of a path's KPIs for
    # the models, three forecasts judged before a source's bias counts), and each period costs
    # more as they do: at 1,000 CPEs a step's CPU went from 285 ms in the first periods to a
    # plateau of about 315 from the thirteenth (24 periods). What a running xApp needs is the
    # second half's median, of default_periods() by default (8 understated the plateau by
    # 5-8 %; a long run costs more still, docs/estimators.md).
    period_busy = float(np.median(busy_s[len(busy_s) // 2 :]))
    period_cpu = float(np.median(cpu_s[len(cpu_s) // 2 :]))
    return XappBenchRow(
        cpes=cpes,
        indications=len(payloads[0]),
        ue_reports_per_s=ue_reports / decode_total if decode_total else 0.0,
        decode_p50_ms=1000 * float(np.percentile(decode_s, 50)),
        decode_p99_ms=1000 * float(np.percentile(decode_s, 99)),
        decisions_per_s=len(decision_s) / decide_total if decide_total else 0.0,
        decision_p50_ms=1000 * float(np.percentile(decision_s, 50)),
        decision_p99_ms=1000 * float(np.percentile(decision_s, 99)),
        period_busy_s=period_busy,
        period_cpu_s=period_cpu,
        cores_needed=max(period_busy, period_cpu) / period_s,
        resident_kib_per_cpe=resident / 1024 / cpes,
        pushes=sink.pushes,
        decisions=len(decision_s),
        estimator=estimator,
        stage_ms={stage: 1000 * seconds / periods for stage, seconds in watch.seconds.items()},
    )


def _push_log() -> logging.Logger:
    """A logger as the service's (INFO, its JSON lines) that writes nowhere: the push lines'
    cost is the service's, their text no one's here."""
    logger = logging.getLogger("bench.xapp.pushes")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    if not logger.handlers:
        handler = logging.StreamHandler(_DISCARDED)
        handler.setFormatter(JsonLines({"service": "atsss-xapp", "host": ""}))
        logger.addHandler(handler)
    return logger


class _Discarded(io.TextIOBase):
    """A text stream that keeps nothing (os.devnull without a file to open and close)."""

    def write(self, text: str) -> int:
        return len(text)


_DISCARDED = _Discarded()


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ReplicaScaling:
    replicas: int
    cpes: int  # over all replicas
    wall_s: float  # for every replica to process every period
    cpes_per_s: float  # CPE periods processed per second of wall time, all replicas together
    rows: list[XappBenchRow]


def run_replicas(
    cpes: int, replicas: int, periods: int = 2, period_s: float = 1.0, estimator: str = "fused"
) -> ReplicaScaling:
    """``replicas`` processes at once, ``cpes / replicas`` CPEs each; encoding is done in each
    process before a common start, so only the processing is timed."""
    share = max(1, cpes // replicas)
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(replicas + 1)
    results = context.Queue()
    processes = [
        context.Process(target=_replica, args=(share, periods, period_s, ready, results, estimator))
        for _ in range(replicas)
    ]
    for process in processes:
        process.start()
    try:
        ready.wait(timeout=600)  # every replica has its indications encoded
        started = time.perf_counter()
        rows = [results.get(timeout=600) for _ in processes]
        wall = time.perf_counter() - started
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    return ReplicaScaling(replicas, share * replicas, wall, share * replicas * periods / wall, rows)


def _replica(
    cpes: int, periods: int, period_s: float, ready: Any, results: Any, estimator: str
) -> None:
    results.put(
        run_xapp_bench(cpes, periods, period_s, before_processing=ready.wait, estimator=estimator)
    )
