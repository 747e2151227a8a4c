"""The fleet view's rows: what makes a CPE need attention, and how an operator finds it among
1,000 (pure functions; the live table is in test_fleet_view.py)."""

from __future__ import annotations

from core.domain import AccessIdentity, Cpe, Direction
from xapp.operator.fleet import (
    PROBLEMS,
    DirectionState,
    FleetInputs,
    FleetSnapshots,
    fleet_rows,
    select,
    summary,
)

NOW = 10_000.0
ACCESSES = ("nr", "wifi", "lifi")


def fleet_of(count: int) -> list[Cpe]:
    return [
        Cpe(
            f"cpe-{n:04d}",
            {a: AccessIdentity(a, e2_node_id=f"{a}-node", ue_id=str(n)) for a in ACCESSES},
        )
        for n in range(count)
    ]


def healthy(cpe_id: str, direction: Direction) -> DirectionState:
    return DirectionState(
        weights={"nr": 30, "wifi": 100, "lifi": 1},
        weights_since_s=NOW - 12,
        last_push_result="applied",
        last_push_s=NOW - 12,
        last_push_reason="gain 4 %",
        agent_state="ok",
        agent_error=None,
    )


def inputs(cpes: list[Cpe], **changes: object) -> FleetInputs:
    base: dict[str, object] = {
        "now_s": NOW,
        "cpes": cpes,
        "directions": (Direction.DOWNLINK, Direction.UPLINK),
        "node_states": {f"{a}-node": "active" for a in ACCESSES},
        "node_period_s": {f"{a}-node": 1.0 for a in ACCESSES},
        "report_time": lambda cpe_id, access: NOW - 0.4,
        "direction_state": healthy,
    }
    base.update(changes)
    return FleetInputs(**base)  # type: ignore[arg-type]


def test_a_healthy_fleet_is_steered_with_weights_and_their_age() -> None:
    rows = fleet_rows(inputs(fleet_of(1000)))
    assert len(rows) == 1000
    assert all(r["steered"] and r["problems"] == [] and r["attention"] == 0 for r in rows)
    first = rows[0]
    assert first["directions"]["downlink"]["weights"] == {"nr": 30, "wifi": 100, "lifi": 1}
    assert first["directions"]["uplink"]["weights_age_s"] == 12.0
    assert first["reports_age_s"] == {"nr": 0.4, "wifi": 0.4, "lifi": 0.4}
    assert first["nodes"] == {"active": 3, "total": 3}
    assert summary(rows) == {
        "cpes": 1000,
        "steered": 1000,
        "overridden": 0,
        **dict.fromkeys(PROBLEMS, 0),
    }


def test_each_problem_is_found_and_the_worst_cpes_sort_first() -> None:
    cpes = fleet_of(1000)
    failing_agent = {"cpe-0007"}
    refused_push = {"cpe-0100"}
    silent = {"cpe-0500"}  # no report ever
    late = {"cpe-0900"}  # reports, but 5 periods old

    def direction_state(cpe_id: str, direction: Direction) -> DirectionState:
        state = healthy(cpe_id, direction)
        if cpe_id in failing_agent and direction == Direction.UPLINK:
            return DirectionState(
                None, None, "failed", NOW - 1, "push failed: refused", "failing", "timed out"
            )
        if cpe_id in refused_push and direction == Direction.DOWNLINK:
            return DirectionState(
                state.weights, NOW - 50, "failed", NOW - 1, "push failed: 409", "ok", None
            )
        return state

    def report_time(cpe_id: str, access: str) -> float | None:
        if cpe_id in silent:
            return None
        if cpe_id in late and access == "wifi":
            return NOW - 5.0
        return NOW - 0.3

    rows = fleet_rows(
        inputs(
            cpes,
            direction_state=direction_state,
            report_time=report_time,
            overrides={"cpe-0300": ["freeze"]},
        )
    )
    by_id = {r["cpe_id"]: r for r in rows}
    assert by_id["cpe-0007"]["problems"] == ["agent-failing", "push-failed", "no-weights"]
    assert by_id["cpe-0007"]["directions"]["uplink"]["agent"] == {
        "state": "failing",
        "error": "timed out",
    }
    assert by_id["cpe-0100"]["problems"] == ["push-failed"]
    assert by_id["cpe-0500"]["problems"] == ["no-reports"]
    assert by_id["cpe-0900"]["problems"] == ["reports-stale"]
    assert by_id["cpe-0300"]["steered"]
    assert by_id["cpe-0300"]["overrides"] == ["freeze"]

    ordered = [r["cpe_id"] for r in select(rows)]
    assert ordered[:5] == ["cpe-0007", "cpe-0100", "cpe-0500", "cpe-0900", "cpe-0300"]
    assert ordered[5] == "cpe-0000"  # then the steered ones, by id
    counts = summary(rows)
    assert counts["steered"] == 996
    assert counts["overridden"] == 1
    assert counts["push-failed"] == 2
    assert counts["agent-failing"] == 1

    assert [r["cpe_id"] for r in select(rows, problem="push-failed")] == ["cpe-0007", "cpe-0100"]
    assert [r["cpe_id"] for r in select(rows, problem="overridden")] == ["cpe-0300"]
    assert len(select(rows, problem="steered")) == 996
    assert [r["cpe_id"] for r in select(rows, search="CPE-05")][:3] == [
        "cpe-0500",
        "cpe-0501",
        "cpe-0502",
    ]
    # oldest weights first: none at all is older than any
    assert select(rows, sort="weights_age")[0]["cpe_id"] == "cpe-0007"
    assert select(rows, sort="weights_age")[1]["cpe_id"] == "cpe-0100"


def test_a_node_down_and_an_access_without_a_node() -> None:
    cpe = Cpe(
        "cpe-probe",
        {
            "nr": AccessIdentity("nr", e2_node_id="nr-node", ue_id="1"),
            "lifi": AccessIdentity("lifi"),  # no E2 node: known through probes only
        },
    )
    (row,) = fleet_rows(inputs([cpe], node_states={"nr-node": "failed"}))
    assert row["problems"] == ["node-down"]
    assert row["nodes"] == {"active": 0, "total": 1}
    assert row["reports_age_s"] == {"nr": 0.4}


def test_a_page_asked_with_its_snapshot_reads_the_rows_of_the_page_before_it() -> None:
    # a live fleet: every build sees other attention scores
    builds = iter(range(1, 1000))

    def build() -> list[dict[str, object]]:
        n = next(builds)
        return [{"cpe_id": f"cpe-{i:04d}", "attention": (i * n) % 7} for i in range(1000)]

    snapshots = FleetSnapshots(build, kept=3)
    first, rows = snapshots.rows()
    again, same = snapshots.rows(first)
    assert (again, same) == (first, rows)  # the next page reads the same rows
    fresh, other = snapshots.rows()
    # without a number: the fleet as it is now
    assert fresh != first
    assert other != rows
    for _ in range(3):
        snapshots.rows()
    gone, newest = snapshots.rows(first)  # no longer kept: a fresh snapshot, under a new number
    assert gone not in (first, fresh)
    assert newest != rows
