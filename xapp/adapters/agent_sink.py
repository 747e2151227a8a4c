"""The WeightSink port over the agents' REST API (`PUT /v1/weights/{direction}`).

Uplink weights go to the agent on the CPE itself, downlink weights to the MPTCP proxy's agent,
which serves many CPEs and is told which one in the body. With mainline MPTCP at both ends the
proxy has no lever: the CPE's backup flags steer the proxy's sending too (MP_PRIO), so
``downlink_via_cpe`` sends downlink sets to the CPE's agent instead. Whatever keeps an agent
from applying a set (unreachable, a refusal, a kernel that would not take it) becomes a
``WeightPushError`` naming the agent and its reason, so the control loop keeps the previous
weights and retries.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from core.domain import Direction, SteeringMode, WeightSet
from core.sequence import epoch_at
from xapp.adapters.agent_batch import BatchedCalls
from xapp.adapters.agent_book import AgentBook
from xapp.adapters.agent_http import AgentEndpoint, refusal, request_within
from xapp.ports import WeightPushError

# Sets per batch to the proxy's agent (its API takes up to 256 a request), and the time a
# batch gets on top of a single push's deadline for each set in it.
PROXY_BATCH = 256
BATCH_S_PER_SET = 0.005


class HeldListingUnsupportedError(Exception):
    """The agent has no listing of its held sets (an older agent): ask it per CPE."""


def held_set(cpe_id: str, direction: Direction, applied: Any) -> WeightSet:
    """A set an agent says it holds (``ValueError``, ``KeyError``, ``TypeError`` or
    ``AttributeError`` when it is not one)."""
    return WeightSet(
        cpe_id=cpe_id,
        direction=direction,
        weights={str(a): int(w) for a, w in applied["weights"].items()},
        mode=SteeringMode.LOAD_BALANCING,
        sequence=int(applied["sequence"]),
        reason=f"in force at the agent (by {applied.get('requested_by', '?')})",
    )


class _BatchUnsupportedError(Exception):
    """The agent has no batch endpoint (an older agent): push its sets one by one."""


class AgentWeightSink:
    def __init__(
        self,
        cpe_agents: Mapping[str, AgentEndpoint],
        proxy_agent: AgentEndpoint | None = None,
        timeout_s: float = 2.0,
        requested_by: str = "xapp",
        *,
        downlink_via_cpe: bool = False,
        book: AgentBook | None = None,
    ) -> None:
        """``book``: each agent's failures; one that keeps failing is left alone for a while
        (the push fails at once, naming why) instead of costing a deadline every step."""
        self.book = book if book is not None else AgentBook()
        self._cpe_agents = dict(cpe_agents)
        self._proxy = proxy_agent
        self._timeout_s = timeout_s
        self._requested_by = requested_by
        self._downlink_via_cpe = downlink_via_cpe
        # The proxy's agent takes the sets under way together in one request (per direction).
        self._batches: dict[tuple[str, Direction], BatchedCalls] = {}
        self._no_batch: set[str] = set()  # agents found without the batch endpoint
        self._batches_lock = threading.Lock()
        # The owner epoch each push carries (a fencing token, see xapp/ownership.py): by
        # default when this sink was made, so a restarted xApp's sets replace an earlier run's;
        # with replicas, when this replica took the CPE over.
        started = epoch_at(time.time())
        self.epoch_of: Callable[[str], int] = lambda cpe_id: started

    def set_agents(
        self, cpe_agents: Mapping[str, AgentEndpoint], proxy_agent: AgentEndpoint | None
    ) -> None:
        """A reloaded configuration's agents."""
        self._cpe_agents, self._proxy = dict(cpe_agents), proxy_agent
        with self._batches_lock:
            self._batches.clear()
            self._no_batch.clear()

    def batched(self, cpe_id: str, direction: Direction) -> bool:
        """Whether this CPE's sets in this direction travel in batches with other CPEs' (the
        proxy's agent): the control loop gives those pushes a lane of their own, so that a
        fleet's downlink is not queued behind single pushes to slow CPE agents."""
        agent = self._agent(cpe_id, direction)
        return agent is not None and agent is self._proxy and agent.base_url not in self._no_batch

    def endpoint(self, cpe_id: str, direction: Direction) -> AgentEndpoint | None:
        if direction == Direction.UPLINK or self._downlink_via_cpe:
            return self._cpe_agents.get(cpe_id)
        return self._proxy

    def push(self, weight_set: WeightSet) -> None:
        agent = self._agent(weight_set.cpe_id, weight_set.direction)
        key = self.book_key(weight_set.cpe_id, weight_set.direction)
        self._not_left_alone(key)
        body = {
            "cpe_id": weight_set.cpe_id,
            "weights": dict(weight_set.weights),
            "sequence": weight_set.sequence,
            "requested_by": self._requested_by,
            "epoch": self.epoch_of(weight_set.cpe_id),
        }
        try:
            response = self._put(agent, weight_set.direction, body)
        except httpx.ConnectError as error:  # never reached the agent: nothing to find out
            self.book.failed(key, str(error))
            raise WeightPushError(f"agent at {agent.base_url}: {error}") from error
        except httpx.HTTPError as error:
            problem = f"agent at {agent.base_url}: {error or type(error).__name__}"
            self.book.failed(key, problem)
            self._settle(weight_set, problem)
            return
        if response.status_code == 200:
            self.book.succeeded(key)
            return
        if response.status_code in (401, 403):  # will not change until someone fixes it
            self.book.failed(key, refusal(agent, response))
        if response.status_code == 409:
            # A refusal is an answer: the agent is there, and asking what it holds is what lets
            # the next push follow its sequence (after answers lost to earlier timeouts, not
            # asking repeated the refused sequence every step for as long as the agent lived).
            self.book.succeeded(key)
        if response.status_code == 409 or response.status_code >= 500:
            self._settle(weight_set, refusal(agent, response))
            return
        raise WeightPushError(refusal(agent, response))

    def _put(
        self, agent: AgentEndpoint, direction: Direction, body: dict[str, Any]
    ) -> httpx.Response:
        """One set to its agent: alone, or for the proxy's agent in a batch with the sets
        under way beside it (the answer is this set's own, as a single PUT would have had)."""
        if agent is self._proxy and agent.base_url not in self._no_batch:
            try:
                return self._batch_for(agent, direction).call(body)  # type: ignore[no-any-return]
            except _BatchUnsupportedError:
                with self._batches_lock:
                    self._no_batch.add(agent.base_url)
        return request_within(
            agent, "PUT", f"/v1/weights/{direction.value}", self._timeout_s, json=body
        )

    def _batch_for(self, agent: AgentEndpoint, direction: Direction) -> BatchedCalls:
        with self._batches_lock:
            key = (agent.base_url, direction)
            batch = self._batches.get(key)
            if batch is None:

                def send(items: Sequence[dict[str, Any]]) -> list[httpx.Response]:
                    return self._send_batch(agent, direction, items)

                batch = self._batches[key] = BatchedCalls(send, PROXY_BATCH)
            return batch

    def _send_batch(
        self, agent: AgentEndpoint, direction: Direction, items: Sequence[dict[str, Any]]
    ) -> list[httpx.Response]:
        """The batch request; each set's result as the response a single PUT would have had.
        A refusal of the whole request (a wrong token, a body too large) is each set's."""
        response = request_within(
            agent,
            "PUT",
            f"/v1/weights/{direction.value}/batch",
            # a batch does the work of many sets: a little more time for each, so that a busy
            # proxy applies a full batch rather than having all of it counted as lost
            self._timeout_s + BATCH_S_PER_SET * len(items),
            json={"sets": list(items)},
        )
        if response.status_code in (404, 405):
            raise _BatchUnsupportedError
        if response.status_code != 200:
            return [response] * len(items)
        try:
            results = response.json()["results"]
            if len(results) != len(items):
                raise ValueError(f"{len(results)} results for {len(items)} sets")
            return [
                httpx.Response(
                    int(r["status"]),
                    json={"applied": r["applied"]} if "applied" in r else {"detail": r["detail"]},
                )
                for r in results
            ]
        except (ValueError, KeyError, TypeError) as error:
            problem = f"its batch answer does not read: {error}"
            return [httpx.Response(502, json={"detail": problem})] * len(items)

    def _settle(self, weight_set: WeightSet, problem: str) -> None:
        """After an uncertain outcome, ask the agent what it holds. Our own set means the push
        landed and only its answer was lost; anything else goes back to the loop with the
        failure, so that its next push follows the agent's sequence instead of repeating one
        the agent refuses for ever."""
        if self.book.failures(self.book_key(weight_set.cpe_id, weight_set.direction)) > 1:
            raise WeightPushError(problem)  # it failed before too: do not pay a second deadline
        try:
            held = self.in_force(weight_set.cpe_id, weight_set.direction, settling=True)
        except WeightPushError:
            raise WeightPushError(problem) from None
        if (
            held is not None
            and held.sequence == weight_set.sequence
            and dict(held.weights) == dict(weight_set.weights)
        ):
            return
        where = f"the agent holds sequence {held.sequence}" if held else "the agent holds none"
        raise WeightPushError(f"{problem} ({where})", held=held)

    def in_force(
        self, cpe_id: str, direction: Direction, settling: bool = False
    ) -> WeightSet | None:
        """The set the agent has applied (None if none yet), so a restarted xApp continues its
        sequence numbers and knows which paths are weighted. ``settling``: asked right after a
        push whose outcome is not known, so asked even though that push just failed."""
        agent = self._agent(cpe_id, direction)
        key = self.book_key(cpe_id, direction)
        if not settling:
            self._not_left_alone(key)
        try:
            response = request_within(
                agent,
                "GET",
                f"/v1/weights/{direction.value}",
                self._timeout_s,
                params={"cpe_id": cpe_id},
            )
        except httpx.HTTPError as error:
            problem = f"agent at {agent.base_url}: {error or type(error).__name__}"
            self.book.failed(key, problem)
            raise WeightPushError(problem) from error
        if response.status_code == 404:
            self.book.succeeded(key)
            return None
        if response.status_code != 200:
            if response.status_code in (401, 403) or response.status_code >= 500:
                self.book.failed(key, refusal(agent, response))
            raise WeightPushError(refusal(agent, response))
        try:
            held = held_set(cpe_id, direction, response.json()["applied"])
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            problem = f"agent at {agent.base_url}: its answer is not a weight set: {error}"
            self.book.failed(key, problem)
            raise WeightPushError(problem) from error
        self.book.succeeded(key)
        return held

    def held_sets(self, agent: AgentEndpoint, direction: Direction) -> dict[str, WeightSet]:
        """Every set the agent holds for the direction, by CPE, read a page at a time
        (``GET /v1/weights/{direction}/held``): how a restarted xApp learns what the proxy's
        agent holds for a fleet in a few requests rather than one per CPE. Raises
        ``HeldListingUnsupportedError`` for an agent without the endpoint (ask it per CPE)."""
        held: dict[str, WeightSet] = {}
        after = ""
        while True:
            try:
                response = request_within(
                    agent,
                    "GET",
                    f"/v1/weights/{direction.value}/held",
                    self._timeout_s,
                    params={"after": after},
                )
            except httpx.HTTPError as error:
                problem = f"agent at {agent.base_url}: {error or type(error).__name__}"
                self.book.failed(agent.base_url, problem)
                raise WeightPushError(problem) from error
            if response.status_code in (404, 405):
                raise HeldListingUnsupportedError(agent.base_url)
            if response.status_code != 200:
                raise WeightPushError(refusal(agent, response))
            try:
                answer = response.json()
                for applied in answer["held"]:
                    cpe_id = str(applied["cpe_id"])
                    held[cpe_id] = held_set(cpe_id, direction, applied)
                following = answer["next"]
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                problem = f"agent at {agent.base_url}: its list of held sets does not read: {error}"
                self.book.failed(agent.base_url, problem)
                raise WeightPushError(problem) from error
            if following is None:
                return held
            if str(following) <= after:  # a page that does not move on would never end
                raise WeightPushError(f"agent at {agent.base_url}: its held pages do not advance")
            after = str(following)

    def book_key(self, cpe_id: str, direction: Direction) -> str:
        """Whose failures a call counts: the agent's, or for the proxy's agent, which serves
        every CPE, the agent's for that CPE (one CPE's slow answer must not leave every
        CPE's downlink alone)."""
        agent = self._agent(cpe_id, direction)
        return agent.base_url if agent is not self._proxy else f"{agent.base_url} {cpe_id}"

    def _not_left_alone(self, key: str) -> None:
        reason = self.book.left_alone(key)
        if reason is not None:
            raise WeightPushError(reason)

    def _agent(self, cpe_id: str, direction: Direction) -> AgentEndpoint:
        agent = self.endpoint(cpe_id, direction)
        if agent is None:
            via_cpe = direction == Direction.UPLINK or self._downlink_via_cpe
            where = f"CPE {cpe_id}" if via_cpe else "the MPTCP proxy"
            raise WeightPushError(f"no agent configured for {where} ({direction.value} weights)")
        return agent
