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
  still cheap, and reference cycles are still found within a fraction of a period.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def settle_for_service() -> None:
    """Freeze what exists now and make young-generation passes rarer (see the module's doc)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
