"""KpiSource adapter for the E2 path: transports hand indications in, the control loop polls
samples out.

An indication is decoded in the control loop's own thread, when the loop reads (``poll``) or
while it waits for a period's reports (``decode_waiting``), not in the transport's thread as
it arrives. Decoding a 1,000-UE indication costs about a hundred milliseconds of a core, and
an xApp short of CPU (a fleet larger than its share of a core) that decoded every arrival
spent its time decoding periods it would never decide on: the loop fell ever further behind
(report → decision 10 s at 1,000 CPEs on two shared cores). Here a subscription's newer
period supersedes its older one before either is decoded, so a busy loop decodes at most one
period per subscription per step and decides from the newest; an idle loop decodes each
arrival at once, as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.domain import KpiSample
from core.sample_batch import SampleBacklog

if TYPE_CHECKING:
    from kpm.e2ap import Indication
    from xapp.e2.indications import IndicationProcessor

# Indications waiting to be decoded, over every subscription: a bound on what a node that
# floods (or one sending a period in ever more parts) can make the xApp hold. A fleet's period
# is a few indications per node (one per thousand UEs).
MAX_WAITING = 4096

# A subscription's stream of indications: the node, the RIC request ID, the RAN function and
# the action.
_Stream = tuple[str, int, int, int, int]


@dataclass
class _Period:
    """A subscription's newest period not yet decoded: its indications (the parts of a large
    period share one header, which carries the period's collection start)."""

    header: bytes
    parts: list[tuple[Indication, float]] = field(default_factory=list)


class E2KpiSource:
    """Thread-safe buffer between the E2 transport threads and the control loop.

    Bounded so that a stalled loop cannot eat the memory; when full, the oldest samples go
    first (a newer report of the same path supersedes them anyway) and are counted.
    """

    def __init__(self, max_samples: int = 100_000) -> None:
        # (in the pieces they were decoded in: a step reads its columns from them)
        self._backlog = SampleBacklog(max_samples)
        self._lock = threading.Lock()
        # Told (from the transport's thread) when reports came in: the loop decides on them.
        self.on_added: Callable[[], None] = lambda: None
        # Told (from the loop's thread) of each batch of samples decoded here.
        self.on_decoded: Callable[[Sequence[KpiSample]], None] = lambda samples: None
        self._decoder: IndicationProcessor | None = None
        self._waiting: dict[_Stream, _Period] = {}
        self._waiting_count = 0
        self._decoding = threading.Lock()  # one decoder at a time, parts in arrival order
        self.superseded = 0  # indications never decoded: a newer period came first

    def decode_with(self, processor: IndicationProcessor) -> None:
        """The processor that turns the indications handed in (``add_indication``) into
        samples."""
        self._decoder = processor

    def add(self, samples: Sequence[KpiSample]) -> None:
        self._keep(samples)
        if samples:
            self.on_added()

    def add_indication(self, node: str, indication: Indication) -> None:
        """An indication as it arrives (a transport's thread): kept undecoded until the loop
        reads, the report's arrival time with it (the control delay starts there)."""
        if self._decoder is None:
            raise RuntimeError("add_indication before decode_with: nothing would decode it")
        arrived = time.monotonic()
        self._decoder.heard_from(node)
        stream = (
            node,
            indication.request_id.requestor_id,
            indication.request_id.instance_id,
            indication.ran_function_id,
            indication.action_id,
        )
        superseded = 0
        with self._lock:
            period = self._waiting.get(stream)
            if period is not None and period.header != indication.header:
                # a newer period came: the older one is never decoded
                del self._waiting[stream]
                superseded = len(period.parts)
                self._waiting_count -= superseded
                self.superseded += superseded
                period = None
            full = self._waiting_count >= MAX_WAITING
            if not full:
                if period is None:
                    period = self._waiting[stream] = _Period(indication.header)
                period.parts.append((indication, arrived))
                self._waiting_count += 1
        if superseded:
            self._decoder.superseded.inc(superseded)
        if full:
            self._decoder.reject(
                node, "backlog-full", f"{MAX_WAITING} indications wait already; one skipped"
            )
            return
        self.on_added()

    def decode_waiting(self) -> int:
        """Decode what waits (the loop's thread): each subscription's newest period into the
        buffer. Returns how many indications were decoded."""
        decoder = self._decoder
        if decoder is None:
            return 0
        with self._decoding:
            with self._lock:
                waiting, self._waiting, self._waiting_count = self._waiting, {}, 0
            decoded = 0
            for (node, *_), period in waiting.items():
                for indication, arrived in period.parts:
                    try:
                        samples = decoder.handle_indication(node, indication, received_s=arrived)
                    except Exception as error:  # the loop's thread must go on: counted, logged
                        decoder.reject(node, "malformed", f"unreadable indication: {error!r}")
                        continue
                    decoded += 1
                    if samples:
                        self.on_decoded(samples)
                        self._keep(samples)
            return decoded

    @property
    def dropped(self) -> int:
        """Samples the bound dropped, oldest first, before the loop read them."""
        return self._backlog.dropped

    def _keep(self, samples: Sequence[KpiSample]) -> None:
        with self._lock:
            self._backlog.keep(samples)

    def resize(self, max_samples: int) -> None:
        """A new bound (the fleet grew or shrank); the newest samples are kept."""
        with self._lock:
            self._backlog.resize(max_samples)

    def poll(self, now_s: float) -> Sequence[KpiSample]:
        self.decode_waiting()
        with self._lock:
            return self._backlog.take()
