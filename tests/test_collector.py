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


STEPS_PROGRAM = textwrap.dedent(
    """
    import gc, threading, weakref
    from core.collector import FULL_EVERY_STEPS, PassesBetweenSteps

    class Node:
        pass

    passes = []
    gc.callbacks.append(
        lambda phase, info: passes.append(info["generation"]) if phase == "start" else None
    )
    collector = PassesBetweenSteps()
    freed = []
    with collector.step():
        assert not gc.isenabled()  # no pass while a step runs
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle dropped within the step
        weakref.finalize(a, freed.append, True)
        del a, b
        junk = [[i] for i in range(50_000)]  # a step's allocations: no pass meanwhile
        assert passes == [], passes
        assert not freed
        with collector.step():  # nested (an urgent decision within the step)
            pass
        assert not gc.isenabled() and passes == [], "the inner step ended the pause"
    assert gc.isenabled()
    assert freed == [True], "the cycle was not freed when the step ended"
    assert passes == [1], passes  # one pass at the end, of the young and middle generations
    while collector.steps < FULL_EVERY_STEPS - 1:
        with collector.step():
            pass
    assert set(passes) == {1}, set(passes)
    with collector.step():
        pass
    assert passes[-1] == 2, passes[-3:]  # and a full one as often as the service's

    # Overlapping steps of two threads: the collector resumes when the last one ends.
    first_in, second_done = threading.Event(), threading.Event()
    def other():
        assert first_in.wait(timeout=30), "the first step never began"
        with collector.step():
            pass
        second_done.set()
    thread = threading.Thread(target=other)
    thread.start()
    with collector.step():
        first_in.set()
        assert second_done.wait(timeout=30), "the other thread's step never ended"
        assert not gc.isenabled(), "another thread's step ended this one's pause"
    thread.join(timeout=30)
    assert not thread.is_alive() and gc.isenabled()

    # Someone else's choice stands: a disabled collector stays so, and no pass is made.
    gc.disable()
    before = len(passes)
    with collector.step():
        pass
    assert not gc.isenabled() and len(passes) == before
    print("ok")
    """
)


def test_the_collector_passes_between_steps_not_during_them() -> None:
    done = subprocess.run(
        [sys.executable, "-c", STEPS_PROGRAM],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
