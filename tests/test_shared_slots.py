"""The fleet's paths' places shared by every estimator's tables (core/slots.py): the sources'
kept estimates, fusion's track records. Sharing changes where a path's row is, never what is
read there: estimators built on one ``Slots`` estimate what estimators with their own do."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt
from hypothesis import given
from hypothesis import strategies as st

from bench.xapp_bench import _NoAgents, _Queue, encoded_periods, scaled_site
from core.domain import Direction, KpiSample
from core.sample_batch import SampleBatch
from core.scenario.e2_identities import DEFAULT_SUBSCRIBED, e2_cpes, node_name
from core.slots import Places, Slots, distinct
from xapp.e2.config import E2NodeConfig
from xapp.e2.indications import IndicationProcessor
from xapp.estimators.columns import StepSamples, places_of_paths
from xapp.estimators.fusion import FusedEstimator
from xapp.estimators.kpi import KpiEstimator
from xapp.estimators.model import ModelEstimator
from xapp.estimators.probe import ProbeEstimator
from xapp.estimators.said import Path
from xapp.estimators.track_records import TrackRecords

from .test_model_history_equivalence import SHARED


def test_places_are_found_again_once_the_slots_grew() -> None:
    slots: Slots[str] = Slots()
    slots.of("a")
    at = Places(["a", "b"])
    assert at.in_slots(slots).tolist() == [0, -1]
    slots.of("b")  # given a place meanwhile (another table kept the path)
    assert at.in_slots(slots).tolist() == [0, 1]


@given(st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=12), max_size=5))
def test_places_are_given_in_the_order_keys_are_first_met(asked: list[list[str]]) -> None:
    """``many`` gives each new key the next place in the order first met, a key met twice in
    one call its place once, and ``found`` reads without giving: as key by key with ``of``."""
    slots: Slots[str] = Slots()
    one_by_one: Slots[str] = Slots()
    for keys in asked:
        before = [one_by_one.get(key) for key in keys]
        assert slots.found(keys).tolist() == [-1 if b is None else b for b in before]
        assert slots.many(keys).tolist() == [one_by_one.of(key) for key in keys]
        assert slots.many(keys).dtype == np.intp
    assert list(slots.items()) == list(one_by_one.items())
    every = [key for key, _ in slots.items()]
    assert slots.keys_at(range(len(every))) == every  # each place's key, as given


def test_a_steps_places_are_found_once_for_every_reader_of_the_same_slots() -> None:
    """A fleet's step: each sample's path's place in the estimators' shared slots, found by
    the first reader and read again by the others; other slots find their own."""
    step = StepSamples(
        KpiSample(f"cpe-{i // 3}", ("nr", "wifi", "lifi")[i % 3], Direction.DOWNLINK, 1.0, 1.0)
        for i in range(3000)
    )
    shared: Slots[Path] = Slots()
    shared.many(step.paths[::-7])  # some paths placed before, by another table
    first = step.places(shared)
    assert first.tolist() == [shared.get(path) for path in step.paths]
    assert step.places(shared) is first  # (not found again)
    own: Slots[Path] = Slots()
    assert step.places(own).tolist() == list(range(3000))
    assert places_of_paths(list(step), shared).tolist() == first.tolist()


def test_track_records_on_shared_slots_read_as_on_their_own() -> None:
    """Paths given places by another table first (and beyond the records' arrays) have no
    record until one is put."""
    shared: Slots[Path] = Slots()
    paths = [(f"cpe-{i}", "nr", Direction.DOWNLINK) for i in range(40)]
    on_shared, on_own = TrackRecords(["kpi", "fused"], shared), TrackRecords(["kpi", "fused"])
    shared.many(paths[::-1])  # another table's places, in another order
    for records in (on_shared, on_own):
        assert (records.rows(paths) == -1).sum() == len(paths) - (records is on_shared) * 16
        rows = records.rows_made(paths[:30])
        columns = np.full(30, records.column("kpi"))
        records.put(rows, columns, np.arange(30), np.linspace(0, 1, 30), np.ones(30))
        records[(paths[35], "fused")] = (2, 0.5, 3.0)
    assert on_shared.as_dict() == on_own.as_dict()
    for records in (on_shared, on_own):
        gathered = records.gather(records.rows(paths), np.full(40, records.column("kpi")))
        assert gathered[0].tolist() == [True] * 30 + [False] * 10
    assert on_shared.get((paths[35], "fused")) == on_own.get((paths[35], "fused")) == (2, 0.5, 3.0)


def _estimators(slots: Slots[Path] | None) -> tuple[FusedEstimator, ProbeEstimator]:
    kpi = KpiEstimator(slots)
    model = ModelEstimator(SHARED._models, slots=slots)
    probe = ProbeEstimator(_NoAgents(), advisors=(kpi, model), slots=slots)
    fused = FusedEstimator([kpi, model, probe], references=[kpi, probe], slots=slots)
    return fused, probe


def _steps(cpes: int, periods: int) -> list[list[KpiSample]]:
    scenario = scaled_site(cpes, periods + 1)
    processor = IndicationProcessor(e2_cpes(scenario))
    for access in scenario.access_names:
        config = E2NodeConfig(
            node=node_name(access), access=access, measurements=DEFAULT_SUBSCRIBED[access]
        )
        processor.set_node(config, None)
    return [
        [s for node, payload in batch for s in processor.handle_payload(node, payload)]
        for batch in encoded_periods(scenario, periods, 1.0, 1000)
    ]


def test_estimators_on_shared_slots_estimate_what_they_do_on_their_own() -> None:
    """A 30-CPE site over six periods (fusion's judging, the models' histories, the probe
    planner's advice): the fused estimates, as rows, alike in every period."""
    shared, own = _estimators(Slots()), _estimators(None)
    queue = _Queue()
    for n, samples in enumerate(_steps(30, 6)):
        now_s = n + 1.0
        paths = sorted({(s.cpe_id, s.access, s.direction) for s in samples})
        found = []
        for fused, _ in (shared, own):
            queue.keep(list(samples))
            fused.update(StepSamples(queue.poll(now_s)), now_s)
            rows = fused.estimate_rows(paths[::-1], now_s)  # another order than reported
            found.append(
                np.column_stack(
                    [rows.present, rows.capacity, rows.stddev, rows.measured_at, rows.available]
                )
            )
        np.testing.assert_array_equal(found[0], found[1])
        assert shared[0]._errors.as_dict() == own[0]._errors.as_dict()
    assert shared[1].stats == own[1].stats


def test_a_few_keys_are_marked_by_place_and_repeated_places_are_told() -> None:
    """``Slots.marked``: the places of the keys given (a key with no place marks nothing, and
    a place with no key, -1, reads the unmarked end); ``distinct``: whether a place repeats."""
    slots: Slots[str] = Slots()
    places = slots.many(["a", "b", "c"])
    marks = slots.marked(["c", "never"])
    assert marks.tolist() == [False, False, True, False]
    assert marks[np.array([2, -1])].tolist() == [True, False]
    assert distinct(places)
    assert distinct(np.array([], dtype=np.intp))
    assert not distinct(np.array([0, 2, 0]))


def test_places_a_caller_has_are_read_as_given_and_kept_while_complete() -> None:
    """Places the caller passes down (``Places.known``) are read without a look-up, and a
    look-up that found every key is not made again as the slots grow (a found place never
    changes); one that missed a key is."""
    slots: Slots[str] = Slots()
    slots.many(["a", "b", "c"])
    given_places = np.array([2, 0], dtype=np.intp)
    at = Places.known(["c", "a"], slots, given_places)
    assert at.in_slots(slots) is given_places
    slots.of("d")
    assert at.in_slots(slots) is given_places
    other: Slots[str] = Slots()
    other.of("a")
    assert at.in_slots(other).tolist() == [-1, 0]  # (other slots: looked up there)
    found = Places(["a", "b"])
    first = found.in_slots(slots)
    slots.of("e")
    assert found.in_slots(slots) is first  # (complete: kept)
    missing = Places(["a", "z"])
    assert missing.in_slots(slots).tolist() == [0, -1]
    slots.of("z")
    assert missing.in_slots(slots).tolist() == [0, 5]


class _CountingSlots(Slots[str]):
    """Slots that count the keys looked up (``found``)."""

    looked_up = 0

    def found(self, keys: Sequence[str]) -> npt.NDArray[np.intp]:
        self.looked_up += len(keys)
        return super().found(keys)


@given(
    st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=10),
    st.sets(st.sampled_from("abcdefghijz")),
)
def test_places_less_some_keys_keep_their_places_and_their_order(
    keys: list[str], dropped: set[str]
) -> None:
    """A sweep less the paths a probe is under way on (``Places.without``): the keys left, in
    order, each with the place it had, read without a look-up; a look-up that missed a key
    is made again once the slots have grown."""
    slots = _CountingSlots()
    slots.many(list("jihgfedcba"))
    at = Places.known(keys, slots, slots.found(keys))
    slots.looked_up = 0
    less = at.without(dropped)
    assert less.keys == [key for key in keys if key not in dropped]
    assert less.in_slots(slots).tolist() == [slots.get(key) for key in less.keys]
    assert slots.looked_up == 0
    if not dropped & set(keys):
        assert less is at  # (nothing dropped: the same, not a copy)
    missing = Places(["a", "y", "b"])
    missing.in_slots(slots)
    later = missing.without({"b"})
    slots.of("y")
    assert later.in_slots(slots).tolist() == [slots.get("a"), slots.get("y")]


def test_a_sweep_reads_a_fleets_paths_by_the_places_it_has() -> None:
    """A 1,000-CPE fleet's update with the probe planner's sweep (every known path judged):
    the step's paths are looked up once, for every reader; the sweep's paths, taken by their
    places in the shared slots, not at all (they were looked up again: three times as many),
    nor those fusion makes estimates of for its own judging."""
    slots = _CountingPaths()
    fused, probe = _estimators(slots)
    queue = _Queue()
    for n, samples in enumerate(_steps(1000, 2)):
        now_s = n + 1.0
        queue.keep(list(samples))
        step = StepSamples(queue.poll(now_s))
        slots.looked_up = 0
        fused.update(step, now_s)
        assert probe._last_sweep_s == now_s  # (swept)
        assert len(probe._history.known()) == len(step.paths)  # (every path judged)
        # (and a few more: the paths their nodes report down, marked by place)
        assert slots.looked_up < len(step.paths) * 1.05


class _CountingPaths(Slots[Path]):
    """``_CountingSlots`` of paths."""

    looked_up = 0

    def found(self, keys: Sequence[Path]) -> npt.NDArray[np.intp]:
        self.looked_up += len(keys)
        return super().found(keys)


def _processor(scenario: object) -> IndicationProcessor:
    processor = IndicationProcessor(e2_cpes(scenario))  # type: ignore[arg-type]
    for access in scenario.access_names:  # type: ignore[attr-defined]
        config = E2NodeConfig(
            node=node_name(access), access=access, measurements=DEFAULT_SUBSCRIBED[access]
        )
        processor.set_node(config, None)
    return processor


def _as_batch(samples: Sequence[KpiSample]) -> SampleBatch:
    assert isinstance(samples, SampleBatch)
    return samples


def test_a_fleets_batches_are_estimated_as_samples_made_up_front_and_few_are_made() -> None:
    """A 1,000-CPE fleet over four periods, its messages read into batches whose samples are
    made only when read (core/sample_batch.py): the fused estimates and the probe planner's
    state are those of the same samples all made up front, while the estimators make few of
    them, if any (those read one by one: a probe's record, a path's history)."""
    scenario = scaled_site(1000, 5)
    lazy, eager = _processor(scenario), _processor(scenario)
    (lazy_fused, lazy_probe), (eager_fused, eager_probe) = _estimators(Slots()), _estimators(None)
    for n, period in enumerate(encoded_periods(scenario, 4, 1.0, 1000)):
        now_s = n + 1.0
        batches = [_as_batch(lazy.handle_payload(node, payload)) for node, payload in period]
        made_up_front = [list(eager.handle_payload(node, payload)) for node, payload in period]
        lazy_fused.update(StepSamples.joined(batches), now_s)
        eager_fused.update(StepSamples([s for piece in made_up_front for s in piece]), now_s)
        samples = sum(len(batch) for batch in batches)
        made = sum(len(batch) - batch._unmade for batch in batches)
        assert samples > 5000
        assert made < samples * 0.05
        paths = sorted(path for batch in batches for path in batch.paths)
        found = [
            np.column_stack([r.present, r.capacity, r.stddev, r.measured_at, r.available])
            for r in (f.estimate_rows(paths, now_s) for f in (lazy_fused, eager_fused))
        ]
        np.testing.assert_array_equal(found[0], found[1])
        # (the same samples but for when each message arrived: each was read twice)
        assert [[replace(s, received_s=None) for s in batch] for batch in batches] == [
            [replace(s, received_s=None) for s in piece] for piece in made_up_front
        ]
    assert lazy_probe.stats == eager_probe.stats
    assert lazy_probe._down == eager_probe._down
