"""The operator's choices of estimator as the loop reads them: every standing one at once
(``estimator_choices``), kept in step with each CPE's own (``estimator_choice``) as overrides
are set, removed and expire, over a fleet."""

from __future__ import annotations

from core.domain import AccessIdentity, Cpe, Direction
from xapp.adapters.memory_store import MemoryStateStore
from xapp.operator.overrides import OperatorOverride
from xapp.operator.state import OperatorState

CPES = [Cpe(f"cpe-{n:04d}", {a: AccessIdentity(a) for a in ("nr", "wifi")}) for n in range(1000)]


def choice(
    cpe_id: str, directions: tuple[Direction, ...], estimator: str, **more: object
) -> OperatorOverride:
    return OperatorOverride(
        override_id="",
        cpe_id=cpe_id,
        directions=directions,
        kind="estimator",
        reason="test",
        set_by="tester",
        set_at_s=0.0,
        estimator=estimator,
        **more,  # type: ignore[arg-type]
    )


def one_by_one(state: OperatorState) -> dict[tuple[str, Direction], str]:
    return {
        (c.cpe_id, d): chosen
        for c in CPES
        for d in Direction
        if (chosen := state.estimator_choice(c.cpe_id, d)) is not None
    }


def test_every_standing_choice_is_told_at_once_as_each_cpe_tells_it() -> None:
    now = [100.0]
    store = MemoryStateStore()
    state = OperatorState(store, store, lambda: CPES, clock=lambda: now[0])
    state.load()
    assert state.estimator_choices() == {}
    kept = state.add(choice("cpe-0007", (Direction.DOWNLINK,), "kpi-only"))
    state.add(choice("cpe-0100", tuple(Direction), "probe-only", expires_at_s=160.0))
    state.add(choice("cpe-0999", (Direction.UPLINK,), "model-only"))
    assert state.estimator_choices() == one_by_one(state)
    assert len(state.estimator_choices()) == 4
    state.remove(kept.override_id, "tester", "done")
    now[0] = 200.0
    state.expire()
    assert (
        state.estimator_choices()
        == one_by_one(state)
        == {("cpe-0999", Direction.UPLINK): "model-only"}
    )
    # a copy: the caller's changes do not reach the state
    state.estimator_choices().clear()
    assert state.estimator_choices() != {}
