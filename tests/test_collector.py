"""The collector as the service sets it (core/collector.py): rarer passes, cycles still freed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# In a process of its own: freezing the test runner's heap would change every later test.
PROGRAM = textwrap.dedent(
    """
    import gc, weakref
    from core.collector import OLDEST_THRESHOLD, YOUNG_THRESHOLD, settle_for_service

    class Node:
        pass

    settle_for_service()
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD, gc.get_threshold()
    assert gc.get_threshold()[2] == OLDEST_THRESHOLD, gc.get_threshold()
    assert gc.get_freeze_count() > 0  # what start-up built is out of the collector's walks
    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: reference counting alone never frees it
    freed = []
    weakref.finalize(a, freed.append, True)
    del a, b
    kept = []
    allocations = 0
    # A service's allocations go on (a period of 1,000 CPEs makes some 10^5 containers that
    # live at least until the step ends; a pass is due after net allocations, so they are kept).
    while not freed and allocations < 3 * YOUNG_THRESHOLD:
        kept.append([allocations])
        allocations += 1
    print("freed" if freed else "kept", allocations)
    """
)


def test_a_dropped_cycle_is_still_freed_once_the_service_has_settled_the_collector() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    outcome, allocations = done.stdout.split()
    assert outcome == "freed", f"a cycle survived {allocations} allocations"
    # A young pass finds it: within a little more than one young threshold of allocations.
    assert int(allocations) <= 2 * 10_000
