"""What `atsss bench testbed` counts of the xApp's pushes from the CPE agent's log: the sets
applied in the transfer's window and the endpoint flags they flipped (bench/testbed_bench.py)."""

from __future__ import annotations

import time

from bench.testbed_bench import churn_in_log
from core.domain import Direction


def line(at_unix_s: float, direction: str, weights: str, by: str = "xapp") -> str:
    seconds, millis = divmod(round(at_unix_s * 1000), 1000)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))
    return (
        f"{stamp},{millis:03d} INFO agent.service: applied {direction} weights {weights} for "
        f"cpe-1 (sequence 3, owner epoch 1) as asked by {by} (token holder, 127.0.0.1)"
    )


START = 1_790_000_000.0  # a whole second


def test_sets_and_flips_in_the_window_count_from_the_set_in_force_before_it() -> None:
    log = "\n".join(
        [
            line(START - 5, "downlink", "{'nr': 1, 'wifi': 3, 'lifi': 0}"),  # in force before
            line(START + 1, "downlink", "{'nr': 2, 'wifi': 3, 'lifi': 0}"),  # no flip
            line(START + 2, "uplink", "{'nr': 0, 'wifi': 3, 'lifi': 0}"),  # other direction
            line(START + 3, "downlink", "{'nr': 0, 'wifi': 3, 'lifi': 1}"),  # two flips
            "2026-01-01 00:00:00,000 WARNING agent.service: something else",
            line(START + 4, "downlink", "{'nr': 1, 'wifi': 1, 'lifi': 1}", by="bench"),  # not us
            line(START + 5.5, "downlink", "{'nr': 1, 'wifi': 3, 'lifi': 0}"),  # two flips
            line(START + 20, "downlink", "{'nr': 0, 'wifi': 3, 'lifi': 0}"),  # after the window
        ]
    )
    assert churn_in_log(log, Direction.DOWNLINK, START, START + 10) == (3, 4)
    assert churn_in_log(log, Direction.UPLINK, START, START + 10) == (1, 0)
    assert churn_in_log(log, Direction.DOWNLINK, START + 30, START + 40) == (0, 0)


def test_a_fleets_worth_of_pushes_is_read_in_order() -> None:
    """1,000 sets alternating one path on and off: each one after the first flips it."""
    log = "\n".join(
        line(START + i * 0.01, "downlink", f"{{'nr': 5, 'lifi': {i % 2}}}") for i in range(1000)
    )
    assert churn_in_log(log, Direction.DOWNLINK, START, START + 100) == (1000, 999)
