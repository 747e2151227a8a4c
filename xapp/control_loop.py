"""The xApp's control loop: KPIs in, capacity estimates, weights out.

Each ``step`` polls the KPI source, feeds the estimator, asks the policy for weights per CPE and
direction (or takes the operator's override), and pushes a new weight set only when hysteresis
says it is worth it. It knows nothing of E2, Redis, HTTP or the kernel: those are adapters behind
the ports in ``xapp.ports``. Time comes in as an argument so the same loop runs in real time in
the xApp and in simulated time in the evaluator.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
import weakref
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence, Set
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from operator import attrgetter, eq, is_, is_not, itemgetter, methodcaller, ne
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from core.domain import (
    CapacityEstimate,
    Cpe,
    Direction,
    Override,
    SteeringMode,
    SteeringRule,
    WeightSet,
)
from core.rowwise import row_any
from core.sequence import is_after, next_after
from core.slots import Places, Slots, grown
from xapp.estimators.columns import as_step
from xapp.estimators.said import EstimateRows
from xapp.path_state import DecisionTimes, HeardReports, LastUsableEstimates
from xapp.policy.exploration import Exploration
from xapp.policy.hysteresis import Hysteresis, PushBudget
from xapp.policy.outage_risk import OutageRisk
from xapp.policy.weight_policy import (
    BalancingRows,
    PathView,
    PolicyInput,
    Proposal,
    RowAnswers,
    RowProposals,
    WeightPolicy,
)
from xapp.ports import (
    CapacityEstimator,
    CarrierAware,
    EstimatesAsRows,
    KpiSource,
    ManyEstimates,
    PlacesPaths,
    StatesOfMany,
    StateStore,
    WeightPushError,
    WeightSink,
)
from xapp.push_lanes import PushLane

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class _Saves:
    """What a step stores at its end: the weight sets, then what to remember of each push that
    landed (its rule and override revision, its failure forgotten)."""

    sets: list[WeightSet] = field(default_factory=list)
    landed: list[_Pending] = field(default_factory=list)


@dataclass(frozen=True)
class StepOutcome:
    """What happened for one CPE and direction in one step."""

    cpe_id: str
    direction: Direction
    pushed: WeightSet | None
    reason: str
    # For a push: seconds from the newest report the decision read (its arrival at the xApp)
    # to the decision, and to the agent's answer that the set is in force; None where the
    # reports carry no arrival time (the simulated loop) or for an override's own weights.
    delay: ControlDelay | None = None

    @classmethod
    def unpushed(cls, cpe_id: str, direction: Direction, reason: str) -> StepOutcome:
        """``StepOutcome(cpe_id, direction, None, reason)``: the same object (the same fields
        in the same ``__dict__``), without a frozen dataclass's guarded assignment per field.
        A fleet's step makes one for nearly every CPE and direction (their weights stay):
        0.4 µs each, against 1.2. tests/test_control_loop_many.py holds the two equal."""
        return cls.made(cpe_id, direction, None, reason, None)

    @classmethod
    def unpushed_many(
        cls, cpe_ids: Sequence[str], directions: Sequence[Direction], reasons: Sequence[str]
    ) -> list[StepOutcome]:
        """``unpushed`` of each CPE, direction and reason: the same objects, made without a
        Python call each (their dictionaries zipped, each put in its new object, in C). A
        fleet's step at 100 ms reports words new reasons for most of its held rows (the gain
        out of reach moves): 0.3 µs each, against 1.2."""
        count = len(cpe_ids)
        fields = zip(
            cpe_ids,
            directions,
            itertools.repeat(None),
            reasons,
            itertools.repeat(None),
            strict=True,
        )
        contents = map(dict, map(zip, itertools.repeat(_OUTCOME_FIELDS), fields))
        made = list(map(object.__new__, itertools.repeat(cls, count)))
        deque(map(object.__setattr__, made, itertools.repeat("__dict__"), contents), maxlen=0)
        return made

    @classmethod
    def made(
        cls,
        cpe_id: str,
        direction: Direction,
        pushed: WeightSet | None,
        reason: str,
        delay: ControlDelay | None,
    ) -> StepOutcome:
        """``StepOutcome(cpe_id, direction, pushed, reason, delay)``, made as ``unpushed``
        makes it (a fleet's step at 1 s periods pushes for a third of its CPEs)."""
        outcome = object.__new__(cls)
        object.__setattr__(
            outcome,
            "__dict__",
            {
                "cpe_id": cpe_id,
                "direction": direction,
                "pushed": pushed,
                "reason": reason,
                "delay": delay,
            },
        )
        return outcome


# The reason of an outcome whose push failed starts so (what the live loop counts as failed).
PUSH_FAILED = "push failed"

# (the order ``made`` puts them in a StepOutcome's dictionary, as its fields are declared)
_OUTCOME_FIELDS = ("cpe_id", "direction", "pushed", "reason", "delay")


@dataclass(frozen=True)
class ControlDelay:
    """The control delay of one push, in its two parts: report → decision → applied."""

    decided_s: float
    applied_s: float


class _NotSaid:
    """What a CPE and direction with no held outcome yet reads as: no reason a step says."""

    reason = None


_NOT_SAID = _NotSaid()

# The row of a CPE and direction without a push budget (PushBudget.as_row).
_NO_BUDGET = (math.nan,) * 5

# The rule of a CPE the operator set none for: one for all (a rule is immutable, compared by
# value), not two objects made and kept per CPE and direction at every step.
_DEFAULT_RULE = SteeringRule()


# Pushes in flight at once, each to its own agent. Threads waiting on a slow agent cost little;
# enough of them that a few hung agents (each holding one until its deadline) leave room.
MAX_PARALLEL_PUSHES = 128
# Pushes decided at once (an override, a carrier lost) have threads of their own: behind a
# fleet's step they would wait for its thousand pushes queued before them (12-19 s at 1,000 CPEs).
MAX_PARALLEL_URGENT_PUSHES = 16
# Pushes that travel in batches (the proxy's agent takes a fleet's downlink in requests of
# hundreds of sets) have a lane of their own, wide enough for a full batch while the one
# before it is answered: sharing the lane above, they waited behind single pushes to slow CPE
# agents and a fleet's downlink took 10 s to go out at 100-200 sets a second.
MAX_PARALLEL_BATCHED_PUSHES = 512

# A path back after an outage is believed to carry what it carried before, a little less sure.
RETURN_STDDEV_FACTOR = 1.5


@dataclass
class _Carrier:
    """What a CPE's agent last said of an access's carrier (its own fast reaction)."""

    up: bool
    since_s: float
    # A report of a whole period after the event has come in: the measurement speaks again.
    heard_after: bool = False


@dataclass(slots=True)
class _Deciding:
    """A CPE and direction being decided this step, between the question to the policy and
    its answer (the step asks for all of them at once)."""

    cpe: Cpe
    direction: Direction
    current: WeightSet | None
    override: Override | None
    override_revision: int | None
    override_changed: bool
    rule: SteeringRule
    mode_changed: bool = False
    request: PolicyInput | None = None  # None: the override's weights, no question
    proposal: Proposal | None = None
    now_s: float = 0.0  # the decision's time
    # Put as a row and not spared (``_needed``): neither a spent budget nor a gain out of
    # reach holds it back (``_held_by_budget`` would say None).
    judged: bool = False

    @property
    def asks(self) -> bool:
        """The policy is to be asked (its question is put for the whole step at once, once
        every CPE's state is read): no override's fixed weights."""
        return self.override is None or self.override.weights is None

    @property
    def excluded(self) -> Collection[str]:
        """The accesses the operator took out of the question."""
        return self.override.excluded if self.override is not None else ()


@dataclass(slots=True, eq=False)
class _Pending:
    """A set decided this step, to push; what to remember once it is in force. (Slotted and
    not frozen: a fleet's step at 1 s periods makes thousands, and a frozen dataclass's
    guarded assignment per field was most of their making; nothing changes one once made but
    its ``landed``.)"""

    cpe_id: str
    direction: Direction
    weight_set: WeightSet
    rule: SteeringRule
    override_revision: int | None
    current: WeightSet | None
    # When the newest report the decision read arrived, and when it was decided (monotonic).
    report_received_s: float | None = None
    decided_s: float | None = None
    # When the agent answered (set by the push itself, which may land after its step).
    landed: list[float] = field(default_factory=list)


class _Candidates:
    """A step's CPEs and directions whose questions may go as rows (load balancing, nothing
    overridden, no word of the agent's on a carrier standing, the weights in force over
    exactly the CPE's accesses), gathered as columns while the step reads their state: no
    ``_Deciding`` each (a fleet's step has thousands). One is made only for a question that
    goes otherwise after all (a path to explore) or a proposal ``_conclude`` acts on."""

    __slots__ = (
        "asked",
        "cpes",
        "currents",
        "directions",
        "keys",
        "mode_changed",
        "override_lifted",
        "plan",
        "rules",
        "slots",
        "starts",
    )

    def __init__(self) -> None:
        # the part's plan, where every CPE and direction of the part is a candidate, in its
        # order (``_begin_as_planned``); None: read one by one
        self.plan: _PartPlan | None = None
        self.slots: list[int] = []  # each one's place in the step's outcomes
        self.cpes: list[Cpe] = []
        self.directions: list[Direction] = []
        self.keys: list[tuple[str, Direction]] = []
        self.currents: list[WeightSet | None] = []
        self.rules: list[SteeringRule] = []
        # an override was lifted since the last decision (an override changed), the mode
        # changed: what cannot wait
        self.override_lifted: list[bool] = []
        self.mode_changed: list[bool] = []
        self.asked: list[_Asked] = []  # its paths and places
        self.starts: list[int] = []  # where its paths start among the step's

    def __len__(self) -> int:
        return len(self.slots)

    def deciding(
        self, i: int, now_s: float, proposal: Proposal | None = None, judged: bool = False
    ) -> _Deciding:
        """Candidate ``i`` as any other decision (no override); ``judged``: as a row, not
        spared (``_Deciding.judged``)."""
        return _Deciding(
            self.cpes[i],
            self.directions[i],
            self.currents[i],
            None,
            None,
            self.override_lifted[i],
            self.rules[i],
            self.mode_changed[i],
            proposal=proposal,
            now_s=now_s,
            judged=judged,
        )


class _Begun:
    """What a step starts from: per CPE and direction its outcome already, its decision
    (``_Deciding``), or None for a candidate for the rows (decided in ``_conclude_rows``);
    the questions to put as inputs, with where each one's paths start and how many; the
    candidates; every path to estimate, in order, with its place in the loop's path slots."""

    def __init__(self) -> None:
        self.outcomes: list[StepOutcome | _Deciding | _Pending | None] = []
        self.asking: list[tuple[_Deciding, int, int]] = []
        self.candidates = _Candidates()
        self.paths: list[tuple[str, str, Direction]] = []
        self.places: list[int] = []


class _Rows:
    """A step's questions over the same accesses put as rows (``BalancingRows``): which of the
    candidates they are, and where each one's paths start in the step's estimates."""

    def __init__(
        self,
        accesses: tuple[str, ...],
        candidates: _Candidates,
        members: list[int],
        now_s: float,
    ) -> None:
        self.accesses = accesses
        self.candidates = candidates
        self.members = members  # (indexes in candidates, in the step's order)
        self.now_s = now_s
        # (picked in C: a fleet's step has thousands of members)
        asked = _picked(candidates.asked, members)
        self.starts = _picked(candidates.starts, members)
        # each one's paths' places (the loop's path slots) and its own (the decision times')
        self.path_places = list(itertools.chain.from_iterable(map(_PATH_PLACES, asked)))
        self.key_places = list(map(_KEY_PLACE, asked))
        self.questions: BalancingRows | None = None  # put together once every row is in
        # per row, the gain a push would need (``ControlLoop._needed``); None: none spared
        self.needed: npt.NDArray[np.float64] | None = None
        self.answers: RowAnswers | None = None  # the policy's
        # per row, the paths usable now that its last decision did not find usable, as bits
        # over ``accesses`` (``ControlLoop._paths_back``; None: not worked out yet)
        self.back: npt.NDArray[np.int64] | None = None
        self._lifted_or_changed: npt.NDArray[np.bool_] | None = None

    def lifted_or_changed(self) -> npt.NDArray[np.bool_]:
        """Per row, whether an override was lifted or the steering mode changed since the last
        decision: neither may wait (read by ``_needed`` and ``_conclude_rows``, made once)."""
        if self._lifted_or_changed is None:
            lifted = np.array(self.candidates.override_lifted, dtype=bool)
            changed = np.array(self.candidates.mode_changed, dtype=bool)
            self._lifted_or_changed = (lifted | changed)[self.members]
        return self._lifted_or_changed


def _picked(values: Sequence[T], at: Sequence[int]) -> list[T]:
    """``[values[i] for i in at]`` for rising indexes ``at``, in C."""
    if len(at) == len(values) and (not at or (at[0] == 0 and at[-1] == len(at) - 1)):
        return list(values)  # (a fleet's usual: every one, in order; ``at`` rises)
    return list(map(values.__getitem__, at))


class _Asked:
    """What a CPE and direction's question asks about when nothing is excluded, made once
    (a fleet's step asked about thousands of paths, each a new tuple looked up again): its
    paths, their places in the loop's path slots, and its own place in the decision times."""

    __slots__ = ("accesses", "key_place", "path_places", "paths")

    def __init__(
        self,
        accesses: tuple[str, ...],
        paths: list[tuple[str, str, Direction]],
        path_places: list[int],
        key_place: int,
    ) -> None:
        self.accesses, self.paths = accesses, paths
        self.path_places, self.key_place = path_places, key_place


class _PartPlan:
    """A step part's CPEs and directions as its questions ask about them (``_Asked``), in the
    step's order, made once for as long as the part holds the same CPEs (a fleet's parts
    do, step after step): their keys, the columns to read their state by, and every path
    to estimate with its place, as ``_begin_all`` gathers them for its candidates."""

    __slots__ = (
        "access_sets",
        "asked",
        "checked",
        "cpe_ids",
        "cpes",
        "ids",
        "in_force",
        "keys",
        "paths",
        "places",
        "row_cpes",
        "starts",
    )

    def __init__(
        self, cpes: list[Cpe], directions: Sequence[Direction], asked: list[_Asked]
    ) -> None:
        self.cpes = cpes
        self.row_cpes = [cpe for cpe in cpes for _ in directions]
        self.cpe_ids = [cpe.cpe_id for cpe in self.row_cpes]
        self.keys = [(cpe.cpe_id, d) for cpe in cpes for d in directions]
        # (the CPEs and directions as two columns: a store's reader mapped over both)
        self.ids = (self.cpe_ids, [d for _ in cpes for d in directions])
        self.access_sets = [cpe.access_set for cpe in self.row_cpes]
        self.asked = asked
        self.paths = [path for one in asked for path in one.paths]
        self.places = [place for one in asked for place in one.path_places]
        self.starts = list(itertools.accumulate((len(one.paths) for one in asked), initial=0))
        self.starts.pop()
        # The weight sets in force found over their CPEs' accesses at the last step, and per
        # accesses the sets last read as rows with those rows: a weight set is never changed
        # once made, so the same object says the same (most of a fleet's stay from one step to
        # the next: all but the few pushed, at sub-second periods).
        self.checked: list[WeightSet | None] = []
        self.in_force: dict[
            tuple[str, ...], tuple[list[WeightSet | None], npt.NDArray[np.int64]]
        ] = {}

    @classmethod
    def of(
        cls,
        cpes: Sequence[Cpe],
        directions: Sequence[Direction],
        asked: Mapping[tuple[str, Direction], _Asked],
    ) -> _PartPlan | None:
        """The part's plan, from the questions asked of its CPEs before (None: one was not,
        or was over other accesses than its CPE's now)."""
        questions = []
        for cpe in cpes:
            for direction in directions:
                one = asked.get((cpe.cpe_id, direction))
                if one is None or one.accesses is not cpe.access_names:
                    return None
                questions.append(one)
        return cls(list(cpes), directions, questions)

    def over_their_accesses(self, currents: list[WeightSet | None]) -> bool:
        """Whether each row's weight set in force (there is one: None is not asked about) is
        over exactly its CPE's accesses, the sets found so at the last step not compared
        again."""
        checked, access_sets = self.checked, self.access_sets
        if len(checked) == len(currents):
            new = list(itertools.compress(itertools.count(), map(is_not, currents, checked)))
            currents_new, access_sets = _picked(currents, new), _picked(access_sets, new)
        else:
            currents_new = currents
        over = all(map(eq, map(_KEYS, map(_WEIGHTS, currents_new)), access_sets))
        self.checked = currents if over else []
        return over

    def in_force_rows(
        self, accesses: tuple[str, ...], currents: list[WeightSet | None]
    ) -> npt.NDArray[np.int64]:
        """Every row's weights in force over ``accesses`` (each row's CPE's own, in this
        order), as a (rows × accesses) table: the rows of the sets read the step before
        copied, the others read."""
        pick = itemgetter(*accesses) if len(accesses) > 1 else lambda w: (w[accesses[0]],)
        shape = (len(currents), len(accesses))
        before = self.in_force.get(accesses)
        if before is not None and len(before[0]) == len(currents):
            new = list(itertools.compress(itertools.count(), map(is_not, currents, before[0])))
            rows = before[1].copy()
            if new:
                picked = map(pick, map(_WEIGHTS, _picked(currents, new)))
                rows[new] = np.array(list(picked), dtype=np.int64).reshape(len(new), shape[1])
        else:
            in_force = list(map(pick, map(_WEIGHTS, currents)))
            rows = np.array(in_force, dtype=np.int64).reshape(shape)
        self.in_force[accesses] = (currents, rows)
        return rows.copy()

    def made_for(self, cpes: Sequence[Cpe], asked: Mapping[tuple[str, Direction], _Asked]) -> bool:
        """Whether the plan is the part's still: the same CPEs, asked the same questions."""
        return (
            len(cpes) == len(self.cpes)
            and all(map(is_, cpes, self.cpes))
            and all(map(is_, map(asked.get, self.keys), self.asked))
        )


_PATH_PLACES = attrgetter("path_places")
_REASON = attrgetter("reason")
_CPE_ID = attrgetter("cpe_id")
_DIRECTION = attrgetter("direction")
_RULE = attrgetter("rule")
_OVERRIDE_REVISION = attrgetter("override_revision")
_MODE = attrgetter("mode")
_SEQUENCE = attrgetter("sequence")
_SPEND = methodcaller("spend")
_FIRST, _SECOND = itemgetter(0), itemgetter(1)
_PATHS = attrgetter("paths")
_ACCESS_NAMES = attrgetter("access_names")
_KEY_PLACE = attrgetter("key_place")
_WEIGHTS = attrgetter("weights")
_KEYS = methodcaller("keys")
_NONES = itertools.repeat(None)


class ControlLoop:
    def __init__(
        self,
        *,
        cpes: Sequence[Cpe],
        directions: Sequence[Direction],
        source: KpiSource,
        estimator: CapacityEstimator,
        policy: WeightPolicy,
        sink: WeightSink,
        store: StateStore,
        hysteresis: Hysteresis | None = None,
        rules: Mapping[str, SteeringRule] | None = None,
        warmup_s: float = 3.0,
        exploration: Exploration | None = None,
        push_wait_s: float | None = None,
        may_push: Callable[[str, Direction], str | None] | None = None,
        balancing_rows: bool = True,
    ) -> None:
        """``warmup_s``: after a CPE's first KPI report, how long to wait for its other accesses
        to report before deciding without them (E2 nodes connect and report one by one, and an
        access not heard from yet is not an access that is down). ``exploration``: how paths
        known only from below are given more share (xapp/policy/exploration.py); None: never,
        in load balancing they are then weighted by their bound alone.

        ``push_wait_s``: how long a step waits for its pushes; one still under way then (a slow
        agent) is finished at a later step, and its CPE and direction are not decided again
        until it is. None: wait for every push (the simulated evaluator's sinks answer at once).
        ``may_push``: None when the agent of a CPE and direction may be pushed to now, else
        why not (its agent not reached yet); such a CPE and direction is not decided.

        ``balancing_rows``: a step's usual questions (load balancing, nothing overridden, no
        carrier word) put to the policy as rows of numbers (``BalancingRows``) rather than one
        ``PolicyInput`` each; False puts every question as an input, the reference the rows
        are held to (tests/test_control_loop_many.py)."""
        self._cpes = list(cpes)
        self._directions = list(directions)
        self._source = source
        self._estimator = estimator
        self._policy = policy
        self._sink = sink
        self._store = store
        # (told once: a planned step part reads its CPEs' states at once where it can)
        self._states_of = store.states_of if isinstance(store, StatesOfMany) else None
        self._hysteresis = hysteresis or Hysteresis()
        self._rules = dict(rules or {})
        # What each (CPE, direction) was last decided under, to notice mode and override changes.
        self._last_rule: dict[tuple[str, Direction], SteeringRule] = {}
        self._last_override: dict[tuple[str, Direction], int | None] = {}
        self._last_usable: dict[tuple[str, Direction], frozenset[str]] = {}
        # The paths' places in the columns of what is remembered of each (core/slots.py).
        # (the estimator's, where it keeps its own by place: a step's paths looked up once)
        self._path_slots: Slots[tuple[str, str, Direction]] = (
            estimator.path_slots if isinstance(estimator, PlacesPaths) else Slots()
        )
        self._outage_risk = OutageRisk(slots=self._path_slots)
        self._exploration = exploration
        # When each (CPE, direction) was last decided, and the running mean of the intervals.
        self._decision_times = DecisionTimes()
        self._asked: dict[tuple[str, Direction], _Asked] = {}  # (each CPE's, made once)
        # each step part's plan, by its first CPE (``_begin_as_planned``)
        self._plans: dict[int, _PartPlan] = {}
        self._warmup_s = warmup_s
        self._carrier: dict[tuple[str, str], _Carrier] = {}
        # Each path's latest usable estimate: what a path back from an outage starts from.
        self._last_usable_estimate = LastUsableEstimates(self._path_slots)
        self._push_wait_s = push_wait_s
        self._may_push = may_push
        self._balancing_rows = balancing_rows
        # When each (CPE, direction) was first heard from and when its newest report arrived
        # (monotonic, if reports say); what each path's reports said besides its capacity.
        self._heard = HeardReports(self._path_slots, self._decision_times.slots)
        # What each (CPE, direction) may still push for a gain (the push limit).
        self._budgets: dict[tuple[str, Direction], PushBudget] = {}
        # Each (CPE, direction)'s last outcome concluded with the rows whose weights stay
        # (the next one that says the same is that object: outcomes are frozen).
        self._held_outcomes: dict[tuple[str, Direction], StepOutcome] = {}
        # per CPE and direction (the decision times' places): its budget as numbers
        # (PushBudget.as_row; NaN: none), kept with every change, for a step to read at once
        self._budget_rows = np.zeros((0, len(_NO_BUDGET)))
        self._budget_notes: dict[int, PushBudget | None] = {}  # (by place: to be written)
        self._pool: ThreadPoolExecutor | None = None
        self._urgent_pool: ThreadPoolExecutor | None = None
        self._batched_pool: ThreadPoolExecutor | None = None
        # the steps' lanes of pushes, while any is under way (``close`` stops them)
        self._lanes: weakref.WeakSet[PushLane[_Pending, WeightPushError | None]] = weakref.WeakSet()
        self._in_flight: dict[
            tuple[str, Direction], tuple[Future[WeightPushError | None], _Pending]
        ] = {}
        self._last_failure: dict[tuple[str, Direction], str] = {}
        # Told (from a push's own thread) when a push that outlasted its step lands: a CPE
        # waiting on it (an override came meanwhile) can be decided at once.
        self.on_landed: Callable[[], None] = lambda: None

    def step(self, now_s: float) -> list[StepOutcome]:
        self.take_reports(now_s)
        return self._decide_and_push(self._cpes, now_s)

    def take_reports(self, now_s: float) -> None:
        """The first half of a step: the period's reports into the estimators."""
        # (its columns and paths made once, for the estimators and for what the loop keeps)
        samples = as_step(self._source.poll(now_s))
        self._estimator.update(samples, now_s)
        carriers = self._carrier
        if carriers:  # (a fleet's usual: no agent's word on a carrier stands)
            for s in samples:
                carrier = carriers.get((s.cpe_id, s.access))
                if carrier is not None and s.time_s - s.period_s >= carrier.since_s:
                    carrier.heard_after = True
        self._heard.take(samples, now_s)

    def decide(
        self, cpes: Sequence[Cpe], now_s: float, push_until: float | None = None
    ) -> list[StepOutcome]:
        """The second half of a step, for some of the CPEs (a fleet's step in parts, with
        what cannot wait in between); ``push_until``: when waiting for this part's pushes ends
        (monotonic), so that a step's parts share one wait."""
        return self._decide_and_push(cpes, now_s, push_until)

    def access_event(self, cpe_id: str, access: str, carrier_up: bool, now_s: float) -> None:
        """A CPE's agent saw an access lose or regain carrier, seconds before a report would
        say so. Lost: the path gets no weight until the agent says it is back (the agent sees
        the carrier; a report can mistake a dead station for an idle one). Back: until a report
        of a period that began after the return, the path is believed to carry what it did
        before."""
        self._carrier[(cpe_id, access)] = _Carrier(carrier_up, now_s)
        if isinstance(self._estimator, CarrierAware):
            self._estimator.carrier_changed(cpe_id, access, carrier_up, now_s)

    def carrier_down(self, cpe_id: str) -> list[str]:
        """The CPE's accesses its agent last said are without carrier."""
        return sorted(a for (c, a), state in self._carrier.items() if c == cpe_id and not state.up)

    def in_flight(self, cpe_id: str) -> bool:
        """A push to the CPE (either direction) is still under way."""
        return any((cpe_id, direction) in self._in_flight for direction in self._directions)

    def _landed(self, _: object) -> None:
        self.on_landed()

    def decide_now(self, cpe_ids: Collection[str], now_s: float) -> list[StepOutcome]:
        """Decide for these CPEs at once, with what is known (after an access event), their
        pushes ahead of any a step has queued."""
        chosen = [c for c in self._cpes if c.cpe_id in cpe_ids]
        return self._decide_and_push(chosen, now_s, urgent=True)

    def _decide_and_push(
        self,
        cpes: Sequence[Cpe],
        now_s: float,
        push_until: float | None = None,
        urgent: bool = False,
    ) -> list[StepOutcome]:
        # Pushes of earlier steps that landed are stored before anything is decided: this
        # step decides those CPEs again, from the landed sets and their sequence numbers.
        landed = _Saves()
        outcomes = self._finish_landed(landed)
        self._save(landed)
        saves = _Saves()
        begun = self._begin_all(cpes, now_s, urgent)
        deciding, rows = self._ask_all(begun, now_s)
        self._propose_all(deciding, rows)
        self._conclude_rows(rows, begun.outcomes)
        planned = [
            d if isinstance(d, StepOutcome | _Pending) else self._conclude(self._decided(d))
            for d in begun.outcomes
        ]
        pending = [p for p in planned if isinstance(p, _Pending)]
        failures, late = self._push_all(pending, push_until, urgent)
        for item in pending:
            if id(item) in late:
                self._in_flight[(item.cpe_id, item.direction)] = (late[id(item)], item)
                late[id(item)].add_done_callback(self._landed)
        outcomes += [
            p if isinstance(p, StepOutcome) else self._finish(p, failures.get(id(p)), saves)
            for p in planned
            if not (isinstance(p, _Pending) and id(p) in late)
        ]
        self._save(saves)
        return outcomes

    @staticmethod
    def _decided(begun: _Deciding | None) -> _Deciding:
        """A step's decision to conclude; None is a candidate its rows left unconcluded."""
        if begun is None:
            raise AssertionError("a candidate for the rows was never concluded")
        return begun

    def _refund(self, key: tuple[str, Direction]) -> None:
        budget = self._budgets.get(key)
        if budget is not None:
            budget.refund()
            self._note_budget(key, budget)

    def _note_budget(self, key: tuple[str, Direction], budget: PushBudget | None) -> None:
        """Keep ``key``'s budget as numbers (None: it has none), after every change of it (a
        new one, a refill, a push, a refund): written into the rows when they are next read,
        all at once (a fleet's step at 1 s periods changes thousands, one row each cost more
        than the rest of the change)."""
        self._budget_notes[self._decision_times.slots.of(key)] = budget

    def _budget_table(self) -> npt.NDArray[np.float64]:
        """The budgets as rows, one for each CPE and direction given a place so far."""
        size = len(self._decision_times.slots)
        if len(self._budget_rows) < size:
            self._budget_rows = grown(self._budget_rows, size, math.nan)
        notes = self._budget_notes
        if notes:
            places = np.fromiter(notes, dtype=np.intp, count=len(notes))
            self._budget_rows[places] = PushBudget.rows_of(list(notes.values()))
            notes.clear()
        return self._budget_rows

    def _withdraw(self, key: tuple[str, Direction]) -> bool:
        """What is decided at once (an override, a carrier lost) replaces a push of an earlier
        step that is still waiting for a thread, behind slow agents' pushes in a busy fleet
        (an override waited 13-40 s there at 1,000 CPEs): True when it had not started, so
        nothing of it reached the agent. One already sending is waited for."""
        future, _ = self._in_flight[key]
        if not future.cancel():
            return False
        del self._in_flight[key]
        self._refund(key)  # never pushed: the push limit does not count it
        return True

    def _save(self, saves: _Saves) -> None:
        """The step's weight sets into the store together (a fleet's first step pushes
        thousands: one round trip each to SDL was most of the step); what the loop remembers
        of each push changes only once its set is stored."""
        if not saves.sets:
            return
        many = getattr(self._store, "save_weights_many", None)
        if many is not None:
            many(saves.sets)
        else:
            for weight_set in saves.sets:
                self._store.save_weights(weight_set)
        landed = saves.landed
        if landed:  # (remembered for all at once, in order: a fleet's step lands thousands)
            keys = list(zip(map(_CPE_ID, landed), map(_DIRECTION, landed), strict=True))
            failures = self._last_failure
            if failures:
                for key in keys:
                    failures.pop(key, None)
            self._last_rule.update(zip(keys, map(_RULE, landed), strict=True))
            self._last_override.update(zip(keys, map(_OVERRIDE_REVISION, landed), strict=True))

    def _finish_landed(self, saves: _Saves) -> list[StepOutcome]:
        """Pushes of earlier steps that landed (or failed) since."""
        landed = [key for key, (future, _) in self._in_flight.items() if future.done()]
        outcomes = []
        for key in landed:
            future, item = self._in_flight.pop(key)
            if future.cancelled():
                continue  # never sent: the pools were shut down (the loop is stopping)
            outcomes.append(self._finish(item, future.result(), saves))
        return outcomes

    def _push_all(
        self, pending: Sequence[_Pending], push_until: float | None = None, urgent: bool = False
    ) -> tuple[dict[int, WeightPushError], dict[int, Future[WeightPushError | None]]]:
        """Push every decided set, side by side: a slow or hung agent costs its own CPE the
        sink's deadline, not every CPE after it; and with ``push_wait_s`` not even the step:
        the pushes still under way then are returned as futures, to finish later."""
        failures: dict[int, WeightPushError] = {}

        def push(item: _Pending) -> WeightPushError | None:
            try:
                self._sink.push(item.weight_set)
            except WeightPushError as error:
                return error
            item.landed.append(time.monotonic())
            return None

        if self._push_wait_s is None and len(pending) <= 1:
            for item in pending:
                error = push(item)
                if error is not None:
                    failures[id(item)] = error
            return failures, {}
        if self._pool is None:
            self._pool = ThreadPoolExecutor(MAX_PARALLEL_PUSHES, thread_name_prefix="push")
            self._urgent_pool = ThreadPoolExecutor(
                MAX_PARALLEL_URGENT_PUSHES, thread_name_prefix="urgent-push"
            )
            self._batched_pool = ThreadPoolExecutor(
                MAX_PARALLEL_BATCHED_PUSHES, thread_name_prefix="batched-push"
            )
        single = self._urgent_pool if urgent and self._urgent_pool is not None else self._pool
        widths = {
            id(self._pool): MAX_PARALLEL_PUSHES,
            id(self._urgent_pool): MAX_PARALLEL_URGENT_PUSHES,
            id(self._batched_pool): MAX_PARALLEL_BATCHED_PUSHES,
        }
        assert single is not None  # (made above)
        batched: Callable[[str, Direction], bool] | None = getattr(self._sink, "batched", None)
        # Urgent pushes keep their own threads (to a proxy too, where they join its next
        # batch): behind a step's thousands in the batched lane they would wait their turn.
        in_batches = None if urgent or batched is None else self._batched_pool
        by_pool: dict[int, tuple[ThreadPoolExecutor, list[_Pending]]] = {}
        for item in pending:
            pool = single
            if in_batches is not None and batched is not None:
                pool = in_batches if batched(item.cpe_id, item.direction) else single
            by_pool.setdefault(id(pool), (pool, []))[1].append(item)
        lanes = [
            (PushLane(items, push, pool, widths[id(pool)]), items)
            for pool, items in by_pool.values()
        ]
        self._lanes.update(lane for lane, _ in lanes)
        timeout = self._push_wait_s
        if push_until is not None and timeout is not None:
            timeout = max(0.0, min(timeout, push_until - time.monotonic()))
        waited_until = None if timeout is None else time.monotonic() + timeout
        late: dict[int, Future[WeightPushError | None]] = {}
        for lane, items in lanes:
            left = None if waited_until is None else max(0.0, waited_until - time.monotonic())
            lane.wait(left)
            late.update(lane.late(items))  # (a future for each push not done by now)
            for item in items:
                if id(item) not in late:
                    error = lane.result(item)
                    if error is not None:
                        failures[id(item)] = error
        return failures, late

    def close(self) -> None:
        """Let the pushes under way end; no new ones start."""
        for lane in list(self._lanes):
            lane.stop()
        for pool in (self._pool, self._urgent_pool, self._batched_pool):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)

    def set_cpes(self, cpes: Sequence[Cpe]) -> None:
        """A reloaded configuration: CPEs kept keep their history, removed ones are forgotten."""
        self._cpes = list(cpes)
        self._plans.clear()
        kept = {c.cpe_id for c in self._cpes}
        histories: list[dict[Any, Any]] = [
            self._last_rule,
            self._last_override,
            self._last_usable,
            self._carrier,
            self._budgets,
            self._asked,
            self._held_outcomes,
        ]
        for key in [k for k in self._budgets if k[0] not in kept]:
            self._note_budget(key, None)
        for history in histories:
            for key in [k for k in history if k[0] not in kept]:
                del history[key]
        self._last_usable_estimate.forget(lambda path: path[0] not in kept)
        self._heard.forget(lambda cpe_id: cpe_id not in kept)

    def set_policy(self, policy: WeightPolicy) -> None:
        """A policy set up otherwise (an agent's lever learnt after the start)."""
        self._policy = policy

    def set_rule(self, cpe_id: str, rule: SteeringRule) -> None:
        self._rules[cpe_id] = rule

    def _begin_all(self, cpes: Sequence[Cpe], now_s: float, urgent: bool) -> _Begun:
        """What the step starts from, for every CPE and direction of ``cpes`` (``_Begun``):
        each one's state read; a fleet's usual question gathered as a candidate for the rows
        (``_Candidates``), any other begun as a decision of its own (``_begin``); and the
        paths of every question to put, in order."""
        begun = _Begun()
        if self._begin_as_planned(cpes, now_s, begun):
            return begun
        outcomes, candidates = begun.outcomes, begun.candidates
        paths, places = begun.paths, begun.places
        in_flight, may_push = self._in_flight, self._may_push
        load_weights, load_override = self._store.load_weights, self._store.load_override
        last_override, last_rule, rules = self._last_override, self._last_rule, self._rules
        carrier = self._carrier
        heard, warmup_s = self._heard, self._warmup_s
        # (_not_heard_from's own test, read here: a fleet's CPEs warmed up long ago, and none
        # is looked up while the newest first report is older than the warm-up)
        some_warming = not now_s - heard.newest_first_s >= warmup_s
        in_rows: dict[int, bool] = {}  # the policy's answer for each rule met (by identity)
        asked_before = self._asked
        # (the candidates' columns, each one's append bound once: a fleet's step adds thousands)
        add_slot, add_cpe, add_direction = (
            candidates.slots.append,
            candidates.cpes.append,
            candidates.directions.append,
        )
        add_key, add_current, add_rule = (
            candidates.keys.append,
            candidates.currents.append,
            candidates.rules.append,
        )
        add_lifted, add_changed, add_asked, add_start = (
            candidates.override_lifted.append,
            candidates.mode_changed.append,
            candidates.asked.append,
            candidates.starts.append,
        )
        for cpe in cpes:
            cpe_id = cpe.cpe_id
            # A word of the agent's on a carrier stands for the CPE (a fleet's usual: none).
            worded = bool(carrier) and any((cpe_id, a) in carrier for a in cpe.access_names)
            for direction in self._directions:
                key = (cpe_id, direction)
                if in_flight and key in in_flight and not (urgent and self._withdraw(key)):
                    continue  # its last push is still under way: nothing new until it lands
                blocked = may_push(cpe_id, direction) if may_push is not None else None
                if blocked is not None:
                    outcomes.append(StepOutcome(cpe_id, direction, None, blocked))
                    continue
                current = load_weights(cpe_id, direction)
                override = load_override(cpe_id, direction)
                if override is None and self._balancing_rows and not worded:
                    rule = rules.get(cpe_id, _DEFAULT_RULE)
                    answers = in_rows.get(id(rule))
                    if answers is None:
                        answers = in_rows[id(rule)] = self._policy.answers_rule_in_rows(rule)
                    # (answers_in_rows for the rule answered: the weights in force over
                    # exactly the CPE's accesses), and not warming up
                    if (
                        answers
                        and (current is None or current.weights.keys() == cpe.access_set)
                        and not (some_warming and self._warming_up(key, now_s))
                    ):
                        asked = asked_before.get(key)  # (``_asked_of``, looked up here)
                        if asked is None or asked.accesses is not cpe.access_names:
                            asked = self._asked_of(cpe, direction)
                        last = last_rule.get(key, rule)
                        add_slot(len(outcomes))
                        add_cpe(cpe)
                        add_direction(direction)
                        add_key(key)
                        add_current(current)
                        add_rule(rule)
                        # (the override revision is None: changed if one was there before)
                        add_lifted(last_override.get(key) is not None)
                        add_changed(last is not rule and last != rule)
                        add_asked(asked)
                        add_start(len(paths))
                        paths += asked.paths
                        places += asked.path_places
                        outcomes.append(None)
                        continue
                d = self._begin(cpe, direction, now_s, current, override)
                outcomes.append(d)
                if isinstance(d, _Deciding) and d.asks:
                    excluded = d.excluded
                    if excluded:  # (an operator's few)
                        some = [
                            (cpe_id, a, direction) for a in cpe.access_names if a not in excluded
                        ]
                        begun.asking.append((d, len(paths), len(some)))
                        paths += some
                        places += self._path_slots.many(some).tolist()
                    else:
                        own = self._asked_of(cpe, direction)
                        begun.asking.append((d, len(paths), len(own.paths)))
                        paths += own.paths
                        places += own.path_places
        return begun

    def _begin_as_planned(self, cpes: Sequence[Cpe], now_s: float, begun: _Begun) -> bool:
        """``_begin_all`` for a step part whose every CPE and direction is a candidate for the
        rows (a fleet's usual, step after step: nothing in flight or overridden, no agent's
        word on a carrier, no CPE warming up, weights in force over each CPE's accesses, a
        rule the rows answer), read column by column in C from the part's plan (its keys and
        questions, made once): False, with nothing read, where any is not (``_begin_all``
        then reads them one by one, as the first steps do). tests/test_control_loop_many.py
        holds the two alike."""
        if not self._balancing_rows or self._carrier:
            return False
        heard = self._heard
        if not now_s - heard.newest_first_s >= self._warmup_s:
            return False  # (some CPE may be warming up)
        plan = self._plans.get(id(cpes[0])) if cpes else None
        if plan is None or not plan.made_for(cpes, self._asked):
            plan = _PartPlan.of(cpes, self._directions, self._asked)
            if plan is None:
                return False  # (a question not asked before: made one by one)
            if cpes:
                self._plans[id(cpes[0])] = plan
        keys = plan.keys
        if self._in_flight and not self._in_flight.keys().isdisjoint(keys):
            return False
        may_push = self._may_push
        if may_push is not None and any(map(is_not, map(may_push, *plan.ids), _NONES)):
            return False  # (an agent not reached, or left alone: its outcome says why)
        store, states_of = self._store, self._states_of
        if states_of is not None:  # (the service's and the bench's stores)
            currents, overrides = states_of(keys)
            if any(overrides):
                return False
        else:
            if any(map(store.load_override, *plan.ids)):
                return False
            currents = list(map(store.load_weights, *plan.ids))
        if not all(currents):  # (some CPE without weights in force yet)
            return False
        if not plan.over_their_accesses(currents):
            return False  # (weights in force over other accesses than the CPE's)
        rules = list(map(self._rules.get, plan.cpe_ids, itertools.repeat(_DEFAULT_RULE)))
        policy = self._policy
        if not all(policy.answers_rule_in_rows(r) for r in {id(r): r for r in rules}.values()):
            return False
        last = list(map(self._last_rule.get, keys, rules))
        changed = list(map(is_not, last, rules))
        if any(changed):  # (the same rule object, a fleet's usual, is the same rule)
            changed = [b is not r and b != r for b, r in zip(last, rules, strict=True)]
        candidates = begun.candidates
        count = len(keys)
        candidates.plan = plan
        candidates.slots = list(range(count))
        candidates.cpes = list(plan.row_cpes)
        candidates.directions = list(plan.ids[1])
        candidates.keys = list(keys)
        candidates.currents = currents
        candidates.rules = rules
        candidates.override_lifted = list(map(is_not, map(self._last_override.get, keys), _NONES))
        candidates.mode_changed = changed
        candidates.asked = list(plan.asked)
        candidates.starts = list(plan.starts)
        begun.outcomes.extend(itertools.repeat(None, count))
        begun.paths.extend(plan.paths)
        begun.places.extend(plan.places)
        return True

    def _warming_up(self, key: tuple[str, Direction], now_s: float) -> bool:
        """The CPE and direction was first heard from less than the warm-up ago."""
        first_report_s = self._heard.first_report_s(key)
        return first_report_s is not None and not now_s - first_report_s >= self._warmup_s

    def _ask_all(self, begun: _Begun, now_s: float) -> tuple[list[_Deciding], list[_Rows]]:
        """The policy's questions for every CPE and direction the step decides: their paths'
        estimates asked of the estimator at once (a fleet's step fuses thousands of paths
        together, as columns where it answers so), then each question put together: the
        candidates as rows (returned, by accesses), the others as inputs (``request``;
        returned, a candidate with a path to explore among them)."""
        deciding = [d for d, _, _ in begun.asking]
        candidates, outcomes = begun.candidates, begun.outcomes
        paths = begun.paths
        if not paths:  # (no CPE with any access)
            for i, slot in enumerate(candidates.slots):
                d = outcomes[slot] = candidates.deciding(i, now_s)
                deciding.append(d)
            for d in deciding:
                d.request = self._policy_input(
                    d.cpe, d.direction, d.now_s, d.rule, d.current, d.excluded
                )
            return deciding, []
        found = self._estimate_rows(
            Places.known(paths, self._path_slots, np.array(begun.places, dtype=np.intp)), now_s
        )
        for d, start, count in begun.asking:
            d.request = self._request(d, found, start, count)
        # A path known only from below is for exploration to show the policy: its CPE's
        # question goes as an input. (How many such paths each CPE has, from running sums.)
        rowed = list(range(len(candidates)))
        if self._exploration is not None and len(candidates):
            explore = np.zeros(len(paths) + 1, dtype=np.int64)
            np.cumsum(found.available & found.lower_bound, out=explore[1:])
            starts = np.array(candidates.starts, dtype=np.intp)
            ends = starts + np.fromiter(
                map(len, map(_PATHS, candidates.asked)), dtype=np.intp, count=len(candidates)
            )
            exploring = np.flatnonzero(explore[ends] != explore[starts]).tolist()
            if exploring:
                for i in exploring:
                    d = outcomes[candidates.slots[i]] = candidates.deciding(i, now_s)
                    d.request = self._request(d, found, int(starts[i]), int(ends[i] - starts[i]))
                    deciding.append(d)
                taken = set(exploring)
                rowed = [i for i in rowed if i not in taken]
        # by accesses, in the step's order (a fleet's usual: one group, every CPE alike; each
        # CPE has a tuple of its own, so they are compared by value, in C)
        groups: dict[tuple[str, ...], list[int]] = {}
        cpes = candidates.cpes
        first = cpes[rowed[0]].access_names if rowed else ()
        accesses_of = list(map(_ACCESS_NAMES, _picked(cpes, rowed)))
        if accesses_of.count(first) == len(accesses_of):
            groups = {first: rowed} if rowed else {}
        else:
            for i, accesses in zip(rowed, accesses_of, strict=True):
                groups.setdefault(accesses, []).append(i)
        rows = [_Rows(accesses, candidates, members, now_s) for accesses, members in groups.items()]
        for group in rows:
            group.questions = self._put_rows(group, found)
        return deciding, rows

    def _request(self, d: _Deciding, found: EstimateRows, start: int, count: int) -> PolicyInput:
        """``d``'s question as an input, from its paths' estimates among the step's."""
        return self._policy_input(
            d.cpe,
            d.direction,
            d.now_s,
            d.rule,
            d.current,
            d.excluded,
            iter([found.estimate(i) for i in range(start, start + count)]),
        )

    def _asked_of(self, cpe: Cpe, direction: Direction) -> _Asked:
        """The paths of the CPE and direction with their places, made the first time (and
        again for a CPE whose accesses changed)."""
        key = (cpe.cpe_id, direction)
        asked = self._asked.get(key)
        accesses = cpe.access_names
        if asked is None or asked.accesses is not accesses:
            paths = [(key[0], a, key[1]) for a in accesses]
            asked = self._asked[key] = _Asked(
                accesses,
                paths,
                self._path_slots.many(paths).tolist(),
                self._decision_times.slots.of(key),
            )
        return asked

    def _estimate_rows(
        self, asked: Places[tuple[str, str, Direction]], now_s: float
    ) -> EstimateRows:
        """The estimator's estimates of these paths (with their places in the loop's path
        slots, the estimator's where it keeps its own by place), as columns."""
        estimator = self._estimator
        if isinstance(estimator, EstimatesAsRows):
            return estimator.estimate_rows(asked, now_s)
        paths = asked.keys
        if isinstance(estimator, ManyEstimates):
            return EstimateRows.of(paths, estimator.estimate_many(paths, now_s))
        return EstimateRows.of(paths, [estimator.estimate(*path, now_s) for path in paths])

    def _put_rows(self, rows: _Rows, found: EstimateRows) -> BalancingRows:
        """``_policy_input`` for questions in the rows (nothing excluded, no word of the
        agent's, nothing to explore), all at once: the same state kept of each path and CPE
        (the last usable estimate, the outage risk, the decision interval, the end of
        exploration's raises)."""
        accesses, members, candidates = rows.accesses, rows.members, rows.candidates
        shape = (len(members), len(accesses))
        at = (np.array(rows.starts, dtype=np.intp)[:, None] + np.arange(len(accesses))).ravel()
        measured = found.available[at] & (found.capacity[at] > 0)
        capacity = np.where(measured, found.capacity[at], 0.0)
        stddev = np.where(measured, found.stddev[at], 0.0)
        measured_at_s = np.where(measured, found.measured_at[at], 0.0)
        places = np.array(rows.path_places, dtype=np.intp)
        risk = self._outage_risk.observe_many(places, measured)
        kept = np.flatnonzero(measured)
        self._last_usable_estimate.put_many(
            places[kept],
            capacity[kept],
            stddev[kept],
            measured_at_s[kept],
            found.lower_bound[at[kept]],
            found.source if not found.made else [found.made[i].source for i in at[kept].tolist()],  # type: ignore[union-attr]
        )
        now_s = np.full(len(members), rows.now_s)
        exploration = self._exploration
        if exploration is not None:
            balancing, keys, rules = SteeringMode.LOAD_BALANCING, candidates.keys, candidates.rules
            exploration.end_raises_many(
                (keys[i] for i in members if rules[i].mode == balancing), accesses
            )
        # the weights in force as rows of numbers (none: zeros), put into one array at once
        zeros = (0,) * len(accesses)
        pick = itemgetter(*accesses) if len(accesses) > 1 else lambda w: (w[accesses[0]],)
        currents = _picked(candidates.currents, members)
        has_current = np.fromiter(map(is_not, currents, _NONES), dtype=bool, count=len(currents))
        plan = candidates.plan
        if plan is not None and len(members) == len(plan.keys):
            # (a fleet's usual: the whole part, every one with weights in force, most of them
            # the same sets as at the last step)
            current = plan.in_force_rows(accesses, currents)
        else:
            if has_current.all():  # (once its first weights are pushed; in C)
                in_force = list(map(pick, map(_WEIGHTS, currents)))
            else:
                in_force = [zeros if held is None else pick(held.weights) for held in currents]
            current = np.array(in_force, dtype=np.int64).reshape(shape)
        times = self._decision_times
        intervals = times.intervals(np.array(rows.key_places, dtype=np.intp), now_s)
        return BalancingRows(
            accesses,
            now_s,
            measured.reshape(shape),
            capacity.reshape(shape),
            stddev.reshape(shape),
            measured_at_s.reshape(shape),
            risk.reshape(shape),
            intervals,
            current,
            has_current,
            [frozenset()] * len(members),
        )

    def _propose_all(self, deciding: Sequence[_Deciding], rows: Sequence[_Rows] = ()) -> None:
        """The policy's proposals for every CPE and direction the step decides, at once: the
        questions put as inputs, then those put as rows."""
        asking = [d for d in deciding if d.request is not None]
        proposals = self._policy.propose_many([d.request for d in asking if d.request])
        for item, proposal in zip(asking, proposals, strict=True):
            item.proposal = proposal
        for group in rows:
            assert group.questions is not None  # (put together by _ask_all)
            group.needed = self._needed(group)
            group.answers = self._policy.answer_rows(group.questions, group.needed)

    def _needed(self, rows: _Rows) -> npt.NDArray[np.float64] | None:
        """Per row, the predicted gain new weights would need to be pushed now (infinite: the
        push budget is spent), for the policy to spare working out the weights of the rows
        that could not gain that much (``_held_by_budget``; the policy tells the weights in
        force that carry nothing); NaN for the rows that are not to be spared: no weights
        in force, no budget yet, or something that cannot wait."""
        questions = rows.questions
        assert questions is not None  # (put together by _ask_all)
        min_gain = self._hysteresis.min_gain
        if self._hysteresis.max_pushes_per_s is None:
            needed = np.full(len(rows.members), min_gain)
        else:
            places = np.array(rows.key_places, dtype=np.intp)
            needed = PushBudget.needed_many(self._budget_table()[places], rows.now_s, min_gain)
        needed[~questions.has_current] = math.nan
        spare = ~np.isnan(needed)
        if not spare.any():
            return None
        spare &= ~rows.lifted_or_changed()  # an override lifted, a mode changed
        if not spare.any():
            return None
        usable = self._policy.usable_rows(questions)
        spare &= ~row_any(~usable & (questions.current > 0))  # a weighted path lost
        spare &= self._paths_back(rows, usable) == 0  # a path back (usable again)
        if not spare.any():
            return None
        needed[~spare] = math.nan
        return needed

    def _paths_back(self, rows: _Rows, usable: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """Per row, the paths ``usable`` now that the CPE and direction's last decision did
        not find usable, as bits over ``rows.accesses`` (0: none, or never decided); worked
        out once per step (``_needed`` and ``_conclude_rows`` read it, before either
        remembers anything of the step): each distinct set remembered turned into bits once,
        rather than every row's set compared (a microsecond a row)."""
        if rows.back is not None:
            return rows.back
        accesses = rows.accesses
        before = list(map(self._last_usable.get, _picked(rows.candidates.keys, rows.members)))
        bits_of: dict[frozenset[str] | None, int] = {None: 0}
        for known in set(before) - bits_of.keys():
            assert known is not None  # (None is in bits_of)
            bits_of[known] = sum(1 << k for k, a in enumerate(accesses) if a in known)
        # never decided: no path can be back (every one reads as usable before)
        ever = np.fromiter(map(is_not, before, _NONES), dtype=bool, count=len(before))
        before_bits = np.array(list(map(bits_of.__getitem__, before)), dtype=np.int64)
        now_bits = usable.astype(np.int64) @ (np.int64(1) << np.arange(len(accesses)))
        rows.back = np.where(ever, now_bits & ~before_bits, 0)
        return rows.back

    def _conclude_rows(
        self, rows: Sequence[_Rows], outcomes: list[StepOutcome | _Deciding | _Pending | None]
    ) -> None:
        """``_conclude`` for the questions put as rows whose weights the hysteresis or the
        push limit holds (a fleet's usual: its weights stay), worked out as arrays: their
        outcome put in the step's ``outcomes`` at their place, and what a decision remembers
        remembered. The others are put there as a decision with its proposal, for
        ``_conclude`` to decide as any other (a push, or a reason only it words).
        tests/test_control_loop_many.py holds the rows to the inputs decided one by one."""
        hysteresis, held_before = self._hysteresis, self._held_outcomes
        last_usable, last_rule, last_override = (
            self._last_usable,
            self._last_rule,
            self._last_override,
        )
        read: list[int] = []  # the places of the CPEs and directions whose reports were read
        for group in rows:
            questions, answers = group.questions, group.answers
            assert questions is not None  # (asked, then answered)
            assert answers is not None
            made = RowProposals(self._policy, questions, answers)
            accesses, current, proposed = group.accesses, questions.current, answers.weights
            # What the arrays tell at once (Hysteresis.decide): the rows held unless one of
            # the changes that cannot wait read below (a weighted path lost is one of them).
            weighted_lost = row_any(~answers.usable & (current > 0))
            judged = hysteresis.held_many(
                current, proposed, answers.predicted[:, 0], answers.predicted[:, 1], weighted_lost
            )
            asked = answers.answered & questions.has_current
            held = judged.held & asked
            # Pushes for a gain alone (any path usable): the push limit holds most of them
            # back at sub-second periods (a quarter of a 1,000-CPE step's decisions at 100 ms),
            # read here from the CPE's budget rather than through a proposal each.
            limited = hysteresis.max_pushes_per_s is not None
            for_gain = judged.for_gain & asked & row_any(answers.usable) & limited
            members, rise = group.members, judged.gain.tolist()
            spared = answers.spared if answers.spared is not None else np.zeros(len(members), bool)
            candidates, now_s = group.candidates, group.now_s
            keys = _picked(candidates.keys, members)
            slots = _picked(candidates.slots, members)
            usable_sets = made.usable_sets()
            # An override lifted or a mode changed, or a path back (usable again since the last
            # decision) that the proposal weights: a push that cannot wait.
            weighted = (proposed > 0).astype(np.int64) @ (np.int64(1) << np.arange(len(accesses)))
            cannot_wait = group.lifted_or_changed() | (
                (self._paths_back(group, answers.usable) & weighted) != 0
            )
            # The rows' kinds (``Hysteresis.decide`` and ``PushBudget.admit`` row by row): a
            # push for the gain alone that may wait is the budget's to let go; a change that
            # cannot wait, or a gain the hysteresis does not hold, is decided on its own.
            gaining = ~spared & for_gain & ~cannot_wait
            stays = ~spared & held & ~((held & ~judged.unchanged) & cannot_wait)
            reasons: dict[int, str] = {}  # the staying rows' reasons, by row
            gaining_rows = np.flatnonzero(gaining).tolist()
            refusals = self._budget_refusals(
                _picked(keys, gaining_rows),
                _picked(group.key_places, gaining_rows),
                _picked(rise, gaining_rows),
                now_s,
            )
            let_go: list[int] = []
            for row, refusal in zip(gaining_rows, refusals, strict=True):
                if refusal is None:
                    let_go.append(row)
                else:
                    reasons[row] = f"{hysteresis.gain_reason(rise[row])}, {refusal}"
            if let_go:
                # Pushes for the gain alone, which the budget lets go: decided here together
                # (a fleet's usual push at 1 s periods, a third of its rows)
                pushes = self._pushes_for_gain(
                    group, made, let_go, _picked(usable_sets, let_go), _picked(rise, let_go)
                )
                deque(map(outcomes.__setitem__, _picked(slots, let_go), pushes), maxlen=0)
            for row in np.flatnonzero(~spared & ~gaining & ~stays).tolist():
                outcomes[slots[row]] = candidates.deciding(
                    members[row], now_s, made.proposal(row), judged=True
                )
            # (of the rows spared, those no weights could gain enough for: at most what any
            # could, and the gain needed; the others' budget is spent)
            if spared.any():
                assert answers.within is not None  # (spared: asked, then answered)
                assert group.needed is not None
                within, needed = answers.within.tolist(), group.needed.tolist()
                spent = spared & np.isnan(answers.within)
                # (a spent budget's reason names its rate: read from the budgets' rows, where
                # the spared rows' budgets were read from)
                rates = self._budget_rows[np.array(group.key_places, dtype=np.intp)[spent], 2]
                spent_rows = np.flatnonzero(spent).tolist()
                reasons.update(
                    zip(spent_rows, map(PushBudget.spent_reason_for, rates.tolist()), strict=True)
                )
                out_of_reach = np.flatnonzero(spared & ~spent).tolist()
                worded = hysteresis.out_of_reach_many(
                    _picked(within, out_of_reach), _picked(needed, out_of_reach)
                )
                reasons.update(zip(out_of_reach, worded, strict=True))
            unchanged_rows = np.flatnonzero(stays & judged.unchanged).tolist()
            reasons.update(zip(unchanged_rows, itertools.repeat("unchanged")))
            small_gain_rows = np.flatnonzero(stays & ~judged.unchanged).tolist()
            worded = hysteresis.too_small_many(_picked(rise, small_gain_rows))
            reasons.update(zip(small_gain_rows, worded, strict=True))
            # What a decision remembers, for every row that stays, at once.
            staying = sorted(reasons)
            kept = _picked(keys, staying)
            last_usable.update(zip(kept, _picked(usable_sets, staying), strict=True))
            rules = _picked(candidates.rules, members)
            last_rule.update(zip(kept, _picked(rules, staying), strict=True))
            last_override.update(dict.fromkeys(kept))  # (no override in the rows)
            read += _picked(group.key_places, staying)
            # (the outcome of the step before where it says the same, a fleet's usual: the
            # step before's outcomes and their reasons read in C, a new one made for the others)
            said_now = list(map(reasons.__getitem__, staying))
            saids: list[StepOutcome | _NotSaid] = list(
                map(held_before.get, kept, itertools.repeat(_NOT_SAID))
            )
            changed = list(
                itertools.compress(itertools.count(), map(ne, map(_REASON, saids), said_now))
            )
            if changed:
                changed_keys = _picked(kept, changed)
                remade = StepOutcome.unpushed_many(
                    list(map(_FIRST, changed_keys)),
                    list(map(_SECOND, changed_keys)),
                    _picked(said_now, changed),
                )
                held_before.update(zip(changed_keys, remade, strict=True))
                deque(map(saids.__setitem__, changed, remade), maxlen=0)
            made_all = cast(list[StepOutcome], saids)  # (every one said: none is _NOT_SAID)
            deque(map(outcomes.__setitem__, _picked(slots, staying), made_all), maxlen=0)
        self._heard.drop_received(np.array(read, dtype=np.intp))

    def _pushes_for_gain(
        self,
        group: _Rows,
        made: RowProposals,
        rows: list[int],
        usable: list[frozenset[str]],
        gains: list[float],
    ) -> list[_Pending]:
        """``_conclude`` of the proposals of these rows of ``group`` that
        ``Hysteresis.held_many`` found to push for their gain alone and that the budgets
        (refilled to the step's time) let go: what ``decide`` and ``admit`` would say of each
        (``predicted gain …``, its budget spent), without a decision and a proposal made
        first, and for all of them at once: a fleet's step at 1 s periods pushes for a third
        of its rows (tests/test_control_loop_many.py holds them alike)."""
        candidates = group.candidates
        members = _picked(group.members, rows)
        keys = _picked(candidates.keys, members)
        currents = cast(list[WeightSet], _picked(candidates.currents, members))
        rules = _picked(candidates.rules, members)
        self._last_usable.update(zip(keys, usable, strict=True))
        received = self._heard.take_received_at(
            np.array(_picked(group.key_places, rows), dtype=np.intp)
        )
        # (refilled and noted by ``_budget_refusals``: the note reads them when the rows do)
        deque(map(_SPEND, map(self._budgets.__getitem__, keys)), maxlen=0)
        accesses = made.questions.accesses
        weights = list(map(dict, map(zip, itertools.repeat(accesses), made.weight_rows(rows))))
        reasons = self._hysteresis.gain_reasons(gains, map(made.reason, rows))
        cpe_ids, directions = list(map(_FIRST, keys)), list(map(_SECOND, keys))
        sets = list(
            map(
                WeightSet.made,
                cpe_ids,
                directions,
                weights,
                map(_MODE, rules),
                map(next_after, map(_SEQUENCE, currents)),
                reasons,
            )
        )
        decided_s = time.monotonic()
        return list(
            map(
                _Pending,
                cpe_ids,
                directions,
                sets,
                rules,
                itertools.repeat(None),
                currents,
                received,
                itertools.repeat(decided_s),
            )
        )

    def _held_by_budget(
        self,
        begun: _Deciding,
        appeared: Set[str],
        lost: Set[str],
        current_predicted_mbps: float | None,
    ) -> str | None:
        """Why no new weights can go now whatever the policy proposes (None: they may): the
        push budget is spent, or no weights could be predicted to gain what a push needs now
        (the hysteresis's threshold, raised as the budget empties: ``within_reach``), and
        nothing that cannot wait is there (first weights, an override or a mode changed, a
        weighted path lost, a path back, weights in force predicted to carry nothing).
        Whether the proposal is unchanged, a small gain or a large one, it is held back: the
        reason says so, the same for questions put as rows, whose weights are then not even
        worked out (``_needed``)."""
        current = begun.current
        if (
            current is None
            or begun.mode_changed
            or begun.override_changed
            or appeared
            or current_predicted_mbps is None
            or not current_predicted_mbps > 0
            or any(current.weights.get(a, 0) > 0 for a in lost)
        ):
            return None
        min_gain = self._hysteresis.min_gain
        if self._hysteresis.max_pushes_per_s is None:
            needed = min_gain
        else:
            budget = self._budgets.get((begun.cpe.cpe_id, begun.direction))
            if budget is None:
                return None
            needed = budget.needed_at(begun.now_s, min_gain)
            if math.isinf(needed):
                return budget.spent_reason
        # No weights could gain what a push needs: held back, as a row's would be (_needed).
        at_most = (
            self._policy.within_reach(begun.request, current_predicted_mbps)
            if begun.request is not None
            else None
        )
        if at_most is None or not at_most < needed:
            return None
        return self._hysteresis.out_of_reach(at_most, needed)

    def _budget_refusals(
        self,
        keys: list[tuple[str, Direction]],
        places: list[int],
        gains: list[float],
        now_s: float,
    ) -> list[str | None]:
        """Why the push limit holds back a push for each gain now (``PushBudget.refusal``), or
        None, for these CPEs and directions (distinct; ``places``: theirs in the decision
        times' slots), worked out for all at once (``PushBudget.judged_many``): every budget
        refilled to ``now_s`` and noted (``_conclude`` then admits the same)."""
        if not keys:  # (no push for a gain alone: none under no limit)
            return []
        rate = self._hysteresis.max_pushes_per_s
        assert rate is not None  # (asked only under a limit)
        budgets: list[PushBudget | None] = list(map(self._budgets.get, keys))
        if any(map(is_, budgets, _NONES)):  # (a CPE's first push for a gain: started empty)
            budgets = [self._budget(key, rate, now_s) for key in keys]
        given: list[PushBudget] = budgets  # type: ignore[assignment]  # (none is None now)
        refusals = PushBudget.judged_many(given, now_s, gains, self._hysteresis.min_gain)
        self._budget_notes.update(zip(places, given, strict=True))
        return refusals

    def _budget(self, key: tuple[str, Direction], rate: float, now_s: float) -> PushBudget:
        """The CPE and direction's push budget, started empty now if it has none."""
        budget = self._budgets.get(key)
        if budget is None:
            budget = self._budgets[key] = PushBudget.empty(rate, now_s)
            self._note_budget(key, budget)
        return budget

    def _begin(
        self,
        cpe: Cpe,
        direction: Direction,
        now_s: float,
        current: WeightSet | None,
        override: Override | None,
    ) -> StepOutcome | _Deciding:
        """What the decision starts from: the weights in force and the override (read), the
        rule, and the policy's question (answered for the whole step at once), or the outcome
        already when there is nothing to ask (frozen, warming up)."""
        cpe_id = cpe.cpe_id
        key = (cpe_id, direction)
        override_revision = override.revision if override is not None else None
        # (a key never decided reads as unchanged)
        override_changed = self._last_override.get(key, override_revision) != override_revision
        rule = self._rule_for(cpe_id, override)
        # (the same rule object, a fleet's usual, is the same rule without a comparison)
        last_rule = self._last_rule.get(key, rule)
        mode_changed = last_rule is not rule and last_rule != rule

        if override is not None and override.frozen and override.weights is None:
            # Frozen: the weights in force stay; when the freeze ends, the changed override
            # revision makes the next decision push whatever is best then.
            return StepOutcome(cpe.cpe_id, direction, None, f"frozen by {override.requested_by}")
        begun = _Deciding(
            cpe,
            direction,
            current,
            override,
            override_revision,
            override_changed,
            rule,
            mode_changed,
            now_s=now_s,
        )
        # (_not_heard_from's own test, read here: a fleet's CPEs warmed up long ago, and none
        # is looked up while the newest first report is older than the warm-up)
        warming_up = not now_s - self._heard.newest_first_s >= self._warmup_s and (
            self._warming_up(key, now_s)
        )
        if warming_up and begun.asks:
            silent = self._not_heard_from(cpe, direction, now_s)
            if silent:
                return StepOutcome(
                    cpe.cpe_id,
                    direction,
                    None,
                    f"waiting for {', '.join(silent)} to report (warm-up); unchanged",
                )
        return begun

    def _conclude(self, begun: _Deciding) -> StepOutcome | _Pending:
        """The decision from the policy's proposal (or the override's weights): hysteresis,
        then the set to push, if any."""
        cpe, direction, current, override = (
            begun.cpe,
            begun.direction,
            begun.current,
            begun.override,
        )
        key = (cpe.cpe_id, direction)
        rule, override_revision = begun.rule, begun.override_revision
        if override is not None and override.weights is not None:
            weights = {a: override.weights.get(a, 0) for a in cpe.access_names}
            predicted_mbps, current_predicted_mbps = 0.0, None
            appeared: frozenset[str] = frozenset()
            lost: frozenset[str] = frozenset()
            reason = f"override by {override.requested_by}"
        else:
            proposal = begun.proposal
            if proposal is None:
                return StepOutcome(cpe.cpe_id, direction, None, "no usable estimate; unchanged")
            weights = dict(proposal.weights)
            predicted_mbps = proposal.predicted_mbps
            current_predicted_mbps = proposal.current_predicted_mbps
            reason = proposal.reason
            every = cpe.access_set
            appeared = proposal.usable - self._last_usable.get(key, every)
            lost = every - proposal.usable
            self._last_usable[key] = proposal.usable

        report_received_s = self._heard.take_received(key)
        spent = (
            None
            if begun.judged
            else self._held_by_budget(begun, appeared, lost, current_predicted_mbps)
        )
        if spent is not None:
            self._last_rule[key] = rule
            self._last_override[key] = override_revision
            return StepOutcome.unpushed(cpe.cpe_id, direction, spent)
        decision = self._hysteresis.decide(
            current.weights if current is not None else None,
            weights,
            predicted_mbps=predicted_mbps,
            current_predicted_mbps=current_predicted_mbps,
            appeared=appeared,
            lost=lost,
            mode_changed=begun.mode_changed,
            override_changed=begun.override_changed,
        )
        rate = self._hysteresis.max_pushes_per_s
        if decision.push and rate is not None:
            budget = self._budget(key, rate, begun.now_s)
            decision = budget.admit(decision, self._hysteresis.min_gain, begun.now_s)
            self._note_budget(key, budget)
        if not decision.push:
            self._last_rule[key] = rule
            self._last_override[key] = override_revision
            return StepOutcome.unpushed(cpe.cpe_id, direction, decision.reason)

        # The policy's weights (the operator's are checked as any others)
        from_report = override is None or override.weights is None
        weight_set = (WeightSet.made if from_report else WeightSet)(
            cpe.cpe_id,
            direction,
            weights,
            rule.mode,
            next_after(current.sequence if current is not None else None),
            f"{decision.reason}: {reason}",
        )
        # The report this decision follows, if one came since the last decision (a push after
        # an agent's event or an override has no report to be timed from).
        return _Pending(
            cpe.cpe_id,
            direction,
            weight_set,
            rule,
            override_revision,
            current,
            report_received_s if from_report else None,
            time.monotonic(),
        )

    def _finish(
        self, item: _Pending, failure: WeightPushError | None, saves: _Saves
    ) -> StepOutcome:
        key = (item.cpe_id, item.direction)
        if failure is not None:
            # Leave the remembered rule and override untouched so the next step tries again,
            # from what the agent holds if it said (its sequence, so the retry is not refused).
            # Logged when the reason changes: a broken agent fails the same way every step.
            if self._last_failure.get(key) != str(failure):
                log.warning("push to %s %s failed: %s", item.cpe_id, item.direction, failure)
                self._last_failure[key] = str(failure)
            self._refund(key)  # not in force: the push limit does not count it
            held, current = failure.held, item.current
            if held is not None and (
                current is None
                or held.sequence == current.sequence
                or is_after(held.sequence, current.sequence)
            ):
                saves.sets.append(held)
            return StepOutcome(item.cpe_id, item.direction, None, f"{PUSH_FAILED}: {failure}")
        saves.sets.append(item.weight_set)
        saves.landed.append(item)
        delay = None
        if item.report_received_s is not None and item.decided_s is not None and item.landed:
            delay = ControlDelay(
                item.decided_s - item.report_received_s, item.landed[0] - item.report_received_s
            )
        return StepOutcome.made(
            item.cpe_id, item.direction, item.weight_set, item.weight_set.reason, delay
        )

    def _not_heard_from(self, cpe: Cpe, direction: Direction, now_s: float) -> list[str]:
        """Accesses without any estimate yet, while the CPE is still warming up."""
        first = self._heard.first_report_s((cpe.cpe_id, direction))
        if first is None or now_s - first >= self._warmup_s:
            return []
        return [
            a
            for a in cpe.access_names
            if self._estimator.estimate(cpe.cpe_id, a, direction, now_s) is None
        ]

    def _rule_for(self, cpe_id: str, override: Override | None) -> SteeringRule:
        if override is not None and override.rule is not None:
            return override.rule
        return self._rules.get(cpe_id, _DEFAULT_RULE)

    def _policy_input(
        self,
        cpe: Cpe,
        direction: Direction,
        now_s: float,
        rule: SteeringRule,
        current: WeightSet | None,
        excluded: Collection[str] = (),
        found: Iterator[CapacityEstimate | None] | None = None,
    ) -> PolicyInput:
        """``excluded``: accesses the operator took out; they get no estimate, so weight 0.
        ``found``: the estimator's estimates of the other accesses, in order, asked already
        (None: asked here)."""
        cpe_id = cpe.cpe_id
        accesses = cpe.access_names
        outage_risk = self._outage_risk
        said_of = self._estimator.estimate
        estimates: list[CapacityEstimate | None] = []
        risks: list[float] = []
        for access in accesses:
            key = (cpe_id, access, direction)
            if access in excluded:
                estimate, risk = None, outage_risk.probability(key)
            else:
                said = next(found) if found is not None else said_of(*key, now_s)
                estimate = self._estimate(cpe_id, access, direction, now_s, said)
                usable = estimate is not None and estimate.available and estimate.capacity_mbps > 0
                risk = outage_risk.observe(key, usable)
            estimates.append(estimate)
            risks.append(risk)
        conditions_of = self._heard.conditions
        conditions = [conditions_of((cpe_id, a, direction)) for a in accesses]
        if self._exploration is not None and rule.mode == SteeringMode.LOAD_BALANCING:
            explored = self._exploration.views(
                cpe_id,
                direction,
                dict(zip(accesses, estimates, strict=True)),
                {a: c.throughput_mbps for a, c in zip(accesses, conditions, strict=True)},
                current.weights if current is not None else None,
                now_s,
            )
            estimates = [explored[a] for a in accesses]
        paths = tuple(
            PathView(access, estimate, c.rtt_ms, c.loss_rate_permille, risk)
            for access, estimate, c, risk in zip(
                accesses, estimates, conditions, risks, strict=True
            )
        )
        carried = [c.throughput_mbps for c in conditions if c.throughput_mbps is not None]
        demand_mbps = sum(carried) if carried else None
        return PolicyInput(
            cpe_id=cpe_id,
            direction=direction,
            now_s=now_s,
            paths=paths,
            rule=rule,
            demand_mbps=demand_mbps,
            current=current.weights if current is not None else None,
            decision_interval_s=self._interval_since_last_decision(cpe.cpe_id, direction, now_s),
            excluded=frozenset(excluded),
        )

    def _interval_since_last_decision(
        self, cpe_id: str, direction: Direction, now_s: float
    ) -> float:
        """The usual time between this CPE's decisions (1 s until known): event-driven ones in
        between must not make it look shorter than the reporting period for long."""
        return self._decision_times.interval((cpe_id, direction), now_s)

    def _estimate(
        self,
        cpe_id: str,
        access: str,
        direction: Direction,
        now_s: float,
        estimate: CapacityEstimate | None,
    ) -> CapacityEstimate | None:
        """The estimator's belief (``estimate``), corrected by what the agent said of the
        carrier since."""
        key = (cpe_id, access, direction)
        carrier = self._carrier.get((cpe_id, access))
        if carrier is not None and carrier.up and carrier.heard_after:
            # A report of a period that began after the return: the measurement speaks again.
            del self._carrier[(cpe_id, access)]
            carrier = None
        if carrier is None:
            if estimate is not None and estimate.available and estimate.capacity_mbps > 0:
                self._last_usable_estimate.put(key, estimate)
            return estimate
        if not carrier.up:
            return None
        before = self._last_usable_estimate.get(key)
        if before is None:
            return estimate
        return replace(
            before,
            stddev_mbps=before.stddev_mbps * RETURN_STDDEV_FACTOR,
            source=f"{before.source}, before the outage",
            measured_at_s=carrier.since_s,
            available=True,
        )
