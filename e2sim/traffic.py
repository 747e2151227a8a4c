"""What each station carries when its traffic follows the weights the agents hold.

A real node reports what its stations carried, and under the WRR MPTCP scheduler that is what
the weights let each path carry: with one saturating connection per CPE and direction, path i
carries w_i times the round rate, which the slowest path per unit of weight sets
(core/fluid.py). ``atsss bench loop`` reports exactly that; a simulator reporting every
station at a fixed utilisation describes a world the weights never act on, so the live system
and the simulated loop would be scored on different worlds.

``HeldWeights`` is where the weights in force come from: ``AgentWeights`` asks the agents of a
deployment (the CPE's agent for uplink, the MPTCP proxy's for downlink, or the CPE's for both
when there is no proxy) several times a period. Before a CPE's agent holds a set, the kernel's
round robin (every path weight 1) is in force, as the live scoring assumes.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx
import numpy as np
import numpy.typing as npt

from core.deployment import AgentConfig, Deployment
from core.domain import Direction
from core.fluid import carried_mbps

FloatArray = npt.NDArray[np.float64]

log = logging.getLogger(__name__)

# Points per period at which the weights in force are read: a push within a period counts for
# the part of the period after it.
SAMPLES_PER_PERIOD = 10


class HeldWeights(Protocol):
    def weights_at(self, cpe_id: str, direction: Direction, unix_s: float) -> dict[str, int] | None:
        """The weights the CPE's agent held for the direction at that time (None: none yet)."""
        ...


@dataclass
class WeightTimeline:
    """The sets each agent was seen holding, in the order it took them."""

    _seen: dict[tuple[str, Direction], list[tuple[float, dict[str, int]]]] = field(
        default_factory=dict
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(
        self, cpe_id: str, direction: Direction, applied_at_s: float, weights: dict[str, int]
    ) -> None:
        with self._lock:
            history = self._seen.setdefault((cpe_id, direction), [])
            if not history or history[-1][0] < applied_at_s:
                history.append((applied_at_s, dict(weights)))

    def weights_at(self, cpe_id: str, direction: Direction, unix_s: float) -> dict[str, int] | None:
        with self._lock:
            history = self._seen.get((cpe_id, direction), [])
            index = bisect.bisect_right([t for t, _ in history], unix_s) - 1
            return history[index][1] if index >= 0 else None


class AgentWeights:
    """The deployment's agents asked for what they hold every ``interval_s``, in a thread of
    its own; each set is placed at the time the agent says it applied it."""

    def __init__(self, deployment: Deployment, interval_s: float = 0.1) -> None:
        self.timeline = WeightTimeline()
        self._interval_s = interval_s
        self._asks: list[tuple[str, Direction, AgentConfig]] = []
        proxy = deployment.agents.proxy
        for cpe in deployment.cpes:
            if cpe.agent is not None:
                self._asks.append((cpe.id, Direction.UPLINK, cpe.agent))
            downlink = proxy or cpe.agent
            if downlink is not None:
                self._asks.append((cpe.id, Direction.DOWNLINK, downlink))
        # each agent's token, read once (asked ten times a second)
        default = deployment.agents.token_file
        self._tokens = {
            agent.url: _read_token(agent.token_file or default) for _, _, agent in self._asks
        }
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agent-weights", daemon=True)
        self._failures: set[str] = set()

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def weights_at(self, cpe_id: str, direction: Direction, unix_s: float) -> dict[str, int] | None:
        return self.timeline.weights_at(cpe_id, direction, unix_s)

    def _run(self) -> None:
        with httpx.Client(timeout=2.0) as client:
            while not self._stop.is_set():
                for cpe_id, direction, agent in self._asks:
                    self._ask(client, cpe_id, direction, agent)
                self._stop.wait(self._interval_s)

    def _ask(
        self, client: httpx.Client, cpe_id: str, direction: Direction, agent: AgentConfig
    ) -> None:
        token = self._tokens[agent.url]
        try:
            response = client.get(
                f"{agent.url.rstrip('/')}/v1/weights/{direction.value}",
                params={"cpe_id": cpe_id},
                headers={"Authorization": f"Bearer {token}"} if token else {},
            )
        except httpx.HTTPError as error:
            self._once(f"{agent.url}: {error!r}")
            return
        if response.status_code == 404:
            return  # nothing held yet: round robin
        if response.status_code != 200:
            self._once(f"{agent.url}: HTTP {response.status_code}")
            return
        applied = response.json().get("applied", {})
        self.timeline.record(
            cpe_id, direction, float(applied["applied_at_s"]), dict(applied["weights"])
        )

    def _once(self, problem: str) -> None:
        if problem not in self._failures:
            self._failures.add(problem)
            log.warning("cannot read the weights an agent holds: %s", problem)


def _read_token(path: Path | None) -> str | None:
    return Path(path).read_text().strip() if path is not None else None


def utilisation_under_weights(
    weights: Sequence[Mapping[str, int] | None],
    accesses: Sequence[str],
    capacity_mbps: FloatArray,
    in_round: npt.NDArray[np.bool_],
) -> FloatArray:
    """(C, A) what each path carried over its capacity, for one instant: CPE c's connection
    under ``weights[c]`` (None: round robin) on paths of ``capacity_mbps`` (C, A). Paths out of
    the scheduler's round (``in_round`` False) carry nothing; a CPE whose weighted paths are all
    out falls back to the rest, as MPTCP does."""
    held = np.zeros(capacity_mbps.shape)
    for c, chosen in enumerate(weights):
        for a, access in enumerate(accesses):
            held[c, a] = 1.0 if chosen is None else float(chosen.get(access, 0))
    carried = carried_mbps(held, capacity_mbps, in_round)
    return np.asarray(
        np.clip(
            np.divide(carried, capacity_mbps, out=np.zeros_like(carried), where=capacity_mbps > 0),
            0.0,
            1.0,
        )
    )


class WeightedTraffic:
    """Per period, each station's utilisation in each direction, averaged over the period, with
    the CPE's traffic spread by the weights its agents held (``HeldWeights``)."""

    def __init__(self, held: HeldWeights, cpe_ids: Sequence[str], accesses: Sequence[str]) -> None:
        self._held = held
        self._cpe_ids = list(cpe_ids)
        self._accesses = list(accesses)

    def utilisation(
        self,
        direction: Direction,
        start_unix_s: float,
        period_s: float,
        capacity_mbps: FloatArray,
        available: npt.NDArray[np.bool_],
        has_path: npt.NDArray[np.bool_],
    ) -> FloatArray:
        """(C, A) for the period that began at ``start_unix_s``: capacities and availability
        are the period's, every CPE's paths at once (what one path carries depends on all)."""
        total = np.zeros(capacity_mbps.shape)
        in_round = available & has_path
        usable = np.where(in_round, capacity_mbps, 0.0)
        for k in range(SAMPLES_PER_PERIOD):
            at = start_unix_s + (k + 0.5) * period_s / SAMPLES_PER_PERIOD
            weights = [self._held.weights_at(c, direction, at) for c in self._cpe_ids]
            total += utilisation_under_weights(weights, self._accesses, usable, in_round)
        return total / SAMPLES_PER_PERIOD
