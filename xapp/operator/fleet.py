"""The fleet at a glance: one row per CPE saying whether it is being steered, and if not, why.

An operator with thousands of CPEs needs the few that are not steered first: reports that
stopped, an agent that fails, a push refused, an E2 node down. Each row carries its problems
(most serious first) and an attention score to sort by; the API pages and filters the rows and
the dashboard's fleet table shows them. Everything here is read from memory: a page of 10,000
CPEs never waits on SDL or an agent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from core.domain import Cpe, Direction

# What can be wrong with a CPE, from the most to the least serious. The weight is what the
# problem adds to the row's attention score: a row's score orders the fleet table.
PROBLEMS: dict[str, tuple[int, str]] = {
    "agent-failing": (40, "its agent fails (left alone for a while) or none is configured"),
    "push-failed": (30, "the latest push did not reach its agent"),
    "no-reports": (25, "no KPI report for any of its accesses"),
    "node-down": (20, "an E2 node of one of its accesses is not active"),
    "reports-stale": (15, "an access's latest report is older than two reporting periods"),
    "no-weights": (10, "no weights in force yet"),
}
# Not a problem, but the operator should know it is there: shown, sorted after real problems.
OVERRIDE_SCORE = 1

SortKey = Literal["attention", "cpe_id", "weights_age"]
# the rows one may keep: one problem's, the steered ones, those with overrides
RowFilter = Literal[
    "agent-failing",
    "push-failed",
    "no-reports",
    "node-down",
    "reports-stale",
    "no-weights",
    "steered",
    "overridden",
]


@dataclass(frozen=True)
class DirectionState:
    """What the loop last did for one CPE and direction."""

    weights: Mapping[str, int] | None
    weights_since_s: float | None  # when the weights in force were pushed (None: before start)
    last_push_result: str | None  # "applied" / "failed" / None: nothing pushed since start
    last_push_s: float | None
    last_push_reason: str | None
    agent_state: str  # "ok", "failing", "unknown" (not called yet), "missing" (none configured)
    agent_error: str | None


@dataclass(frozen=True)
class FleetInputs:
    """The running xApp as the fleet view sees it; ``XappView.fleet_inputs`` gathers it."""

    now_s: float
    cpes: Sequence[Cpe]
    directions: Sequence[Direction]
    # per E2 node: its state ("active", "subscribing", …) and its reporting period
    node_states: Mapping[str, str]
    node_period_s: Mapping[str, float]
    # when the newest report of a CPE's access came (any direction); absent: never
    report_time: Callable[[str, str], float | None]
    direction_state: Callable[[str, Direction], DirectionState]
    overrides: Mapping[str, Sequence[str]] = field(default_factory=dict)  # CPE → kinds


def fleet_rows(inputs: FleetInputs) -> list[dict[str, Any]]:
    """One row per CPE, in the deployment's order."""
    return [_row(cpe, inputs) for cpe in inputs.cpes]


def _row(cpe: Cpe, inputs: FleetInputs) -> dict[str, Any]:
    now = inputs.now_s
    problems: list[str] = []
    ages: dict[str, float | None] = {}
    nodes_total = nodes_active = 0
    stale = node_down = False
    for name, access in cpe.accesses.items():
        node = access.e2_node_id
        if node is None:  # no E2 node: known through probes only, nothing to report
            continue
        nodes_total += 1
        if inputs.node_states.get(node) == "active":
            nodes_active += 1
        else:
            node_down = True
        heard = inputs.report_time(cpe.cpe_id, name)
        ages[name] = None if heard is None else round(max(0.0, now - heard), 1)
        period = inputs.node_period_s.get(node, 1.0)
        if heard is not None and now - heard > 2 * period:
            stale = True
    heard_any = any(age is not None for age in ages.values())
    directions: dict[str, Any] = {}
    for direction in inputs.directions:
        state = inputs.direction_state(cpe.cpe_id, direction)
        if state.agent_state in ("failing", "missing") and "agent-failing" not in problems:
            problems.append("agent-failing")
        if state.last_push_result == "failed" and "push-failed" not in problems:
            problems.append("push-failed")
        if state.weights is None and "no-weights" not in problems:
            problems.append("no-weights")
        directions[direction.value] = {
            "weights": None if state.weights is None else dict(state.weights),
            "weights_age_s": _age(now, state.weights_since_s),
            "last_push": None
            if state.last_push_result is None
            else {
                "result": state.last_push_result,
                "age_s": _age(now, state.last_push_s),
                "reason": state.last_push_reason,
            },
            "agent": {"state": state.agent_state, "error": state.agent_error},
        }
    if nodes_total and not heard_any:
        problems.append("no-reports")
    elif stale:
        problems.append("reports-stale")
    if node_down:
        problems.append("node-down")
    problems.sort(key=lambda p: -PROBLEMS[p][0])
    overrides = list(inputs.overrides.get(cpe.cpe_id, ()))
    attention = sum(PROBLEMS[p][0] for p in problems) + (OVERRIDE_SCORE if overrides else 0)
    return {
        "cpe_id": cpe.cpe_id,
        "accesses": list(cpe.access_names),
        "steered": not problems,
        "problems": problems,
        "attention": attention,
        "reports_age_s": ages,
        "nodes": {"active": nodes_active, "total": nodes_total},
        "directions": directions,
        "overrides": overrides,
    }


def _age(now_s: float, then_s: float | None) -> float | None:
    return None if then_s is None else round(max(0.0, now_s - then_s), 1)


def summary(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many CPEs are steered, how many have each problem, how many have overrides."""
    counts = {"cpes": 0, "steered": 0, "overridden": 0, **dict.fromkeys(PROBLEMS, 0)}
    for row in rows:
        counts["cpes"] += 1
        counts["steered"] += row["steered"]
        counts["overridden"] += bool(row["overrides"])
        for problem in row["problems"]:
            counts[problem] += 1
    return counts


def select(
    rows: Sequence[dict[str, Any]],
    search: str | None = None,
    problem: str | None = None,
    sort: SortKey = "attention",
) -> list[dict[str, Any]]:
    """The rows an operator asked for: ``search`` within the CPE id (case-insensitive),
    ``problem`` one of PROBLEMS, "steered" or "overridden"; sorted by what needs attention
    (most first), by id, or by the oldest weights first."""
    chosen: Iterable[dict[str, Any]] = rows
    if search:
        wanted = search.lower()
        chosen = (r for r in chosen if wanted in r["cpe_id"].lower())
    if problem == "steered":
        chosen = (r for r in chosen if r["steered"])
    elif problem == "overridden":
        chosen = (r for r in chosen if r["overrides"])
    elif problem is not None:
        chosen = (r for r in chosen if problem in r["problems"])
    found = list(chosen)
    if sort == "attention":
        found.sort(key=lambda r: (-r["attention"], r["cpe_id"]))
    elif sort == "weights_age":
        found.sort(key=lambda r: (-_oldest_weights(r), r["cpe_id"]))
    else:
        found.sort(key=lambda r: r["cpe_id"])
    return found


def _oldest_weights(row: dict[str, Any]) -> float:
    """The age of the row's oldest weights; none at all counts as older than any."""
    ages = [d["weights_age_s"] for d in row["directions"].values()]
    if any(d["weights"] is None for d in row["directions"].values()):
        return float("inf")
    known = [a for a in ages if a is not None]
    return max(known, default=0.0)


class FleetSnapshots:
    """The fleet's rows as they were when a page was asked for, kept a while under a number.

    In a live fleet a CPE's attention changes from one second to the next: paging through
    fresh rows would show a CPE on two pages or on none. A page names the snapshot it came from;
    the next page asked with that number reads the same rows. A request without a number (or
    with one no longer kept) takes a fresh snapshot. Thread-safe: FastAPI runs the endpoint in
    its worker threads.
    """

    def __init__(self, build: Callable[[], list[dict[str, Any]]], kept: int = 4) -> None:
        self._build = build
        self._kept = kept
        self._rows: dict[int, list[dict[str, Any]]] = {}
        self._newest = 0
        self._lock = threading.Lock()

    def rows(self, snapshot: int | None = None) -> tuple[int, list[dict[str, Any]]]:
        """The snapshot's number and rows: the one asked for if still kept, else a fresh one."""
        with self._lock:
            if snapshot is not None and snapshot in self._rows:
                return snapshot, self._rows[snapshot]
        rows = self._build()  # outside the lock: building 10,000 rows takes a while
        with self._lock:
            self._newest += 1
            self._rows[self._newest] = rows
            for old in sorted(self._rows)[: -self._kept]:
                del self._rows[old]
            return self._newest, rows
