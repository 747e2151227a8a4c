"""Sequence numbers of weight sets: a bounded space compared as serial numbers (RFC 1982).

Every weight set the xApp sends an agent carries a sequence number, and an agent applies a set
only if its number comes after the one in force, so that a late or repeated request never undoes
a newer one. With unbounded integers one set numbered at the top of the range (a bug, a hostile
client with the agent's token) would leave no number after it: the xApp would be locked out of
that CPE for good. So numbers live in [0, SPACE) and wrap: ``b`` comes after ``a`` when it is
less than half the space ahead of it, counting round the end. From any number in force there is
always a next one.
"""

from __future__ import annotations

SPACE = 2**31
HALF = SPACE // 2


def is_after(candidate: int, current: int) -> bool:
    """Whether ``candidate`` comes after ``current`` (less than half the space ahead)."""
    return 0 < (candidate - current) % SPACE < HALF


def next_after(current: int | None) -> int:
    """The number that follows ``current`` (1 to begin with)."""
    return 1 if current is None else (current + 1) % SPACE


def latest(first: int, second: int) -> int:
    """The later of two numbers."""
    return second if is_after(second, first) else first


def in_space(number: int) -> bool:
    return 0 <= number < SPACE


def epoch_at(when_s: float) -> int:
    """The owner epoch of whoever controls a CPE since ``when_s`` (wall clock): milliseconds,
    so each later owner's is higher. Agents refuse a set from an earlier owner than the one in
    force (a fencing token: xapp/ownership.py)."""
    return round(when_s * 1000)
