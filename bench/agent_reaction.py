"""The agent's local reaction to carrier loss, as `bench loop` models it.

The CPE's agent sees an access lose carrier at once (netlink), a period or more before any
report reaches the xApp. It sets that path's weight to 0 after ``reaction_s`` (so the WRR round
stops waiting on a dead subflow before MPTCP's own detection would) and, when the carrier is
back for ``reaction_s``, restores the weight the xApp had given the path, until the xApp's first
decision made with a report from after the return. This wraps any controlled contender.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from bench.contenders import Contender
from core.scenario.truth import Truth

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class AgentReaction:
    def __init__(
        self,
        inner: Contender,
        truth: Truth,
        reaction_s: float,
        reporting_period_s: float,
        control_delay_s: float,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self._truth = truth
        self._reaction_s = reaction_s
        # After a return, the xApp's word counts again once a report from after the return has
        # reached it and it has decided: at most a period and the control delay later.
        self._xapp_knows_s = reporting_period_s + control_delay_s
        shape = truth.has_path.shape
        self._since_change_s = np.full(shape, np.inf)
        self._previous = truth.available[0].copy()
        self._held = np.zeros(shape, dtype=np.int64)  # the xApp's weight before the loss
        self._restoring = np.zeros(shape, dtype=bool)
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
            lost_now = changed & ~now
            self._held = np.where(lost_now & (wanted > 0), wanted, self._held)
            self._restoring &= ~lost_now
            self.local_actions += int(np.count_nonzero(changed & self._truth.has_path))
        self._previous = now.copy()
        noticed = self._since_change_s + 1e-9 >= self._reaction_s
        effective = wanted.copy()
        effective[~now & noticed & self._truth.has_path] = 0
        back = now & noticed & (self._held > 0)
        self._restoring |= back & (self._since_change_s < self._xapp_knows_s)
        finished = self._since_change_s >= self._xapp_knows_s
        self._restoring &= ~finished
        self._held = np.where(finished & now, 0, self._held)
        restore = self._restoring & (wanted == 0)
        effective[restore] = self._held[restore]
        return effective

    def data_share(self, tick: int) -> FloatArray | float:
        return self.inner.data_share(tick)

    def observe(self, tick: int, carried_mbps: FloatArray) -> None:
        self.inner.observe(tick, carried_mbps)

    def __getattr__(self, name: str) -> object:  # probe_mbit and the like
        return getattr(self.inner, name)
