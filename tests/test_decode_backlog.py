"""Indications wait undecoded for the control loop, and a newer period supersedes an older one
(xapp/e2/kpi_source.py): a loop short of CPU decides from the newest reports of a fleet, and
never spends its time decoding periods it will not decide on."""

from __future__ import annotations

import time

import pytest

from core.domain import AccessIdentity, Cpe, Direction
from kpm import builders, e2ap
from kpm.codec import KpmPdu, codec_for
from kpm.ueid import gnb_du_ueid
from kpm.versions import KpmVersion
from xapp.e2 import kpi_source
from xapp.e2.config import E2NodeConfig
from xapp.e2.indications import IndicationProcessor
from xapp.e2.kpi_source import E2KpiSource

V3 = KpmVersion.V3_00
FLEET = 1000
START = 1_700_000_000.0
NAMES = ("DRB.UEThpDl", "DRB.UEThpUl")


def fleet_cpes() -> list[Cpe]:
    """A fleet on one NR node, each CPE its own UE."""
    return [
        Cpe(f"cpe-{i:04d}", {"nr": AccessIdentity("nr", e2_node_id="gnb", ue_id=f"gnb-du:{i}")})
        for i in range(FLEET)
    ]


def fleet_processor() -> IndicationProcessor:
    processor = IndicationProcessor(fleet_cpes())
    processor.set_node(E2NodeConfig(node="gnb", access="nr", measurements=NAMES), V3)
    return processor


def period_indication(
    start_s: float, downlink_mbps: float, ues: range = range(FLEET), action_id: int = 1
) -> e2ap.Indication:
    """One period's per-UE report of the fleet's NR node (or of ``ues``, one part of it)."""
    codec = codec_for(V3)
    reports = [(gnb_du_ueid(ue), list(NAMES), [[downlink_mbps * 1000, 1000]]) for ue in ues]
    return e2ap.Indication(
        e2ap.RicRequestId(1001, 1),
        2,
        action_id,
        codec.encode(KpmPdu.HEADER, builders.header(start_s, V3)),
        codec.encode(KpmPdu.MESSAGE, builders.message_format3(reports, 1000)),
        0,
    )


def downlink_by_time(source: E2KpiSource) -> dict[float, set[float]]:
    got: dict[float, set[float]] = {}
    for sample in source.poll(0.0):
        if sample.direction == Direction.DOWNLINK:
            got.setdefault(sample.time_s, set()).add(round(sample.throughput_mbps or 0.0, 3))
    return got


def test_a_newer_period_supersedes_one_the_loop_has_not_read() -> None:
    processor = fleet_processor()
    source = E2KpiSource()
    source.decode_with(processor)
    arrivals: list[int] = []
    source.on_added = lambda: arrivals.append(1)
    before = time.monotonic()
    source.add_indication("gnb", period_indication(START, 100.0))
    source.add_indication("gnb", period_indication(START + 1, 200.0))
    assert len(arrivals) == 2  # the loop is woken at each arrival all the same
    samples = source.poll(0.0)
    # only the newer period was decoded: a sample per CPE and direction, of its values
    assert len(samples) == 2 * FLEET
    assert {s.time_s for s in samples} == {START + 2}
    assert {s.throughput_mbps for s in samples if s.direction == Direction.DOWNLINK} == {200.0}
    assert source.superseded == 1
    assert processor.registry.get_sample_value("atsss_e2_superseded_total") == 1
    # the control delay starts at the arrival, not at the (later) decode
    received = {s.received_s for s in samples}
    assert len(received) == 1
    (arrived,) = received
    assert arrived is not None
    assert before <= arrived
    assert source.poll(1.0) == []


def test_the_parts_of_one_period_and_other_subscriptions_are_all_decoded() -> None:
    processor = fleet_processor()
    source = E2KpiSource()
    source.decode_with(processor)
    half = FLEET // 2
    source.add_indication("gnb", period_indication(START, 100.0, range(half)))
    source.add_indication("gnb", period_indication(START, 100.0, range(half, FLEET)))
    # another action of the node is another stream: its period does not supersede these
    source.add_indication("gnb", period_indication(START + 1, 300.0, range(10), action_id=2))
    got = downlink_by_time(source)
    assert got == {START + 1: {100.0}, START + 2: {300.0}}
    assert source.superseded == 0


def test_an_idle_loop_decodes_each_arrival_and_loses_nothing() -> None:
    processor = fleet_processor()
    source = E2KpiSource()
    source.decode_with(processor)
    for period in range(3):
        source.add_indication("gnb", period_indication(START + period, 10.0 * (period + 1)))
        assert source.decode_waiting() == 1  # what the waiting loop does when woken
    assert downlink_by_time(source) == {
        START + 1: {10.0},
        START + 2: {20.0},
        START + 3: {30.0},
    }
    assert source.superseded == 0


def test_what_waits_is_bounded_and_a_flood_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kpi_source, "MAX_WAITING", 2)
    processor = fleet_processor()
    source = E2KpiSource()
    source.decode_with(processor)
    part = period_indication(START, 50.0, range(5))
    for _ in range(3):
        source.add_indication("gnb", part)
    assert (
        processor.registry.get_sample_value("atsss_e2_rejected_total", {"cause": "backlog-full"})
        == 1
    )
    assert source.decode_waiting() == 2


def test_an_indication_that_does_not_read_is_counted_and_the_rest_decoded() -> None:
    processor = fleet_processor()
    source = E2KpiSource()
    source.decode_with(processor)
    good = period_indication(START, 50.0, range(5))
    source.add_indication("gnb", e2ap.Indication(good.request_id, 2, 7, good.header, b"\x00\x01"))
    source.add_indication("gnb", good)
    assert downlink_by_time(source) == {START + 1: {50.0}}
    rejected = processor.registry.collect()
    assert any(
        s.name == "atsss_e2_rejected_total" and s.value >= 1
        for family in rejected
        for s in family.samples
    )


def test_add_indication_without_a_decoder_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="decode_with"):
        E2KpiSource().add_indication("gnb", period_indication(START, 1.0, range(1)))
