"""The control loop in real time, wired to real adapters: E2 samples in, agents' kernels out.

``LiveControl`` owns one ``ControlLoop`` whose ports are the E2 sample buffer (fed by whatever
E2 transport runs: the standalone termination here, RMR in a RIC), the estimator selection
(KPIs, models, and probes through the agents), the optimal policy and the agents' weight API.
It steps once per reporting period on wall-clock (Unix) time, the clock of the E2 reports,
and in between decides at once for a CPE whose agent reports a carrier lost or back (the
agents' events, `xapp/adapters/agent_events.py`), a period or more before a report would.

Before it decides for a CPE and direction it asks that agent what it holds, so a restarted xApp
continues the agents' sequence numbers and knows which paths are weighted, and which lever
each agent's kernel has. A service with a fleet of CPEs (``prepare_without_waiting``) asks them
side by side, in the background: an agent that does not answer keeps only its own CPE (and
direction) out of control, and is asked again with backoff (``AgentBook``); the others are
steered meanwhile. Where only a backup flag can be set (mainline MPTCP), every active path is
left to the kernel's own scheduler, which a slow path drags down, so the policy keeps only
paths of at least ``ACTIVE_BACKUP_MIN_SHARE`` of the largest one active.

With replicas sharing the CPEs (``owned``), what a CPE's agents hold is asked when the CPE
becomes this replica's, before its first decision here: the agent, not SDL, has the last
sequence, since the replica before may have died between a push and its record of it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from core.collector import PassesBetweenSteps
from core.deployment import ONE_LEVER_FOR_BOTH
from core.domain import Cpe, Direction, KpiSample, WeightSet
from core.sequence import latest, next_after
from xapp.adapters.agent_book import AgentBook
from xapp.adapters.agent_events import AccessEvent, AgentEventWatcher
from xapp.adapters.agent_http import AgentEndpoint, refusal, request_within
from xapp.adapters.agent_prober import AgentProber
from xapp.adapters.agent_sink import AgentWeightSink, HeldListingUnsupportedError, held_set
from xapp.adapters.cached_state import CachedState
from xapp.adapters.memory_store import MemoryStateStore
from xapp.control_loop import ControlLoop, StepOutcome
from xapp.e2.kpi_source import E2KpiSource
from xapp.estimators.columns import paths_of
from xapp.estimators.selection import EstimatorSelection, EstimatorSettings
from xapp.policy.exploration import Exploration, ExplorationConfig
from xapp.policy.hysteresis import Hysteresis
from xapp.policy.weight_policy import PolicyConfig, make_policy
from xapp.ports import WeightPushError, XappStore
from xapp.push_record import LastPushes, PushRecord, StepPushes, pushes_and_failures

log = logging.getLogger(__name__)

# Measured in the netns testbed with mainline MPTCP (`atsss bench testbed`'s topology): an NR
# path shaped to 10 % of Wi-Fi's rate lowered the aggregate when active (78 against 84 Mbit/s),
# one at 29 % raised it (136 against 111 Mbit/s); a 1 % LiFi path cost 15-90 %.
ACTIVE_BACKUP_MIN_SHARE = 0.15


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank quantile of sorted values."""
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class LiveSetupError(RuntimeError):
    """The live loop cannot start as configured (an agent unreachable or refusing)."""


class AgentUnreachableError(LiveSetupError):
    """No answer from an agent (it may still be starting: worth waiting for)."""


# Waiting for an agent: the first retry after this, doubling up to the cap.
FIRST_RETRY_S = 0.5
# How often the agents are asked whether they restarted (one health request each), and how
# many such requests a second at most: a fleet's agents are asked in turn over a longer round.
# (A CPE agent's restart is also seen at once on its event stream.)
REFILL_CHECK_S = 5.0
HEALTH_CHECKS_PER_S = 20.0
MAX_RETRY_S = 5.0
# Reports kept for the loop, in periods of every path's: older ones are dropped when it is late.
BACKLOG_PERIODS = 3
# Agents asked at once (what they hold, their health): each waits on its own agent.
PARALLEL_AGENT_CALLS = 64
# A step decides this many CPEs at a time, and between two parts what cannot wait (an operator's
# override, a carrier lost): with thousands of CPEs a step lasts a good part of the period.
STEP_PART = 500
# Steps follow the reports (LiveControl._run): at most one per half period however the nodes'
# reports are spread, and one every period and a half while no report comes.
MIN_STEP_GAP_PERIODS = 0.5
SILENT_STEP_PERIODS = 1.5


def quiet_s(period_s: float) -> float:
    """A step starts once reports have stopped coming for this long: the nodes report at the
    same period boundary, each over its own connection, and the xApp reads them one after the
    other (a 1,000-UE indication takes tens of milliseconds): a fortieth of the period, 25 ms
    at most (2.5 ms at 100 ms reports, part of the control delay)."""
    return min(0.025, period_s / 40)


def gather_cap_s(period_s: float) -> float:
    """... or this long after the first of them, if they keep coming."""
    return period_s / 4


# The control delay is summed up in the log once a minute, over at most this many pushes.
DELAY_LOG_EVERY_S = 60.0


@dataclass(frozen=True)
class LiveSettings:
    cpe_agents: Mapping[str, AgentEndpoint]
    proxy_agent: AgentEndpoint | None = None
    downlink_via_cpe: bool = False
    directions: tuple[Direction, ...] = (Direction.DOWNLINK, Direction.UPLINK)
    period_s: float = 1.0
    estimator: EstimatorSettings = field(default_factory=EstimatorSettings)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    min_gain: float = Hysteresis.min_gain
    max_pushes_per_s: float | None = Hysteresis.max_pushes_per_s
    # How paths known only from below get more share; None: they are weighted by their bound
    exploration: ExplorationConfig | None = field(default_factory=ExplorationConfig)

    def hysteresis(self) -> Hysteresis:
        """The loop's hysteresis and push limit, as these settings say."""
        return Hysteresis(self.min_gain, self.max_pushes_per_s)

    def new_exploration(self) -> Exploration | None:
        """A fresh exploration of the paths known only from below (None: none)."""
        return None if self.exploration is None else Exploration(self.exploration)


class LiveControl:
    def __init__(
        self,
        cpes: Sequence[Cpe],
        settings: LiveSettings,
        store: XappStore | None = None,
        on_push: Callable[[WeightSet], None] = lambda weight_set: None,
        on_step: Callable[[float, Sequence[StepOutcome], StepPushes], None] = (
            lambda seconds, outcomes, sifted: None
        ),
        owned: Callable[[], set[str]] | None = None,
    ) -> None:
        """``on_step``: after every step, how long it took, what it decided, and of that what
        pushed and what failed to (metrics). ``owned``: the CPEs this replica may act on now
        (leases shared with other replicas); None: all of them."""
        if settings.period_s <= 0:
            raise ValueError(f"the control period must be > 0 s, got {settings.period_s}")
        self.settings = settings
        self.cpes = list(cpes)
        self.store = store if store is not None else MemoryStateStore()
        self.source = E2KpiSource()
        self.source.on_decoded = self._heard
        self._bound_backlog()
        # Weights and overrides as the loop reads them: in memory, in front of SDL.
        self.state = CachedState(self.store)
        self.state.on_override = self._decide_soon
        self._soon: set[str] = set()  # CPEs whose override changed: decided at the next wake
        self.book = AgentBook()
        self.sink = AgentWeightSink(
            settings.cpe_agents,
            settings.proxy_agent,
            downlink_via_cpe=settings.downlink_via_cpe,
            book=self.book,
        )
        self.prober = AgentProber(settings.cpe_agents)
        self.estimator = EstimatorSelection(
            self.prober,
            settings.estimator,
            records=self.store,
            labels=self.store,
            weights=self._weights_in_force,
            probe_directions=settings.directions,
        )
        self.policy_config = settings.policy
        self.on_push = on_push
        self.on_step = on_step
        self.owned = owned
        # The CPEs another replica holds (with ``owned``): only those count as lost.
        self.owned_elsewhere: Callable[[], Collection[str]] | None = None
        self._stepping: list[str] | None = None  # the CPEs the loop decides for, when owned
        # (CPE, direction) whose agent said what it holds (since the CPE became ours), and the
        # askings under way; a CPE and direction is decided for only once its agent answered.
        self._enrolled: set[tuple[str, Direction]] = set()
        # Each CPE direction's question to its agent; the proxy's is one for many CPEs, whose
        # answer is a dict of outcomes (``_outcome`` reads either).
        self._enrolling: dict[tuple[str, Direction], Future[Any]] = {}
        self._no_held_listing: set[str] = set()  # agents without GET /v1/weights/…/held
        self._answers_until = 0.0  # monotonic: the step's waits for agents' answers end
        self._calls: ThreadPoolExecutor | None = None
        self._health_checks: dict[str, Future[dict[str, Any] | None]] = {}
        self._recheck: set[str] = set()  # agents whose event stream saw a restart
        self._next_progress_log_s = 0.0
        self.steps = 0
        # The pushes and failures counted, the last push per CPE and direction, the control
        # delays since the last line about them, the log's lines (xapp/push_record.py).
        self.record = PushRecord()
        self._next_delay_log_s = time.monotonic() + DELAY_LOG_EVERY_S
        self._loop: ControlLoop | None = None
        # kept across reloads: what it learnt of paths known only from below, and its counts
        self.exploration = settings.new_exploration()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # The collector's passes between steps, not during them (core/collector.py).
        self.collector = PassesBetweenSteps()
        # Start-up: when each CPE's accesses were first heard of, and how long after the last
        # of them its first weights went out (seconds, wall clock).
        self._first_heard_s: dict[tuple[str, str], float] = {}
        self.first_push_delay_s: dict[str, float] = {}
        self.levers: dict[str, str] = {}
        # Each agent's run (its health's "instance"), to notice restarts; when to look next.
        self._agent_instances: dict[str, str] = {}
        self._next_refill_check_s = 0.0
        self.refills = 0
        # The agents' own actions, as they happen: decided on at once by the loop's thread.
        # Per agent and access, the latest event not acted on yet: bounded by the agents'
        # accesses however fast they come (a flapping carrier is one decision per wake).
        self._events: dict[tuple[str, str], AccessEvent] = {}
        self._events_lock = threading.Lock()
        self._wake = threading.Event()
        self._reported = threading.Event()  # reports came in since the last step
        self._last_report_at = 0.0  # monotonic
        # Reports (indications) since the last step began, and how many the last gathered
        # period had: a period's reports are in once as many have come (0: not known yet).
        self._reports_since_step = 0
        self._reports_per_period = 0
        self._count_lock = threading.Lock()
        # Wakes a gather at each report, and at an override, which is acted on at once rather
        # than after the period's last report.
        self._report_arrived = threading.Event()
        self.source.on_added = self._reports_in
        self._event_watcher: AgentEventWatcher | None = None
        self.access_events = 0
        self.last_access_event: dict[str, dict[str, Any]] = {}  # by CPE

    def add_samples(self, samples: Sequence[KpiSample]) -> None:
        """Called by the E2 transport's threads (samples they decoded themselves)."""
        self._heard(samples)
        self.source.add(samples)

    def _heard(self, samples: Sequence[KpiSample]) -> None:
        now = time.time()
        first_heard = self._first_heard_s
        for cpe_id, access, _ in paths_of(samples):  # (a batch's paths: its samples unmade)
            first_heard.setdefault((cpe_id, access), now)

    def reconfigure(self, cpes: Sequence[Cpe], settings: LiveSettings) -> None:
        """A reloaded configuration: CPEs added or removed, agents changed. What the loop knows
        of the CPEs it keeps (estimates, weights in force, sequence numbers) stays."""
        before = {key: self.sink.endpoint(*key) for key in self._enrolled}
        self.settings = replace(settings, period_s=self.settings.period_s)
        self.sink.set_agents(settings.cpe_agents, settings.proxy_agent)
        # New CPEs are asked at the next step; one whose agent changed is asked again.
        self._enrolled = {key for key, was in before.items() if self.sink.endpoint(*key) == was}
        self.prober.set_agents(settings.cpe_agents)
        if self._event_watcher is not None:
            self._event_watcher.set_agents(self._cpe_agents())
        self.cpes = list(cpes)
        self._bound_backlog()
        self._stepping = None  # the owned ones are chosen again at the next step
        if self._loop is not None and self.owned is None:
            self._loop.set_cpes(self.cpes)

    def _bound_backlog(self) -> None:
        """At most BACKLOG_PERIODS periods of reports wait for the loop: one that falls behind
        (a step longer than its period) decides from the newest reports instead of working
        through an ever longer backlog, each step slower than the one before."""
        paths = sum(len(c.access_names) for c in self.cpes) * len(self.settings.directions)
        self.source.resize(max(1000, BACKLOG_PERIODS * paths))

    def prepare(
        self, wait_s: float = 0.0, on_wait: Callable[[str], None] = lambda message: None
    ) -> dict[str, str]:
        """Ask every agent for its lever and for the weights it holds; returns agent → lever.

        An agent that does not answer is retried for up to ``wait_s`` (in a RIC the agents
        may come up after the xApp); one that answers with a refusal fails at once. For one
        CPE on a bench (``xapp run``); a fleet uses ``prepare_without_waiting``."""
        if self.settings.downlink_via_cpe and len(set(self.settings.directions)) > 1:
            raise LiveSetupError(ONE_LEVER_FOR_BOTH)
        deadline = time.monotonic() + wait_s
        levers = {
            url: _lever_when_up(agent, deadline, on_wait) for url, agent in self._agents().items()
        }
        self.levers = dict(levers)
        if "active-backup" in levers.values():
            self._note_lever("active-backup")
        if self.owned is None:  # with replicas: once a CPE is ours (see _enrol)
            for cpe in self.cpes:
                self._load_held_weights(cpe)
                self._enrolled |= {(cpe.cpe_id, d) for d in self.settings.directions}
        self._build_loop()
        return levers

    def prepare_without_waiting(self) -> None:
        """Make the loop ready to run without asking any agent now: each CPE and direction is
        decided for once its agent has said what it holds, asked in the background."""
        if self.settings.downlink_via_cpe and len(set(self.settings.directions)) > 1:
            raise LiveSetupError(ONE_LEVER_FOR_BOTH)
        self._build_loop()

    def _note_lever(self, lever: str) -> None:
        """Where only a backup flag can be set, the policy keeps slow paths out (see above)."""
        if lever != "active-backup":
            return
        floor = max(self.policy_config.min_share_of_largest, ACTIVE_BACKUP_MIN_SHARE)
        if floor == self.policy_config.min_share_of_largest:
            return
        self.policy_config = replace(self.policy_config, min_share_of_largest=floor)
        if self._loop is not None:
            self._loop.set_policy(make_policy("optimal", self.policy_config))

    def _build_loop(self) -> None:
        self._loop = ControlLoop(
            cpes=self.cpes,
            directions=self.settings.directions,
            source=self.source,
            estimator=self.estimator,
            policy=make_policy("optimal", self.policy_config),
            sink=self.sink,
            store=self.state,
            hysteresis=self.settings.hysteresis(),
            exploration=self.exploration,
            # A step waits this long for its pushes; a slow agent's push lands at a later step.
            push_wait_s=self._push_wait_s(),
            may_push=self._may_push,
        )
        self._loop.on_landed = self._wake.set  # an override may be waiting on that push

    def _push_wait_s(self) -> float:
        return min(0.5, self.settings.period_s / 2)

    def _waiting(self) -> bool:
        """An override or an agent's event waits to be acted on."""
        with self._events_lock:
            return bool(self._soon or self._events)

    def _may_push(self, cpe_id: str, direction: Direction) -> str | None:
        """None when the CPE and direction's agent has said what it holds and is not left
        alone after failures; otherwise why it is not decided for now."""
        endpoint = self.sink.endpoint(cpe_id, direction)
        if endpoint is None:
            return None  # the sink says "no agent configured" itself
        left_alone = self.book.left_alone(self.sink.book_key(cpe_id, direction))
        if (cpe_id, direction) not in self._enrolled:
            return left_alone or f"agent at {endpoint.base_url} not reached yet"
        return left_alone

    def _load_held_weights(self, cpe: Cpe) -> None:
        """What the agents hold for ``cpe``: a restarted xApp continues their sequence numbers."""
        for direction in self.settings.directions:
            if self.sink.endpoint(cpe.cpe_id, direction) is None:
                continue
            try:
                held = self.sink.in_force(cpe.cpe_id, direction)
            except WeightPushError as error:
                raise LiveSetupError(str(error)) from error
            if held is not None:
                self.state.save_weights(held)

    def step(self, now_s: float) -> list[StepOutcome]:
        if self._loop is None:
            raise RuntimeError("call prepare() before stepping")
        cpes = self.cpes
        if self.owned is not None:
            mine = self.owned()
            cpes = [c for c in self.cpes if c.cpe_id in mine]
            # A CPE another replica took is asked again when it comes back to us; one only
            # short of lease (this replica renews late when busy) keeps what we know of it.
            elsewhere = self.owned_elsewhere() if self.owned_elsewhere is not None else None
            lost = {
                key[0]
                for key in self._enrolled
                if key[0] not in mine and (elsewhere is None or key[0] in elsewhere)
            }
            if lost:
                self._enrolled = {key for key in self._enrolled if key[0] in mine}
                self.state.forget(lost)
            if [c.cpe_id for c in cpes] != self._stepping:
                self._loop.set_cpes(cpes)
                self._stepping = [c.cpe_id for c in cpes]
        # Agents' answers (what they hold, their health) are waited for a quarter period at
        # most in all, a fast agent's within this step; the pushes get their own half period.
        self._answers_until = time.monotonic() + min(0.25, self.settings.period_s / 4)
        self._enrol(cpes)
        self._check_agents(now_s, cpes)
        self.state.refresh((c.cpe_id, d) for c in cpes for d in self.settings.directions)
        started = time.perf_counter()
        self._loop.take_reports(now_s)
        self._react_if_waiting()  # the estimators' update takes a while with a fleet
        # The parts' pushes share one wait (the loop's own per part would add up).
        push_until = time.monotonic() + self._push_wait_s()
        outcomes: list[StepOutcome] = []
        for first in range(0, len(cpes), STEP_PART):
            outcomes += self._loop.decide(cpes[first : first + STEP_PART], now_s, push_until)
            if first + STEP_PART < len(cpes):
                self._react_if_waiting()
        seconds = time.perf_counter() - started
        sifted = pushes_and_failures(outcomes)  # (once, for the metrics and the record)
        self.on_step(seconds, outcomes, sifted)
        self.steps += 1
        self._handle(outcomes, now_s, sifted)
        return outcomes

    def _handle(
        self, outcomes: Sequence[StepOutcome], now_s: float, sifted: StepPushes | None = None
    ) -> None:
        for outcome in self.record.take(outcomes, now_s, sifted):  # (its pushes)
            self._note_first_push(outcome.cpe_id)
            assert outcome.pushed is not None  # (a push)
            self.on_push(outcome.pushed)
        if self.record.delays and time.monotonic() >= self._next_delay_log_s:
            self._log_delays()

    # What the record keeps, read where the loop's own was (the service's view, the demo).
    @property
    def pushes(self) -> int:
        return self.record.pushes

    @property
    def push_failures(self) -> int:
        return self.record.push_failures

    @property
    def last_push(self) -> LastPushes:
        return self.record.last_push

    @property
    def applied_at_s(self) -> dict[tuple[str, Direction], float]:
        return self.record.applied_at_s

    def _log_delays(self) -> None:
        """One line a minute: how long from a report's arrival to the decision it led to, and
        to the agent's answer (the figures the simulated loop's control delay stands for)."""
        delays = self.record.take_delays()
        decided = sorted(d.decided_s for d in delays)
        applied = sorted(d.applied_s for d in delays)
        log.info(
            "control delay of %d pushes: report → decision p50 %.0f ms, p99 %.0f ms; "
            "report → applied at the agent p50 %.0f ms, p99 %.0f ms",
            len(applied),
            1000 * _quantile(decided, 0.5),
            1000 * _quantile(decided, 0.99),
            1000 * _quantile(applied, 0.5),
            1000 * _quantile(applied, 0.99),
        )
        self._next_delay_log_s = time.monotonic() + DELAY_LOG_EVERY_S

    def carrier_down(self, cpe_id: str) -> list[str]:
        """The CPE's accesses without carrier, as its agent last said."""
        return [] if self._loop is None else self._loop.carrier_down(cpe_id)

    def _decide_soon(self, cpe_id: str) -> None:
        """An operator's override changed (through this replica's API): decide now."""
        with self._events_lock:
            self._soon.add(cpe_id)
        self._wake.set()
        self._report_arrived.set()

    def on_access_event(self, event: AccessEvent) -> None:
        """Called by the event watcher's threads; the loop's thread acts on it."""
        with self._events_lock:
            self._events[(event.agent_url, event.access)] = event
        self._wake.set()  # not the gather's: a flooding agent would keep it from gathering

    def react(self, now_s: float) -> list[StepOutcome]:
        """Decide at once for the CPEs whose agents reported a carrier lost or back."""
        if self._loop is None:
            raise RuntimeError("call prepare() before reacting")
        touched: set[str] = set()
        with self._events_lock:
            events, self._events = list(self._events.values()), {}
            touched, self._soon = self._soon, set()
        if not events and not touched:
            return []  # woken by a landed push, nothing waiting on one
        touched &= {c.cpe_id for c in self.cpes}
        by_agent: dict[str, list[Cpe]] = {}
        for cpe in self.cpes:
            agent = self.settings.cpe_agents.get(cpe.cpe_id)
            if agent is not None:
                by_agent.setdefault(agent.base_url, []).append(cpe)
        for event in sorted(events, key=lambda e: e.sequence):
            for cpe in by_agent.get(event.agent_url, []):
                if event.access not in cpe.access_names:
                    continue
                self._loop.access_event(cpe.cpe_id, event.access, event.carrier_up, now_s)
                touched.add(cpe.cpe_id)
                self.access_events += 1
                self.last_access_event[cpe.cpe_id] = {
                    "time_s": now_s,
                    "access": event.access,
                    "carrier": "up" if event.carrier_up else "down",
                    "agent_sequence": event.sequence,
                    "agent_action": event.result,
                }
                log.info(
                    "%s's agent: %s carrier %s (%s)",
                    cpe.cpe_id,
                    event.access,
                    "back" if event.carrier_up else "lost",
                    event.result,
                )
        if not touched:
            return []
        outcomes = self._loop.decide_now(touched, now_s)
        self._handle(outcomes, now_s)
        # A CPE whose last push is still under way was not decided: it waits for that push to
        # land (the loop is woken then), not for the next step.
        waiting = {cpe_id for cpe_id in touched if self._loop.in_flight(cpe_id)}
        if waiting:
            with self._events_lock:
                self._soon |= waiting
        return outcomes

    def _pool(self) -> ThreadPoolExecutor:
        if self._calls is None:
            self._calls = ThreadPoolExecutor(PARALLEL_AGENT_CALLS, thread_name_prefix="agent")
        return self._calls

    def _enrol(self, cpes: Sequence[Cpe]) -> None:
        """Ask, side by side, the agents of ``cpes`` not heard from yet what they hold; wait
        for them as long as a step waits for its pushes (a fast agent is in at once, a slow
        or hung one later, or at a later try: it keeps only its own CPE out meanwhile). The
        proxy's agent, which serves every CPE, is asked once for all of them (its held sets
        in pages), not once per CPE."""
        for key in [k for k, future in self._enrolling.items() if future.done()]:
            if _outcome(self._enrolling.pop(key), key) is None:
                self._enrolled.add(key)
        asked: list[tuple[str, Direction]] = []
        shared: dict[tuple[str, Direction], list[tuple[str, Direction]]] = {}
        for cpe in cpes:
            for direction in self.settings.directions:
                key = (cpe.cpe_id, direction)
                endpoint = self.sink.endpoint(*key)
                if key in self._enrolled or key in self._enrolling or endpoint is None:
                    continue
                if self.book.left_alone(self.sink.book_key(*key)) is not None:
                    continue  # asked again once its backoff has run out
                if self._serves_many(endpoint):
                    shared.setdefault((endpoint.base_url, direction), []).append(key)
                    continue
                self._enrolling[key] = self._pool().submit(self._ask_agent, *key)
                asked.append(key)
        for keys in shared.values():
            together = self._pool().submit(self._ask_agent_for_many, keys)
            for key in keys:
                self._enrolling[key] = together
            asked += keys
        if asked:
            futures = {id(f): f for f in (self._enrolling[k] for k in asked)}
            wait(futures.values(), timeout=self._answers_wait_s())
            for key in asked:
                future = self._enrolling[key]
                if future.done():
                    del self._enrolling[key]
                    if _outcome(future, key) is None:
                        self._enrolled.add(key)
        self._log_progress(cpes)

    def _answers_wait_s(self) -> float:
        """What is left of the step's time for agents' answers (see ``step``)."""
        return max(0.0, self._answers_until - time.monotonic())

    def _serves_many(self, endpoint: AgentEndpoint) -> bool:
        """The proxy's agent (every CPE's downlink), unless it cannot list what it holds."""
        proxy = self.settings.proxy_agent
        return (
            proxy is not None
            and endpoint.base_url == proxy.base_url
            and endpoint.base_url not in self._no_held_listing
        )

    def _ask_agent_for_many(
        self, keys: Sequence[tuple[str, Direction]]
    ) -> dict[tuple[str, Direction], str | None]:
        """``_ask_agent`` for many CPEs of one agent and direction: its lever once, then every
        set it holds in a few pages; each key's outcome."""
        endpoint = self.sink.endpoint(*keys[0])
        if endpoint is None:
            return dict.fromkeys(keys)
        url, direction = endpoint.base_url, keys[0][1]
        if url not in self.levers:
            try:
                lever = _lever(endpoint)
            except LiveSetupError as error:
                self.book.failed(url, str(error))
                return dict.fromkeys(keys, str(error))
            self.levers[url] = lever
            self._note_lever(lever)
        try:
            held = self.sink.held_sets(endpoint, direction)
        except HeldListingUnsupportedError:
            self._no_held_listing.add(url)
            return dict.fromkeys(keys, f"agent at {url} lists no held sets: asked per CPE")
        except WeightPushError as error:
            return dict.fromkeys(keys, str(error))
        wanted = {cpe_id for cpe_id, _ in keys}
        try:
            self.state.save_weights_many([s for c, s in held.items() if c in wanted])
        except Exception as error:  # SDL did not take them (ricsdl raises its own types)
            return dict.fromkeys(keys, f"what the agent holds not recorded: {error}")
        return dict.fromkeys(keys)

    def _ask_agent(self, cpe_id: str, direction: Direction) -> str | None:
        """The agent's lever (once per agent) and what it holds for the CPE and direction;
        None when it answered, else why not. A CPE's agent says both in its health."""
        endpoint = self.sink.endpoint(cpe_id, direction)
        if endpoint is None:
            return None
        url = endpoint.base_url
        told: WeightSet | bool | None = False  # False: its health did not say what it holds
        if url not in self.levers:
            try:
                lever, health = _lever_and_health(endpoint)
            except LiveSetupError as error:
                self.book.failed(url, str(error))
                return str(error)
            self.levers[url] = lever
            self._note_lever(lever)
            told = _held_in_health(health, cpe_id, direction)
        if told is False:
            try:
                held = self.sink.in_force(cpe_id, direction)
            except WeightPushError as error:
                return str(error)
        else:
            held = told if isinstance(told, WeightSet) else None
        if held is not None:
            try:
                self.state.save_weights(held)
            except Exception as error:  # SDL did not take it (ricsdl raises its own types)
                return f"what the agent holds not recorded: {error}"
        return None

    def _log_progress(self, cpes: Sequence[Cpe]) -> None:
        """While some agents have not answered: every 10 s, how many have and which not."""
        now = time.monotonic()
        if now < self._next_progress_log_s:
            return
        wanted = [
            (c.cpe_id, d)
            for c in cpes
            for d in self.settings.directions
            if self.sink.endpoint(c.cpe_id, d) is not None
        ]
        missing = [k for k in wanted if k not in self._enrolled]
        if not missing:
            return
        self._next_progress_log_s = now + 10.0
        urls = sorted({e.base_url for k in missing if (e := self.sink.endpoint(*k)) is not None})
        log.warning(
            "agents heard from for %d of %d CPE directions; not yet: %s%s",
            len(wanted) - len(missing),
            len(wanted),
            ", ".join(urls[:5]),
            f" and {len(urls) - 5} more" if len(urls) > 5 else "",
        )

    def _check_agents(self, now_s: float, cpes: Sequence[Cpe]) -> None:
        """Ask each agent's health side by side, every REFILL_CHECK_S or, for a fleet, in a
        round of at most HEALTH_CHECKS_PER_S; act on the answers that came in since (a
        restarted agent refilled, a carrier back whose event was missed)."""
        answered = {url: f.result() for url, f in self._health_checks.items() if f.done()}
        for url in answered:
            del self._health_checks[url]
        if answered:
            self._refill_restarted_agents(cpes, answered)
        agents = self._agents()
        due = set()
        while self._recheck:  # filled by the event watchers' threads
            due.add(self._recheck.pop())
        if now_s >= self._next_refill_check_s:
            self._next_refill_check_s = now_s + max(
                REFILL_CHECK_S, len(agents) / HEALTH_CHECKS_PER_S
            )
            due |= set(agents)
        asked = []
        for url, agent in [(u, agents[u]) for u in sorted(due) if u in agents]:
            if url in self._health_checks or self.book.left_alone(url) is not None:
                continue
            self._health_checks[url] = self._pool().submit(_health, agent)
            asked.append(url)
        if asked:  # an agent that answers at once is acted on in this step
            wait(
                [self._health_checks[u] for u in asked],
                timeout=self._answers_wait_s(),
            )
            done = {
                u: self._health_checks.pop(u).result()
                for u in asked
                if self._health_checks[u].done()
            }
            if done:
                self._refill_restarted_agents(cpes, done)

    def _refill_restarted_agents(
        self, cpes: Sequence[Cpe], healths: Mapping[str, dict[str, Any] | None]
    ) -> None:
        """An agent that restarted without its state holds nothing, and the loop pushes only
        when it expects a gain: so when an agent's run changes, what it should hold is checked
        and pushed again where it differs (with the next sequence number); for ``cpes`` only,
        those this replica acts on."""
        for url, health in healths.items():
            if health is None:
                continue
            instance = str(health.get("instance") or "")
            self._reconcile_carrier(url, health, cpes)
            previous = self._agent_instances.get(url)
            self._agent_instances[url] = instance
            if previous is None or previous == instance:
                continue
            log.warning("agent at %s restarted; checking the weights it holds", url)
            for cpe in cpes:
                for direction in self.settings.directions:
                    endpoint = self.sink.endpoint(cpe.cpe_id, direction)
                    if endpoint is not None and endpoint.base_url == url:
                        self._refill(cpe.cpe_id, direction)

    def _reconcile_carrier(self, url: str, health: dict[str, Any], cpes: Sequence[Cpe]) -> None:
        """A carrier back whose event never came (the agent restarted, say) is taken from the
        agent's health: the loop's word of a lost carrier ends only with the agent's."""
        if self._loop is None:
            return
        down_at_agent = set(health.get("carrier_down") or [])
        for cpe in cpes:
            agent = self.settings.cpe_agents.get(cpe.cpe_id)
            if agent is None or agent.base_url != url:
                continue
            for access in self._loop.carrier_down(cpe.cpe_id):
                if access not in down_at_agent:
                    log.info("%s's agent has %s's carrier back (no event came)", cpe.cpe_id, access)
                    self._loop.access_event(cpe.cpe_id, access, True, time.time())

    def _refill(self, cpe_id: str, direction: Direction) -> None:
        wanted = self.state.load_weights(cpe_id, direction)
        if wanted is None:
            return
        try:
            held = self.sink.in_force(cpe_id, direction)
            if held is not None and dict(held.weights) == dict(wanted.weights):
                return
            sequence = next_after(
                latest(wanted.sequence, held.sequence) if held else wanted.sequence
            )
            again = replace(wanted, sequence=sequence, reason="the agent restarted: pushed again")
            self.sink.push(again)
        except WeightPushError as error:
            log.warning("could not refill %s %s: %s", cpe_id, direction.value, error)
            return
        self.state.save_weights(again)
        self.refills += 1
        log.info(
            "pushed %s %s %s again to its restarted agent",
            cpe_id,
            direction.value,
            dict(again.weights),
        )

    def _note_first_push(self, cpe_id: str) -> None:
        if cpe_id in self.first_push_delay_s:
            return
        heard = {a: s for (c, a), s in self._first_heard_s.items() if c == cpe_id}
        if not heard:
            return
        last_access = max(heard, key=lambda a: heard[a])
        delay = max(0.0, time.time() - heard[last_access])
        self.first_push_delay_s[cpe_id] = delay
        log.info(
            "first weights for %s %.2f s after the first report of its last access (%s)",
            cpe_id,
            delay,
            last_access,
        )

    def start(self) -> None:
        self._event_watcher = AgentEventWatcher(
            self._cpe_agents(), self.on_access_event, self._recheck.add
        )
        self._thread = threading.Thread(target=self._run, name="control-loop", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._event_watcher is not None:
            self._event_watcher.stop()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._loop is not None:
            self._loop.close()
        if self._calls is not None:
            self._calls.shutdown(wait=False, cancel_futures=True)
        self.prober.close()

    def _reports_in(self) -> None:
        """Reports came in (the E2 transport's thread): the loop decides on them."""
        with self._count_lock:
            self._reports_since_step += 1
        self._last_report_at = time.monotonic()
        self._reported.set()
        self._report_arrived.set()
        self._wake.set()

    def _gather(self, period: float) -> bool:
        """Wait for the period's reports: until as many have come as the last period had (the
        nodes report at the same boundary but each on its own connection, some milliseconds
        apart), or, while that is not known, until they have stopped coming (quiet_s); at most
        gather_cap_s. True when stopping meanwhile."""
        started = time.monotonic()
        quiet, cap = quiet_s(period), gather_cap_s(period)
        while True:
            self._report_arrived.clear()  # before the count: a report after it wakes the wait
            now = time.monotonic()
            with self._count_lock:
                came, expected = self._reports_since_step, self._reports_per_period
            if expected and came >= expected:
                return False
            until_quiet = self._last_report_at + quiet - now if not expected else math.inf
            wait_s = min(until_quiet, started + cap - now)
            if wait_s <= 0:
                return False
            # woken by each report (the count may be complete), and every quiet_s for a stop;
            # each decoded while the others are awaited, not all at the step's start
            self._report_arrived.wait(min(wait_s, quiet))
            self._take_early()
            self._react_if_waiting()
            if self._stop.is_set():
                return True

    def _react_if_waiting(self) -> None:
        """An override or an agent's event that came while the loop was busy (a fleet's
        step or gather lasts a good part of the period): acted on now, not after it."""
        if self._waiting():
            try:
                self.react(time.time())
            except Exception:  # as in _run: logged in full, the loop goes on
                log.exception("reacting to an agent's event failed")

    def _take_early(self) -> None:
        """Reports in before the period's last: decoded and fed to the estimators while the
        others are awaited (each node's own work, not all of it after the last report; the
        step takes the last)."""
        if self.source.decode_waiting() and self._loop is not None:
            with self.collector.step():
                self._loop.take_reports(time.time())

    def _step_begins(self) -> None:
        """The reports gathered so far are this step's: their count is what a period brings
        (a node gone lowers it at the next step; a node added raises it)."""
        with self._count_lock:
            self._reports_per_period = self._reports_since_step
            self._reports_since_step = 0

    def _run(self) -> None:
        """Steps follow the reports: a step starts when a period's reports are in (once they
        have stopped coming for a moment, the other nodes' too), not on a timer of its own
        that would leave them waiting up to a period; at most two a period. Without reports
        (nodes silent, none yet) a step comes every period and a half all the same: estimates
        age, outages show as silence."""
        period = self.settings.period_s
        next_step = time.time() + period
        last_step = -math.inf  # monotonic: when the last step began
        while not self._stop.is_set():
            # Until the timer's step, or until reports that came too soon after the last step
            # may have theirs (a step longer than half a period must not skip a period).
            wait_s = next_step - time.time()
            if self._reported.is_set():
                wait_s = min(wait_s, last_step + period * MIN_STEP_GAP_PERIODS - time.monotonic())
            self._wake.wait(max(0.0, wait_s))
            self._wake.clear()
            if self._stop.is_set():
                break
            self._take_early()  # reports read as they come while the loop is idle
            try:
                self.react(time.time())
            except Exception:  # as for a step: logged in full, the loop goes on
                log.exception("reacting to an agent's event failed")
            since_step = time.monotonic() - last_step
            reported = self._reported.is_set() and since_step >= period * MIN_STEP_GAP_PERIODS
            if time.time() < next_step and not reported:
                continue
            if reported and self._gather(period):
                break
            if reported:
                self._step_begins()
            self._reported.clear()
            last_step = time.monotonic()
            try:
                with self.collector.step():
                    self.step(time.time())
            except Exception:  # one bad step must not end the loop; it is logged in full
                log.exception("control step failed")
            next_step = time.time() + period * SILENT_STEP_PERIODS

    def _weights_in_force(self, cpe_id: str, direction: Direction) -> dict[str, int] | None:
        current = self.state.load_weights(cpe_id, direction)
        return None if current is None else dict(current.weights)

    def _cpe_agents(self) -> dict[str, AgentEndpoint]:
        return {a.base_url: a for a in self.settings.cpe_agents.values()}

    def _agents(self) -> dict[str, AgentEndpoint]:
        agents = {a.base_url: a for a in self.settings.cpe_agents.values()}
        if self.settings.proxy_agent is not None:
            agents[self.settings.proxy_agent.base_url] = self.settings.proxy_agent
        return agents


def _lever_when_up(agent: AgentEndpoint, deadline: float, on_wait: Callable[[str], None]) -> str:
    retry_s = FIRST_RETRY_S
    while True:
        try:
            return _lever(agent)
        except AgentUnreachableError as error:
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                raise
            on_wait(f"{error}; retrying for up to {left_s:.0f} s more")
            time.sleep(min(retry_s, left_s))
            retry_s = min(2 * retry_s, MAX_RETRY_S)


def _health(agent: AgentEndpoint) -> dict[str, Any] | None:
    """The agent's health (its run's ``instance``, ``carrier_down``), None when it does not
    answer now."""
    try:
        response = request_within(agent, "GET", "/v1/health", 1.0)
        health = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(health, dict) or not health.get("instance"):
        return None
    return health


LEVERS = ("weights", "active-backup")


def _outcome(future: Future[Any], key: tuple[str, Direction]) -> str | None:
    """A finished enrolment question's outcome for ``key``: None when its agent answered."""
    outcome = future.result()
    if isinstance(outcome, dict):
        return outcome.get(key, "not among the agent's answers")  # type: ignore[no-any-return]
    return outcome  # type: ignore[no-any-return]


def _lever(agent: AgentEndpoint) -> str:
    """What the agent's kernel can set: WRR weights, or only a backup flag."""
    return _lever_and_health(agent)[0]


def _held_in_health(
    health: dict[str, Any], cpe_id: str, direction: Direction
) -> WeightSet | bool | None:
    """What a CPE's agent says in its health it holds for the direction: the set, None when it
    holds none, False when its health does not say (an older agent, or the proxy's)."""
    held = health.get("held")
    if not isinstance(held, dict) or health.get("cpe_id") != cpe_id:
        return False
    applied = held.get(direction.value)
    if applied is None:
        return None
    try:
        return held_set(cpe_id, direction, applied)
    except (ValueError, KeyError, TypeError, AttributeError):
        return False  # not a set: asked the usual way


def _lever_and_health(agent: AgentEndpoint) -> tuple[str, dict[str, Any]]:
    """The agent's lever and its whole health answer (a CPE's agent also says there what it
    holds, which saves a restarted xApp a second call per CPE)."""
    try:
        response = request_within(agent, "GET", "/v1/health", 2.0)
    except httpx.HTTPError as error:
        raise AgentUnreachableError(
            f"agent at {agent.base_url}: {error or type(error).__name__}"
        ) from error
    if response.status_code != 200:
        raise LiveSetupError(refusal(agent, response))
    try:
        health = response.json()
        lever = health.get("lever", "weights")
    except (ValueError, AttributeError):
        health, lever = {}, None
    if lever not in LEVERS:
        raise LiveSetupError(
            f"agent at {agent.base_url}: its health is not an agent's (lever {lever!r})"
        )
    return str(lever), health
