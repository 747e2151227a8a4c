"""The agent's local reaction to carrier loss, as `bench loop` models it.

The CPE's agent sees an access lose carrier at once (netlink), a period or more before any
report reaches the xApp. After ``reaction_s`` it masks that path to weight 0 (so the WRR round
stops waiting on a dead subflow before MPTCP's own detection would) and tells the xApp, which
decides for that CPE at once instead of at its next report. When the carrier is back for
``reaction_s`` the agent unmasks the path, so the xApp's set in force applies again (the
agent's ``carrier_return: restore``), or keeps it masked until the xApp's next set (``wait``),
and tells the xApp again. As in the real agent (agent/service.py), the mask never takes a CPE's
last weighted path. This wraps any controlled contender.
"""

from __future__ import annotations

from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from bench.contenders import Contender
from core.scenario.truth import Truth

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

CarrierReturn = Literal["restore", "wait"]


class Notified(Protocol):
    """A contender that hears of the agents' local actions (the xApp's access events)."""

    def access_events(self, time_s: float, events: list[tuple[int, int, bool]]) -> None:
        """``events``: (CPE index, access index, carrier up) seen by the agents now."""
        ...


class AgentReaction:
    def __init__(
        self,
        inner: Contender,
        truth: Truth,
        reaction_s: float,
        *,
        carrier_return: CarrierReturn = "restore",
        notify_xapp: bool = True,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self._truth = truth
        self._reaction_s = reaction_s
        self._carrier_return = carrier_return
        self._notify = notify_xapp and hasattr(inner, "access_events")
        shape = truth.has_path.shape
        self._since_change_s = np.full(shape, np.inf)
        self._previous = truth.available[0].copy()
        self._acted = np.ones(shape, dtype=bool)  # the agent has reacted to the latest change
        self._awaiting_xapp = np.zeros(shape, dtype=bool)
        self._last_wanted: IntArray | None = None
        self.local_actions = 0

    @property
    def pushes(self) -> int:
        return self.inner.pushes

    @pushes.setter
    def pushes(self, value: int) -> None:
        self.inner.pushes = value

    def weights(self, tick: int, time_s: float) -> IntArray:
        wanted = self.inner.weights(tick, time_s)
        now = self._truth.available[tick]
        step_s = self._truth.step_s or 1.0
        if tick > 0:
            changed = now != self._previous
            self._since_change_s = np.where(changed, 0.0, self._since_change_s + step_s)
            self._acted &= ~changed
        self._previous = now.copy()
        if self._last_wanted is not None:
            # A new set from the xApp ends any wait for it.
            new_set = np.any(wanted != self._last_wanted, axis=1)
            self._awaiting_xapp[new_set] = False
        self._last_wanted = wanted.copy()

        noticed = self._since_change_s + 1e-9 >= self._reaction_s
        acting = ~self._acted & noticed & self._truth.has_path
        if acting.any():
            self._acted |= acting
            self.local_actions += int(np.count_nonzero(acting))
            if self._carrier_return == "wait":
                self._awaiting_xapp |= acting & now
            self._awaiting_xapp &= ~(acting & ~now)
            if self._notify:
                cpes, accesses = np.nonzero(acting)
                events = [
                    (int(c), int(a), bool(now[c, a])) for c, a in zip(cpes, accesses, strict=True)
                ]
                self.inner.access_events(time_s, events)  # type: ignore[attr-defined]
                wanted = self.inner.weights(tick, time_s)  # what lands at once, if anything
                self._last_wanted = wanted.copy()

        masked = (~now & noticed) | self._awaiting_xapp
        effective = np.where(masked, 0, wanted)
        # Never the last weighted path of a CPE: then the mask is not applied at all.
        none_left = ~np.any(effective > 0, axis=1)
        effective[none_left] = wanted[none_left]
        return effective

    def data_share(self, tick: int) -> FloatArray | float:
        return self.inner.data_share(tick)

    def observe(self, tick: int, carried_mbps: FloatArray) -> None:
        self.inner.observe(tick, carried_mbps)

    def __getattr__(self, name: str) -> object:  # probe_mbit and the like
        return getattr(self.inner, name)
