"""The cyclic garbage collector set for a long-running service with a large, steady heap.

CPython's collector starts a young-generation pass every 700 net allocations of container
objects. One reporting period of 1,000 CPEs allocates some 10^5 of them (KPI samples, records,
estimates), nearly all freed by reference counting at once, so the collector runs hundreds of
passes per period that find nothing, and every few of them an older-generation pass walks the
whole heap of codecs, compiled ASN.1 schemas and estimator state. `atsss bench xapp --cpes 1000`
spent about a quarter of its time there.

Two settings, applied once the service has built what it keeps for its whole life:

- ``gc.freeze()`` moves everything alive then (schemas, models, configuration) out of the
  collector's reach: it is never garbage, so walking it is wasted time;
- a young-generation threshold of ``YOUNG_THRESHOLD`` allocations: passes are rarer, each
  still cheap, and reference cycles are still found within a fraction of a period;
- a full pass after ``OLDEST_THRESHOLD`` middle-generation passes instead of 10. Estimator state
  is replaced every period, so each period's state survives the young passes, ages into the
  oldest generation and makes a full pass due about once a period at 10,000 CPEs, each walking
  the whole heap (0.4-0.65 s there): 13 full passes took 8.5 s of 8 periods in
  `atsss bench xapp --cpes 10000`, 7.7 cores in all, 6.5 with this setting. The state it
  replaces is freed by reference counting at once; only garbage in cycles that has reached the
  oldest generation waits longer, a few periods at that scale.

And one habit for the control loop's steps (``PassesBetweenSteps``): no pass while a step runs,
one of the young and middle generations when it ends. A step's thousands of reports, estimates
and questions live until it ends, so every young pass during it found them alive, walked them
and moved them to the middle generation, where each middle pass walked them again: at 10,000
CPEs the collector took a quarter of the step (0.57 of 4.05 cores in `atsss bench xapp --cpes
10000`, 1,291 young passes and 117 middle ones in 10 periods). Once the step is over they are
gone, and one pass walks only what the step kept.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 10_000
OLDEST_THRESHOLD = 100


def settle_for_service() -> None:
    """Freeze what exists now and make young-generation passes rarer (see the module's doc)."""
    gc.collect()
    gc.freeze()
    _, middle, _ = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, OLDEST_THRESHOLD)


# Steps between full passes: as often as the automatic ones would come at the service's
# thresholds (OLDEST_THRESHOLD middle passes, each after 10 young ones).
FULL_EVERY_STEPS = 10 * OLDEST_THRESHOLD


class PassesBetweenSteps:
    """The collector paused while a step runs, a pass when it ends (see the module's doc): of
    the young and middle generations after every step, so that what the step kept is walked
    once and then left to the oldest generation (a young pass alone left it for the middle
    passes, which walked ten steps' worth at once: 80 ms every tenth step at 1,000 CPEs);
    a full pass after every ``FULL_EVERY_STEPS``-th. Other threads' garbage in cycles waits
    for the step's end at most. Steps may nest or overlap (an urgent decision inside a step,
    another thread's): the collector resumes when the last ends. A collector disabled by
    someone else stays so, and makes no passes here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._paused_here = False  # whether this object disabled the collector
        self.steps = 0

    @contextmanager
    def step(self) -> Iterator[None]:
        with self._lock:
            self._depth += 1
            if not self._paused_here and gc.isenabled():
                gc.disable()
                self._paused_here = True
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                last = self._depth == 0 and self._paused_here
                if last:
                    self.steps += 1
                    steps = self.steps
            if last:
                gc.collect(2 if steps % FULL_EVERY_STEPS == 0 else 1)
                with self._lock:
                    if self._depth == 0 and self._paused_here:
                        gc.enable()
                        self._paused_here = False
