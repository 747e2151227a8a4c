"""What the live loop keeps and says of each step's outcomes: the pushes and failures counted,
the last push of each CPE and direction (the operator API's), the control delays for the
minute's line about them, and a log line per push.

A fleet's step at 1 s periods pushes for some four in ten of its CPEs and directions, about
8,000 sets at 10,000 CPEs. One INFO line each took 14-17 µs of the loop's thread (a seventh of
a core, beside the 1.2-1.5 cores `atsss bench xapp --cpes 10000` measured of the rest of the
step) and gave the log collectors 8,000 lines a second. A step's first ``PUSH_LINES_PER_STEP``
pushes are logged at INFO, as before, and the others counted in one more line; at DEBUG every
push has its line. A CPE or a few see every push as they did. The outcomes that pushed nothing
(a fleet's most) are passed over in C.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from itertools import compress, islice, repeat
from operator import attrgetter, is_not, methodcaller, not_
from typing import NamedTuple

from core.domain import Direction
from xapp.control_loop import PUSH_FAILED, ControlDelay, StepOutcome

log = logging.getLogger("xapp.live")

# Pushes of a step logged one by one at INFO; the rest in one line (each at DEBUG).
PUSH_LINES_PER_STEP = 20
# Control delays kept for the minute's line about them (the rest of a minute's are left out).
MAX_DELAYS_KEPT = 100_000

_PUSHED = attrgetter("pushed")
_REASON = attrgetter("reason")
_DELAY = attrgetter("delay")
_KEY = attrgetter("cpe_id", "direction")
_FAILED = methodcaller("startswith", PUSH_FAILED)


class StepPushes(NamedTuple):
    """A step's outcomes that pushed a set, and those whose push failed, in order."""

    pushes: list[StepOutcome]
    failures: list[StepOutcome]


def pushes_and_failures(outcomes: Sequence[StepOutcome]) -> StepPushes:
    """The outcomes that pushed a set, and those whose push failed, in order (sifted in C;
    once a step, for the record and the metrics)."""
    pushed = list(map(is_not, map(_PUSHED, outcomes), repeat(None)))
    pushes = list(compress(outcomes, pushed))
    if len(pushes) == len(outcomes):
        return StepPushes(pushes, [])
    unpushed = list(compress(outcomes, map(not_, pushed)))
    return StepPushes(pushes, list(compress(unpushed, map(_FAILED, map(_REASON, unpushed)))))


class LastPushes(Mapping[tuple[str, Direction], dict[str, object]]):
    """The outcome of the latest decision per CPE and direction that did something, as the
    operator API shows it (``time_s``, ``result``: applied or failed, ``reason``; a push's
    ``sequence`` and ``weights``), made when it is read. A fleet's step replaces thousands;
    the API reads a few (or the whole fleet's now and then). Read from other threads than
    the loop's: each read takes what it reads whole (a dictionary's item, or a copy of
    them all) before making anything of it."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, Direction], tuple[float, StepOutcome]] = {}

    def keep(self, outcomes: Sequence[StepOutcome], now_s: float) -> None:
        """These outcomes (pushes and failures) as their CPE and direction's latest."""
        self._kept.update(zip(map(_KEY, outcomes), zip(repeat(now_s), outcomes), strict=True))

    def __getitem__(self, key: tuple[str, Direction]) -> dict[str, object]:
        return _shown(*self._kept[key])

    def __iter__(self) -> Iterator[tuple[str, Direction]]:
        return iter(list(self._kept))

    def __len__(self) -> int:
        return len(self._kept)

    def items(self) -> list[tuple[tuple[str, Direction], dict[str, object]]]:  # type: ignore[override]
        return [(key, _shown(*kept)) for key, kept in list(self._kept.items())]


def _shown(time_s: float, outcome: StepOutcome) -> dict[str, object]:
    pushed = outcome.pushed
    if pushed is None:
        return {"time_s": time_s, "result": "failed", "reason": outcome.reason}
    return {
        "time_s": time_s,
        "result": "applied",
        "sequence": pushed.sequence,
        "weights": dict(pushed.weights),
        "reason": outcome.reason,
    }


class PushRecord:
    """The counts, last pushes and delays of the steps taken so far (``take``)."""

    def __init__(self, logger: logging.Logger = log) -> None:
        self.log = logger
        self.pushes = 0
        self.push_failures = 0
        # The outcome of the latest decision per CPE and direction that did something.
        self.last_push = LastPushes()
        # When the weights in force per CPE and direction went out (the step's time).
        self.applied_at_s: dict[tuple[str, Direction], float] = {}
        # The control delays of the pushes since they were last taken (``take_delays``).
        self.delays: list[ControlDelay] = []

    def take(
        self, outcomes: Sequence[StepOutcome], now_s: float, sifted: StepPushes | None = None
    ) -> list[StepOutcome]:
        """A step's outcomes counted, remembered and logged; its pushes returned, in order.
        ``sifted``: its pushes and failures, where the caller has them (``pushes_and_failures``
        of the same outcomes)."""
        pushes, failures = sifted if sifted is not None else pushes_and_failures(outcomes)
        self.pushes += len(pushes)
        self.push_failures += len(failures)
        # (each push's and failure's key and time put in C: thousands a step)
        self.applied_at_s.update(zip(map(_KEY, pushes), repeat(now_s)))
        self.last_push.keep(pushes, now_s)
        self.last_push.keep(failures, now_s)
        room = MAX_DELAYS_KEPT - len(self.delays)
        if room > 0:
            self.delays += islice(filter(None, map(_DELAY, pushes)), room)
        self._log(pushes)
        return pushes

    def take_delays(self) -> list[ControlDelay]:
        """The delays kept since the last call, and none kept any more."""
        taken, self.delays = self.delays, []
        return taken

    def _log(self, pushes: list[StepOutcome]) -> None:
        every = self.log.isEnabledFor(logging.DEBUG)
        if not every and not self.log.isEnabledFor(logging.INFO):
            return
        shown = pushes if every else pushes[:PUSH_LINES_PER_STEP]
        for outcome in shown:
            pushed = outcome.pushed
            assert pushed is not None  # (sifted)
            self.log.info(
                "pushed %s %s %s: %s",
                outcome.cpe_id,
                outcome.direction.value,
                dict(pushed.weights),
                outcome.reason,
            )
        if len(shown) < len(pushes):
            self.log.info(
                "... and %d more pushes this step (ATSSS_LOG_LEVEL=DEBUG logs each)",
                len(pushes) - len(shown),
            )
