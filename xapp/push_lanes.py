"""A step's pushes of one lane, sent side by side by a few threads of the lane's pool.

A fleet's step at 1 s periods pushes thousands of weight sets. Given to the pool one by one,
each was a future of its own: a submit, a condition variable made, set, waited on and read,
about 16 µs of the loop's thread per push (`atsss bench xapp --cpes 10000`: 131 ms a period of
the 1.8 cores). Here as many threads as the pool has take the lane's pushes from one queue in
turn, so a slow or hung agent still holds only its own thread and the others go on, as they did
with one future each; the step waits for the lane as a whole.

A lane starts one thread, and another whenever every thread it has is inside a push while
pushes wait (up to its width): agents that answer at once are served by one or two threads, as
many as their answers' wait calls for, and one that hangs holds its thread while the next one
starts. Starting the whole width at once woke 128 threads for each step part, most of them to
find nothing left (`atsss bench xapp --cpes 10000`: about 3 % of a period).

A push still under way when the step stops waiting (``late``) gets a future then, which works
as the pool's did: cancelled while its push has not started, it is never sent; done once the
push has landed or failed.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class PushLane(Generic[Item, Result]):
    """``push`` of every item, side by side on ``pool``'s threads (``width`` of them at most),
    the items taken in order. ``result(item)`` once it is done."""

    def __init__(
        self,
        items: Sequence[Item],
        push: Callable[[Item], Result],
        pool: ThreadPoolExecutor,
        width: int,
    ) -> None:
        self._push = push
        self._pool, self._width = pool, width
        self._waiting: deque[Item] = deque(items)
        self._lock = threading.Lock()
        # threads started for the lane (not ended yet), and how many of them are in a push
        self._threads = 0
        self._pushing = 0
        self._all_done = threading.Event()
        self._left = len(items)
        # by id(item): what each push gave (or raised), the futures of those left late,
        # which have started, which were never sent (``stop``)
        self._results: dict[int, Result] = {}
        self._raised: dict[int, BaseException] = {}
        self._futures: dict[int, Future[Result]] = {}
        self._started: set[int] = set()
        self._stopped: set[int] = set()
        if not items:
            self._all_done.set()
        elif width > 0:
            self._threads = 1
            self._start_thread()

    def wait(self, timeout: float | None) -> bool:
        """Whether every push is done, waiting at most ``timeout`` seconds (None: until)."""
        return self._all_done.wait(timeout)

    def done(self, item: Item) -> bool:
        key = id(item)
        return key in self._results or key in self._raised

    def result(self, item: Item) -> Result:
        """What the item's push gave (it is done); what it raised is raised again here."""
        key = id(item)
        if key in self._raised:
            raise self._raised[key]
        return self._results[key]

    def late(self, items: Sequence[Item]) -> dict[int, Future[Result]]:
        """A future for each of ``items`` whose push is not done (as the pool gives one:
        cancellable until the push starts, cancelled if it never will be), by id(item)."""
        late: dict[int, Future[Result]] = {}
        with self._lock:
            for item in items:
                key = id(item)
                if key in self._results or key in self._raised:
                    continue
                future = self._futures.get(key)
                if future is None:
                    future = self._futures[key] = Future()
                    if key in self._stopped:
                        future.cancel()
                    elif key in self._started:
                        future.set_running_or_notify_cancel()  # (sending: not withdrawn)
                late[key] = future
        return late

    def stop(self) -> None:
        """Start no more pushes (the loop is stopping): those not started are never sent."""
        with self._lock:
            left = list(self._waiting)
            self._waiting.clear()
            self._stopped.update(map(id, left))
            futures = [self._futures.get(id(item)) for item in left]
        for future in futures:
            if future is not None:
                future.cancel()
        self._count_done(len(left))

    def _start_thread(self) -> None:
        """One more of the pool's threads draining the lane (counted in ``_threads`` before)."""
        try:
            self._pool.submit(self._drain)
        except RuntimeError:  # the pool is shut down (the loop is stopping): none starts
            with self._lock:
                self._threads -= 1

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._waiting:
                    self._threads -= 1
                    return
                item = self._waiting.popleft()
                key = id(item)
                future = self._futures.get(key)
                self._started.add(key)
            if future is not None and not future.set_running_or_notify_cancel():
                self._count_done(1)  # withdrawn while it waited: never sent
                continue
            with self._lock:
                self._pushing += 1
                # Every thread of the lane in a push (a slow or hung agent holds one) while
                # pushes wait: one more, so that they do not wait behind them.
                another = (
                    bool(self._waiting)
                    and self._pushing == self._threads
                    and self._threads < self._width
                )
                if another:
                    self._threads += 1
            if another:
                self._start_thread()
            try:
                result = self._push(item)
            except BaseException as error:  # (the step raises it, as a future's result would)
                with self._lock:
                    self._pushing -= 1
                    self._raised[key] = error
                    future = self._futures.get(key)
                if future is not None:
                    future.set_exception(error)
            else:
                with self._lock:
                    self._pushing -= 1
                    self._results[key] = result
                    future = self._futures.get(key)
                if future is not None:
                    future.set_result(result)
            self._count_done(1)

    def _count_done(self, count: int) -> None:
        with self._lock:
            self._left -= count
            if self._left <= 0:
                self._all_done.set()
