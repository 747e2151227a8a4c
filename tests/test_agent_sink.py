"""The AgentWeightSink against `atsss agent run` over real HTTP: the WeightSink port's contract."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.backends.wrr import WEIGHTS
from core.domain import (
    AccessIdentity,
    CapacityEstimate,
    Cpe,
    Direction,
    KpiSample,
    SteeringMode,
    WeightSet,
)
from tests.helpers import estimate
from tests.servers import misbehaving_server
from tests.test_agent_api import TOKEN, agent, write_config
from xapp.adapters.agent_http import AgentEndpoint
from xapp.adapters.agent_sink import AgentWeightSink
from xapp.adapters.memory_store import MemoryStateStore
from xapp.control_loop import ControlLoop
from xapp.policy.weight_policy import make_policy
from xapp.ports import WeightPushError


def weight_set(weights: dict[str, int], sequence: int) -> WeightSet:
    return WeightSet("cpe-1", Direction.DOWNLINK, weights, SteeringMode.LOAD_BALANCING, sequence)


def test_pushes_reach_the_proxy_agent_and_refusals_name_the_reason(tmp_path: Path) -> None:
    config, port = write_config(tmp_path)
    url = f"http://127.0.0.1:{port}"
    sink = AgentWeightSink({}, AgentEndpoint(url, TOKEN))
    with agent(config, port):
        assert sink.in_force("cpe-1", Direction.DOWNLINK) is None
        sink.push(weight_set({"nr": 30, "wifi": 100, "lifi": 1}, 4))
        applied = sink.in_force("cpe-1", Direction.DOWNLINK)
        assert applied is not None
        assert applied.weights == {"nr": 30, "wifi": 100, "lifi": 1}
        assert applied.sequence == 4
        kernel = (tmp_path / "proc" / WEIGHTS).read_text()
        assert " 100 " in kernel

        with pytest.raises(WeightPushError, match=r"409.*sequence 4 is not after 4"):
            sink.push(weight_set({"nr": 1, "wifi": 1, "lifi": 1}, 4))
        with pytest.raises(WeightPushError, match="satellite"):
            sink.push(weight_set({"nr": 1, "satellite": 1}, 5))
        with pytest.raises(WeightPushError, match="401"):
            AgentWeightSink({}, AgentEndpoint(url, "wrong")).push(weight_set({"nr": 1}, 6))
        # Nothing refused changed what is in force.
        still = sink.in_force("cpe-1", Direction.DOWNLINK)
        assert still is not None
        assert still.weights == {"nr": 30, "wifi": 100, "lifi": 1}
        assert still.sequence == 4


def test_missing_or_unreachable_agents_are_push_errors() -> None:
    nobody = AgentWeightSink({"cpe-1": AgentEndpoint("http://127.0.0.1:1")})
    uplink = WeightSet("cpe-1", Direction.UPLINK, {"nr": 1}, SteeringMode.LOAD_BALANCING, 1)
    with pytest.raises(WeightPushError, match=r"127\.0\.0\.1:1"):
        nobody.push(uplink)
    with pytest.raises(WeightPushError, match="no agent configured for the MPTCP proxy"):
        nobody.push(weight_set({"nr": 1}, 1))
    other = WeightSet("cpe-2", Direction.UPLINK, {"nr": 1}, SteeringMode.LOAD_BALANCING, 1)
    with pytest.raises(WeightPushError, match="no agent configured for CPE cpe-2"):
        nobody.push(other)


def test_a_lost_answer_does_not_lock_the_xapp_out(tmp_path: Path) -> None:
    """The agent applied a set but its answer never came: the same push again is not a failure,
    and a different set with a used sequence fails with what the agent holds, so the loop can
    follow its sequence (before, every later push got 409 for good)."""
    config, port = write_config(tmp_path)
    sink = AgentWeightSink({}, AgentEndpoint(f"http://127.0.0.1:{port}", TOKEN))
    first = weight_set({"nr": 30, "wifi": 100, "lifi": 1}, 1)
    with agent(config, port):
        sink.push(first)
        sink.push(first)  # the retry of a push whose answer was lost
        with pytest.raises(WeightPushError, match=r"409.*holds sequence 1") as refused:
            sink.push(weight_set({"nr": 1, "wifi": 1, "lifi": 1}, 1))
        held = refused.value.held
        assert held is not None
        assert held.sequence == 1
        assert dict(held.weights) == {"nr": 30, "wifi": 100, "lifi": 1}
        sink.push(weight_set({"nr": 1, "wifi": 1, "lifi": 1}, held.sequence + 1))


@contextlib.contextmanager
def misbehaving_agent(kind: str) -> Iterator[str]:
    """``hung``: accepts and never answers; ``trickle``: answers a byte every 0.3 s."""
    with misbehaving_server("silent" if kind == "hung" else kind) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("kind", ["hung", "trickle"])
def test_a_push_ends_by_its_deadline_whatever_the_agent_does(kind: str) -> None:
    """Before: httpx's timeout is per read, so a trickling answer held the push for ever."""
    with misbehaving_agent(kind) as url:
        sink = AgentWeightSink({}, AgentEndpoint(url), timeout_s=1.0)
        started = time.monotonic()
        with pytest.raises(WeightPushError):
            sink.push(weight_set({"nr": 1}, 1))
        assert time.monotonic() - started < 30  # a trickle of 1000 bytes takes 300 s


def test_a_hung_agent_does_not_hold_up_the_other_cpes(tmp_path: Path) -> None:
    """Eight CPEs whose agent never answers, then one whose agent does: their pushes go side
    by side (before: one after the other, the hung ones' timeouts adding up)."""
    config, port = write_config(tmp_path)
    accesses = {a: AccessIdentity(a) for a in ("nr", "wifi", "lifi")}
    hung_ids = [f"hung-{i}" for i in range(8)]
    cpes = [Cpe(c, accesses) for c in [*hung_ids, "cpe-1"]]
    with agent(config, port), misbehaving_agent("hung") as hung:
        agents = {c: AgentEndpoint(hung) for c in hung_ids}
        agents["cpe-1"] = AgentEndpoint(f"http://127.0.0.1:{port}", TOKEN)
        sink = AgentWeightSink(agents, timeout_s=3.0, downlink_via_cpe=True)
        loop = ControlLoop(
            cpes=cpes,
            directions=[Direction.DOWNLINK],
            source=NoSamples(),
            estimator=Fixed({"nr": 342.0, "wifi": 1190.0, "lifi": 12.1}),
            policy=make_policy("optimal"),
            sink=sink,
            store=MemoryStateStore(),
        )
        started = time.monotonic()
        outcomes = {o.cpe_id: o for o in loop.step(0.0)}
        took_s = time.monotonic() - started
        pushed = outcomes["cpe-1"].pushed
        assert pushed is not None
        assert all(outcomes[c].pushed is None for c in hung_ids)
        assert all("push failed" in outcomes[c].reason for c in hung_ids)
        held = sink.in_force("cpe-1", Direction.DOWNLINK)
        assert held is not None
        assert held.weights == pushed.weights
        # One after the other: 8 × (3 s push + 3 s asking what it holds) = 48 s.
        assert took_s < 24


class NoSamples:
    def poll(self, now_s: float) -> list[KpiSample]:
        return []


class Fixed:
    name = "fixed"

    def __init__(self, capacities: dict[str, float]) -> None:
        self.capacities = capacities

    def update(self, samples: object, now_s: float) -> None:
        pass

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        return estimate(access, self.capacities[access], at_s=now_s)
