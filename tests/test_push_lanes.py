"""A step's pushes of one lane go out side by side on a few threads (xapp/push_lanes.py): every
push made once, what each gave or raised told back, a hung push holding only its own thread,
and the pushes left late behaving as the pool's futures did (cancellable until they start)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xapp.push_lanes import PushLane

DEADLINE_S = 30.0  # a condition that must come long before this


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(8)
    yield executor
    executor.shutdown(wait=True, cancel_futures=True)


def _until(condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` came true before the deadline (looked at every millisecond)."""
    deadline = time.monotonic() + DEADLINE_S
    tick = threading.Event()
    while not condition():
        if time.monotonic() > deadline:
            return False
        tick.wait(0.001)
    return True


class Item:
    def __init__(self, number: int, fails: bool = False) -> None:
        self.number, self.fails = number, fails


@settings(max_examples=60, deadline=None)
@given(
    outcomes=st.lists(st.sampled_from(["ok", "error", "raises"]), max_size=60),
    width=st.integers(1, 8),
)
def test_every_push_is_made_once_and_what_it_gave_is_told(outcomes: list[str], width: int) -> None:
    items = [Item(i) for i in range(len(outcomes))]
    pushed: list[int] = []
    lock = threading.Lock()

    def push(item: Item) -> str | None:
        with lock:
            pushed.append(item.number)
        kind = outcomes[item.number]
        if kind == "raises":
            raise RuntimeError(f"push {item.number} broke")
        return f"refused {item.number}" if kind == "error" else None

    with ThreadPoolExecutor(8) as executor:
        lane = PushLane(items, push, executor, width)
        assert lane.wait(DEADLINE_S)
        assert lane.late(items) == {}
        for item, kind in zip(items, outcomes, strict=True):
            assert lane.done(item)
            if kind == "raises":
                with pytest.raises(RuntimeError, match=f"push {item.number} broke"):
                    lane.result(item)
            else:
                assert lane.result(item) == (f"refused {item.number}" if kind == "error" else None)
    assert sorted(pushed) == list(range(len(outcomes)))


def test_a_hung_push_holds_only_its_own_thread(pool: ThreadPoolExecutor) -> None:
    release = threading.Event()
    hung = Item(0)
    others = [Item(i) for i in range(1, 40)]

    def push(item: Item) -> None:
        if item is hung:
            release.wait(DEADLINE_S)

    lane = PushLane([hung, *others], push, pool, 3)
    # the others land while the first push hangs
    assert _until(lambda: all(lane.done(item) for item in others))
    assert not lane.wait(0)
    late = lane.late([hung, *others])
    assert list(late) == [id(hung)]
    assert not late[id(hung)].cancel()  # sending: it is waited for, not withdrawn
    release.set()
    assert late[id(hung)].result(DEADLINE_S) is None
    assert lane.wait(DEADLINE_S)


def test_a_push_left_late_before_it_started_can_be_withdrawn(pool: ThreadPoolExecutor) -> None:
    release, started = threading.Event(), threading.Event()
    first, waiting, last = Item(0), Item(1), Item(2)
    pushed: list[int] = []

    def push(item: Item) -> str:
        pushed.append(item.number)
        if item is first:
            started.set()
            release.wait(DEADLINE_S)
        return f"landed {item.number}"

    lane = PushLane([first, waiting, last], push, pool, 1)  # one thread: the others wait
    assert started.wait(DEADLINE_S)
    late = lane.late([first, waiting, last])
    assert set(late) == {id(first), id(waiting), id(last)}
    assert late[id(waiting)].cancel()  # not started: never sent
    release.set()
    assert late[id(first)].result(DEADLINE_S) == "landed 0"
    assert late[id(last)].result(DEADLINE_S) == "landed 2"
    assert lane.wait(DEADLINE_S)
    assert pushed == [0, 2]
    assert late[id(waiting)].cancelled()


def test_stopping_sends_nothing_more(pool: ThreadPoolExecutor) -> None:
    release, started = threading.Event(), threading.Event()
    items = [Item(i) for i in range(5)]
    pushed: list[int] = []

    def push(item: Item) -> None:
        pushed.append(item.number)
        started.set()
        release.wait(DEADLINE_S)

    lane = PushLane(items, push, pool, 1)
    assert started.wait(DEADLINE_S)
    before = lane.late(items[1:2])  # one left late before the stop, the others after
    lane.stop()
    release.set()
    assert lane.wait(DEADLINE_S)
    after = lane.late(items)
    assert set(after) == {id(item) for item in items[1:]}  # the first was sending: it landed
    assert all(future.cancelled() for future in after.values())
    assert before[id(items[1])] is after[id(items[1])]
    assert pushed == [0]


def test_a_lane_of_nothing_is_done_at_once(pool: ThreadPoolExecutor) -> None:
    lane: PushLane[Item, None] = PushLane([], lambda item: None, pool, 4)
    assert lane.wait(0)


@pytest.mark.parametrize("hung_first", [1, 7])
def test_pushes_behind_hung_ones_land_while_the_width_allows(hung_first: int) -> None:
    """A lane starts its threads as its pushes hold them: with the first ``hung_first`` pushes
    hanging (agents that never answer), a thread starts for what waits behind each, and
    everything after them lands, up to the lane's width of pushes under way at once."""
    release = threading.Event()
    hung = [Item(i) for i in range(hung_first)]
    others = [Item(i) for i in range(hung_first, hung_first + 200)]
    threads: set[int] = set()

    def push(item: Item) -> None:
        threads.add(threading.get_ident())
        if item in hung:
            release.wait(DEADLINE_S)

    with ThreadPoolExecutor(16) as executor:
        lane = PushLane([*hung, *others], push, executor, 8)
        try:
            assert _until(lambda: all(lane.done(item) for item in others))
            assert not any(lane.done(item) for item in hung)
            assert len(threads) <= 8  # (the width: at most that many at once)
        finally:
            release.set()
        assert lane.wait(DEADLINE_S)


def test_a_lane_as_wide_as_its_hung_pushes_holds_the_rest_until_one_lands() -> None:
    """Its width in hung pushes: nothing more starts (the width bounds a lane's threads) until
    one lands."""
    release = threading.Event()
    hung = [Item(i) for i in range(3)]
    others = [Item(i) for i in range(3, 10)]

    def push(item: Item) -> None:
        if item in hung:
            release.wait(DEADLINE_S)

    with ThreadPoolExecutor(8) as executor:
        lane = PushLane([*hung, *others], push, executor, 3)
        assert not lane.wait(0.2)
        assert not any(lane.done(item) for item in others)
        release.set()
        assert lane.wait(DEADLINE_S)
        assert all(lane.done(item) for item in others)
