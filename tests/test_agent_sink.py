"""The AgentWeightSink against `atsss agent run` over real HTTP: the WeightSink port's contract."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

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
from tests.servers import answer_json, misbehaving_server
from tests.test_agent_api import TOKEN, agent, write_config
from xapp.adapters.agent_book import AgentBook
from xapp.adapters.agent_http import AgentEndpoint
from xapp.adapters.agent_sink import AgentWeightSink, HeldListingUnsupportedError
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


def test_a_refusal_after_timeouts_still_says_what_the_agent_holds(tmp_path: Path) -> None:
    """Pushes whose answers were lost to timeouts (counted as the agent's failures), then a 409
    for the sequence it already applied: the refusal settles what it holds all the same, so
    the next push follows its sequence (before, the 409 was not settled after two failures and
    the loop sent the refused sequence again every step)."""
    config, port = write_config(tmp_path)
    clock = [0.0]
    sink = AgentWeightSink(
        {}, AgentEndpoint(f"http://127.0.0.1:{port}", TOKEN), book=AgentBook(clock=lambda: clock[0])
    )
    with agent(config, port):
        sink.push(weight_set({"nr": 30, "wifi": 100, "lifi": 1}, 1))
        key = sink.book_key("cpe-1", Direction.DOWNLINK)
        sink.book.failed(key, "the call's deadline passed (2 s)")
        sink.book.failed(key, "the call's deadline passed (2 s)")
        clock[0] += 60  # the backoff has run out: the agent is called again
        with pytest.raises(WeightPushError, match="holds sequence 1") as refused:
            sink.push(weight_set({"nr": 2, "wifi": 3, "lifi": 1}, 1))
        assert refused.value.held is not None
        assert refused.value.held.sequence == 1


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


def fleet_proxy_config(tmp_path: Path, cpes: int) -> tuple[Path, int]:
    """A proxy agent (dry-run) serving ``cpes`` CPEs."""
    config, port = write_config(tmp_path, backend="dry-run", max_rules=3 * cpes)
    document = yaml.safe_load(config.read_text())
    document["cpes"] = {
        f"cpe-{n}": {
            name: f"10.{i}.{n // 250}.{n % 250 + 1}"
            for i, name in enumerate(("nr", "wifi", "lifi"), 1)
        }
        for n in range(cpes)
    }
    config.write_text(yaml.safe_dump(document))
    return config, port


def test_a_thousand_cpes_downlink_sets_reach_the_proxy_in_batches(tmp_path: Path) -> None:
    """The control loop pushes every CPE's set from its own thread; the proxy's agent gets
    them in a few requests (before: a thousand, each rewriting its whole rule table), and each
    push still hears its own outcome: applied, or refused with the reason."""
    config, port = fleet_proxy_config(tmp_path, 1000)
    proxy = AgentEndpoint(f"http://127.0.0.1:{port}", TOKEN)
    sink = AgentWeightSink({}, proxy, timeout_s=10.0)
    sets = [
        WeightSet(
            f"cpe-{n}",
            Direction.DOWNLINK,
            {"nr": 1 + n % 50, "wifi": 100, "lifi": 1},
            SteeringMode.LOAD_BALANCING,
            7,
        )
        for n in range(1000)
    ]
    stale = WeightSet("cpe-3", Direction.DOWNLINK, {"nr": 9}, SteeringMode.LOAD_BALANCING, 7)

    def push(one: WeightSet) -> str:
        try:
            sink.push(one)
        except WeightPushError as error:
            return str(error)
        return "applied"

    with agent(config, port) as client, ThreadPoolExecutor(128) as pool:
        outcomes = list(pool.map(push, sets))
        assert outcomes == ["applied"] * 1000
        refused = push(stale)  # the same sequence again, with other weights
        assert "409" in refused
        assert "sequence 7 is not after 7" in refused
        held = client.get("/v1/weights/downlink", params={"cpe_id": "cpe-777"}).json()
        assert held["applied"]["weights"] == {"nr": 28, "wifi": 100, "lifi": 1}
        # What a restarted xApp learns from the proxy in two pages, not a thousand requests.
        page = client.get("/v1/weights/downlink/held").json()
        assert len(page["held"]) == 500
        assert page["next"] == page["held"][-1]["cpe_id"]
        listed = sink.held_sets(proxy, Direction.DOWNLINK)
        assert {c: dict(s.weights) for c, s in listed.items()} == {
            s.cpe_id: dict(s.weights) for s in sets
        }
        assert {s.sequence for s in listed.values()} == {7}
        assert client.get("/v1/weights/uplink/held").json() == {"held": [], "next": None}
    (batches,) = sink._batches.values()
    assert batches.batches < 200, batches.batches  # a thousand sets, a few requests
    assert batches.largest > 1


def test_an_agent_without_the_held_listing_says_so() -> None:
    """An agent of an older release answers 404 to the listing: the caller asks it per CPE."""
    with misbehaving_server("not-found") as port, pytest.raises(HeldListingUnsupportedError):
        AgentWeightSink({}, AgentEndpoint(f"http://127.0.0.1:{port}")).held_sets(
            AgentEndpoint(f"http://127.0.0.1:{port}"), Direction.DOWNLINK
        )


def test_an_agent_without_the_batch_endpoint_gets_its_sets_one_by_one(tmp_path: Path) -> None:
    """An agent of an older release answers 404 to the batch: the sink pushes single sets to it
    from then on."""
    calls: list[str] = []

    class OldAgent(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            calls.append(self.path)
            self.rfile.read(int(self.headers["Content-Length"]))
            status, body = (404, b'{"detail":"Not Found"}')
            if not self.path.endswith("/batch"):
                status, body = (200, b'{"applied":{}}')
            answer_json(self, status, body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), OldAgent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sink = AgentWeightSink({}, AgentEndpoint(f"http://127.0.0.1:{server.server_port}"))
        sink.push(weight_set({"nr": 30, "wifi": 100, "lifi": 1}, 1))
        sink.push(weight_set({"nr": 31, "wifi": 100, "lifi": 1}, 2))
    finally:
        server.shutdown()
        server.server_close()
    assert calls == [
        "/v1/weights/downlink/batch",
        "/v1/weights/downlink",
        "/v1/weights/downlink",
    ]


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
