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
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
OLDEST_THRESHOLD = 100


def settle_for_service() -> None:
    """Freeze what exists now and make young-generation passes rarer (see the module's doc)."""
    gc.collect()
    gc.freeze()
    _, middle, _ = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, OLDEST_THRESHOLD)
