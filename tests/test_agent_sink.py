"""The AgentWeightSink against `atsss agent run` over real HTTP: the WeightSink port's contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.backends.wrr import WEIGHTS
from core.domain import Direction, SteeringMode, WeightSet
from tests.test_agent_api import TOKEN, agent, write_config
from xapp.adapters.agent_http import AgentEndpoint
from xapp.adapters.agent_sink import AgentWeightSink
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
