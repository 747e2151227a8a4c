"""RIC indications become KPI samples; bad ones are counted, logged once per cause, skipped."""

from __future__ import annotations

import logging

import pytest

from core.domain import AccessIdentity, Cpe, Direction, KpiSample
from kpm import builders, e2ap
from kpm.codec import KpmPdu, codec_for
from kpm.ueid import gnb_du_ueid
from kpm.versions import KpmVersion
from xapp.e2.config import E2NodeConfig
from xapp.e2.indications import IndicationProcessor

V2, V3 = KpmVersion.V2_03, KpmVersion.V3_00
NOW = 1_700_000_000.0
NR_NAMES = ("DRB.UEThpDl", "DRB.UEThpUl", "RRU.PrbAvailDl")
LIFI_NAMES = ("LIFI.StaThpDl", "LIFI.LinkState")


def processor() -> IndicationProcessor:
    cpes = [
        Cpe(
            "cpe-1",
            {
                "nr": AccessIdentity("nr", e2_node_id="gnb", ue_id="gnb-du:7"),
                "lifi": AccessIdentity(
                    "lifi", e2_node_id="lifi-ap", station_mac="02:00:00:00:00:01"
                ),
            },
        ),
        Cpe("cpe-2", {"nr": AccessIdentity("nr", e2_node_id="gnb", ue_id="gnb-du:8")}),
    ]
    p = IndicationProcessor(cpes)
    p.set_node(E2NodeConfig(node="gnb", access="nr", measurements=NR_NAMES), V3)
    p.set_node(E2NodeConfig(node="lifi-ap", access="lifi", measurements=LIFI_NAMES), V3)
    return p


def indication(header: bytes, message: bytes) -> bytes:
    return e2ap.encode(e2ap.Indication(e2ap.RicRequestId(1, 1), 2, 1, header, message, 0))


def encoded(version: KpmVersion, message: dict[str, object], start_s: float = NOW) -> bytes:
    codec = codec_for(version)
    return indication(
        codec.encode(KpmPdu.HEADER, builders.header(start_s, version)),
        codec.encode(KpmPdu.MESSAGE, message),
    )


def per_ue(
    reports: list[tuple[int, list[str], list[list[float | int | None]]]],
) -> dict[str, object]:
    return builders.message_format3([(gnb_du_ueid(ue), n, p) for ue, n, p in reports], 1000)


@pytest.mark.parametrize("version", [V2, V3])
def test_per_ue_report_becomes_samples_per_cpe_and_direction(version: KpmVersion) -> None:
    p = processor()
    message = per_ue(
        [(7, ["DRB.UEThpDl", "DRB.UEThpUl"], [[342000, 30000]]), (8, ["DRB.UEThpDl"], [[1000]])]
    )
    samples = p.handle_payload("gnb", encoded(version, message))
    got = {(s.cpe_id, s.direction): s for s in samples}
    assert set(got) == {
        ("cpe-1", Direction.DOWNLINK),
        ("cpe-1", Direction.UPLINK),
        ("cpe-2", Direction.DOWNLINK),
    }
    assert got[("cpe-1", Direction.DOWNLINK)].throughput_mbps == pytest.approx(342.0)
    assert got[("cpe-1", Direction.UPLINK)].throughput_mbps == pytest.approx(30.0)
    assert got[("cpe-1", Direction.DOWNLINK)].time_s == pytest.approx(NOW + 1.0)
    assert got[("cpe-1", Direction.DOWNLINK)].period_s == 1.0
    assert got[("cpe-1", Direction.DOWNLINK)].access == "nr"


def test_cell_values_reach_every_cpe_of_the_node() -> None:
    p = processor()
    message = builders.message_format1(["RRU.PrbAvailDl"], [[133]], 1000)
    samples = p.handle_payload("gnb", encoded(V3, message))
    assert sorted(s.cpe_id for s in samples) == ["cpe-1", "cpe-2"]
    assert all(s.measurements == {"RRU.PrbAvailDl": 133.0} for s in samples)


def test_lifi_link_state_by_station_mac() -> None:
    p = processor()
    ueid = (
        "gNB-DU-UEID",
        {"gNB-CU-UE-F1AP-ID": 1, "ran-UEID": b"\x00\x00\x02\x00\x00\x00\x00\x01"},
    )
    message = builders.message_format3([(ueid, list(LIFI_NAMES), [[12100, 1], [0, 0]])], 500)
    samples = p.handle_payload("lifi-ap", encoded(V3, message))
    downlink = [s for s in samples if s.direction == Direction.DOWNLINK]
    assert [(s.throughput_mbps, s.available) for s in downlink] == [
        (pytest.approx(12.1), True),
        (0.0, False),
    ]
    assert downlink[1].time_s == pytest.approx(NOW + 1.0)


@pytest.mark.parametrize(("expected", "sent"), [(V3, V2), (V2, V3)])
def test_other_version_is_decoded_correctly_and_reported(
    caplog: pytest.LogCaptureFixture, expected: KpmVersion, sent: KpmVersion
) -> None:
    p = processor()
    p.set_node(E2NodeConfig(node="gnb", access="nr", measurements=NR_NAMES), expected)
    message = per_ue([(7, ["DRB.UEThpDl"], [[50000]])])
    with caplog.at_level(logging.WARNING):
        samples = p.handle_payload("gnb", encoded(sent, message, start_s=NOW))
    assert [s.throughput_mbps for s in samples] == [pytest.approx(50.0)]
    assert samples[0].time_s == pytest.approx(NOW + 1.0)
    assert p.rejected_count("version-mismatch") == 1
    assert f"expected E2SM-KPM {expected} but the header is {sent}" in caplog.text


@pytest.mark.parametrize(
    ("values", "cause"),
    [
        ([[float("nan"), 1000]], "out-of-range"),
        ([[-5.0, 1000]], "out-of-range"),
        ([[1e12, 1000]], "out-of-range"),
    ],
)
def test_impossible_values_are_counted_and_skipped(
    values: list[list[float | int | None]], cause: str
) -> None:
    p = processor()
    samples = p.handle_payload(
        "gnb", encoded(V3, per_ue([(7, ["DRB.UEThpDl", "DRB.UEThpUl"], values)]))
    )
    assert p.rejected_count(cause) == 1
    assert [(s.direction, s.throughput_mbps) for s in samples] == [(Direction.UPLINK, 1.0)]


def test_unknown_measurement_and_ue_are_counted() -> None:
    p = processor()
    message = per_ue(
        [(7, ["Vendor.Secret", "DRB.UEThpDl"], [[1, 2000]]), (99, ["DRB.UEThpDl"], [[3]])]
    )
    samples = p.handle_payload("gnb", encoded(V3, message))
    assert p.rejected_count("unknown-measurement") == 1
    assert p.rejected_count("unknown-ue") == 1
    assert [s.throughput_mbps for s in samples] == [2.0]


def test_bad_bytes_are_logged_once_per_cause_and_the_processor_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    p = processor()
    good = encoded(V3, per_ue([(7, ["DRB.UEThpDl"], [[1000]])]))
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert p.handle_payload("gnb", good[:-4]) == []
        assert p.handle_payload("gnb", b"\xde\xad") == []
        assert p.handle_payload("nobody", good) == []
        assert len(p.handle_payload("gnb", good)) == 1
    assert p.rejected_count("e2ap-malformed") == 4
    assert p.rejected_count("unknown-node") == 1
    lines = [r.getMessage() for r in caplog.records]
    assert len([line for line in lines if "not a valid E2AP PDU" in line]) == 1
    assert any("E2 node gnb:" in line and "bytes:" in line for line in lines)


def test_bad_header_or_message_inside_a_valid_pdu() -> None:
    p = processor()
    message = codec_for(V3).encode(KpmPdu.MESSAGE, per_ue([(7, ["DRB.UEThpDl"], [[1]])]))
    header = codec_for(V3).encode(KpmPdu.HEADER, builders.header(NOW, V3))
    assert p.handle_payload("gnb", indication(b"\x08\x01\x02", message)) == []
    assert p.handle_payload("gnb", indication(header, b"\xff\xff\xff")) == []
    assert p.rejected_count("header-version") == 1
    assert p.rejected_count("malformed") == 1


def test_format2_value_matched_by_one_ue_goes_to_its_cpe() -> None:
    p = processor()
    message = builders.message_format2(
        [("DRB.UEThpDl", [gnb_du_ueid(8)]), ("DRB.UEThpDl", [gnb_du_ueid(7), gnb_du_ueid(8)])],
        [[2000, 9000]],
        1000,
    )
    samples = p.handle_payload("gnb", encoded(V3, message))
    assert [(s.cpe_id, s.throughput_mbps) for s in samples] == [("cpe-2", 2.0)]


def test_kpi_source_drains_in_order_and_bounds_its_buffer() -> None:
    from xapp.e2.kpi_source import E2KpiSource

    source = E2KpiSource(max_samples=3)
    batch = [
        KpiSample("cpe-1", "nr", Direction.DOWNLINK, float(t), 1.0, throughput_mbps=float(t))
        for t in range(5)
    ]
    source.add(batch[:2])
    source.add(batch[2:])
    assert [s.time_s for s in source.poll(10.0)] == [2.0, 3.0, 4.0]
    assert source.dropped == 2
    assert source.poll(11.0) == []
