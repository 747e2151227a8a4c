"""Pushes to one agent that are under way together go out as one request.

The MPTCP proxy's agent serves every CPE's downlink: a step that decides for a thousand CPEs
would send it a thousand requests, each of which makes it rewrite its whole rule table. The
control loop pushes each set from its own thread; here those threads meet. The first becomes
the sender and takes everything queued (up to ``max_batch``); the others wait for their own
result, and whoever is still queued when a batch comes back sends the next. No timer: a lone
push goes out at once, and the batches grow by themselves with the load.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# What a batch send returns: one result per item, in order (or raises for the whole batch).
SendBatch = Callable[[Sequence[dict[str, Any]]], Sequence[Any]]


@dataclass
class _Slot:
    item: dict[str, Any]
    done: bool = False
    result: Any = None
    error: BaseException | None = None
    wake: threading.Event = field(default_factory=threading.Event)


class BatchedCalls:
    def __init__(self, send: SendBatch, max_batch: int = 256) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be ≥ 1, got {max_batch}")
        self._send = send
        self._max = max_batch
        self._lock = threading.Lock()
        self._queue: list[_Slot] = []
        self._sending = False
        self.batches = 0  # sent so far (for tests and metrics)
        self.largest = 0

    def call(self, item: dict[str, Any]) -> Any:
        """``item``'s own result once its batch is answered; an exception raised by the
        batch's send is raised here too, for every item of that batch."""
        slot = _Slot(item)
        with self._lock:
            self._queue.append(slot)
        while True:
            with self._lock:
                if slot.done:
                    break
                if self._sending:
                    slot.wake.clear()
                    lead = False
                else:
                    self._sending = True
                    batch, self._queue = self._queue[: self._max], self._queue[self._max :]
                    lead = True
            if not lead:
                slot.wake.wait()
                continue
            self._send_one(batch)
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _send_one(self, batch: list[_Slot]) -> None:
        try:
            results = self._send([s.item for s in batch])
            if len(results) != len(batch):
                raise ValueError(f"{len(results)} results for a batch of {len(batch)}")
            for slot, result in zip(batch, results, strict=True):
                slot.result = result
        except BaseException as error:  # every item of the batch hears of it
            for slot in batch:
                slot.error = error
        with self._lock:
            self.batches += 1
            self.largest = max(self.largest, len(batch))
            for slot in batch:
                slot.done = True
            self._sending = False
            waiting = list(self._queue)
        for slot in batch + waiting:  # results to hand over; one of the queued sends next
            slot.wake.set()
