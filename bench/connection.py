"""What an MPTCP connection under the WRR scheduler carries, tick by tick, given the truth
(per tick: core.fluid.carried_mbps).

Beyond the fluid model this adds MPTCP's own reaction to outages (paper section 6.4): a subflow
whose link died stays in the scheduler's round until the kernel notices (``detection_s``; while it
is weighted it stalls the round), and a returning link carries data again only after the subflow
is re-established (the path's ``reconnect_s``). When every weighted subflow is out of the round,
MPTCP falls back to the remaining (backup) subflows.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from core.scenario.truth import Truth

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

# The paper measured 0.4–0.5 s from a link loss to MPTCP carrying on over the other paths.
DEFAULT_DETECTION_S = 0.45


def subflows_in_round(truth: Truth, detection_s: float = DEFAULT_DETECTION_S) -> BoolArray:
    """(T, C, A): which subflows the scheduler serves at each tick."""
    step_s = truth.step_s or 1.0
    in_round = np.zeros(truth.available.shape, dtype=bool)
    since_change_s = np.full(truth.has_path.shape, np.inf)
    previous = truth.available[0]
    for k in range(len(truth.times_s)):
        now = truth.available[k]
        if k > 0:
            since_change_s = np.where(now != previous, 0.0, since_change_s + step_s)
        reconnected = now & (since_change_s + 1e-9 >= truth.reconnect_s)
        not_yet_noticed = ~now & (since_change_s + 1e-9 < detection_s)
        in_round[k] = truth.has_path & (reconnected | not_yet_noticed)
        previous = now
    return in_round
