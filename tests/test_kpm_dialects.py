"""E2SM-KPM layouts beyond the standard: strict reads, FlexRIC's layout, v2.00, long strings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.domain import AccessIdentity, Cpe, Direction
from kpm import builders, dialects, e2ap
from kpm.cli import kpm_app
from kpm.codec import KpmPdu, codec_for
from kpm.errors import CodecError
from kpm.reports import decode_header, decode_message
from kpm.timestamps import decode_timestamp, encode_timestamp
from kpm.ueid import gnb_du_ueid
from kpm.versions import STANDARD_VERSIONS, KpmVersion
from xapp.e2.config import E2NodeConfig
from xapp.e2.indications import IndicationProcessor

V2, V3 = KpmVersion.V2_03, KpmVersion.V3_00
FLEX2, FLEX3 = KpmVersion.FLEXRIC_V2_03, KpmVersion.FLEXRIC_V3_00
NOW = 1_700_000_000.0
NAMES = ["DRB.UEThpDl", "DRB.UEThpUl"]


def flexric_messages() -> dict[str, tuple[KpmPdu, dict[str, object]]]:
    return {
        "format1": (KpmPdu.MESSAGE, builders.message_format1(NAMES, [[1000, 2000]], 1000)),
        "format3": (
            KpmPdu.MESSAGE,
            builders.message_format3([(gnb_du_ueid(7), NAMES, [[342000, 1000]])], 1000),
        ),
        "action-format4": (KpmPdu.ACTION, builders.action_ue_condition(NAMES, 1000)),
    }


@pytest.mark.parametrize("layout", [FLEX2, FLEX3])
@pytest.mark.parametrize("case", sorted(flexric_messages()))
def test_flexric_pdus_round_trip_and_are_named_never_misread(layout: KpmVersion, case: str) -> None:
    pdu, value = flexric_messages()[case]
    data = codec_for(layout).encode(pdu, value)
    assert codec_for(layout).decode(pdu, data) == value
    # In the standard layouts these bytes are refused, never read into other values.
    for standard in STANDARD_VERSIONS:
        with pytest.raises(CodecError) as refused:
            codec_for(standard).decode(pdu, data)
        assert refused.value.cause == "malformed"
    result = CliRunner().invoke(kpm_app, ["decode", data.hex(), "--as", pdu.value])
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["version"].startswith("flexric-")
    assert codec_for(KpmVersion(shown["version"])).from_json(pdu, json.dumps(shown["value"])) == (
        value
    )


def test_flexric_layout_puts_the_standards_extensions_in_the_root() -> None:
    """Wire facts of FlexRIC's module: Format3 is the third root alternative of the message
    CHOICE (2-bit index), Format4 the fourth of the action CHOICE (3-bit index)."""
    message = builders.message_format3([(gnb_du_ueid(7), NAMES, [[1, 2]])], 1000)
    flexric = codec_for(FLEX3).encode(KpmPdu.MESSAGE, message)
    standard = codec_for(V3).encode(KpmPdu.MESSAGE, message)
    # SEQUENCE extension bit 0, CHOICE extension bit 0, index 2 in 2 bits: 0010....
    assert flexric[0] >> 4 == 0b0010
    # Standard: SEQUENCE extension bit 0, CHOICE extension bit 1 (an extension alternative).
    assert standard[0] >> 6 == 0b01
    action = builders.action_ue_condition(NAMES, 1000)
    flexric = codec_for(FLEX3).encode(KpmPdu.ACTION, action)
    # ric-Style-Type 4 (unconstrained INTEGER after the SEQUENCE extension bit): bit, padding,
    # length octet 1, value octet 4; then CHOICE extension bit 0 and index 3 in 3 bits.
    assert flexric[:3] == bytes([0x00, 0x01, 0x04])
    assert flexric[3] >> 4 == 0b0011


def test_flexric_timestamps_are_unix_time() -> None:
    assert encode_timestamp(NOW, FLEX2) == int(NOW).to_bytes(4, "little")
    assert encode_timestamp(NOW + 0.25, FLEX3) == int((NOW + 0.25) * 1e6).to_bytes(8, "big")
    assert decode_timestamp(int(NOW).to_bytes(4, "little"), FLEX2) == NOW
    header = codec_for(FLEX3).encode(KpmPdu.HEADER, builders.header(NOW + 0.5, FLEX3))
    assert decode_header(header, FLEX3).header.collect_start_unix_s == NOW + 0.5


def test_a_flexric_node_announced_as_standard_is_settled_by_its_first_message() -> None:
    processor = IndicationProcessor(
        [Cpe("cpe-1", {"nr": AccessIdentity("nr", e2_node_id="gnb", ue_id="gnb-du:7")})]
    )
    config = E2NodeConfig(node="gnb", access="nr", measurements=tuple(NAMES))
    processor.set_node(config, V3)
    message = builders.message_format3([(gnb_du_ueid(7), NAMES, [[342000, 1000]])], 1000)
    header = codec_for(FLEX3).encode(KpmPdu.HEADER, builders.header(NOW, FLEX3))
    payload = e2ap.encode(
        e2ap.Indication(
            e2ap.RicRequestId(1, 1), 2, 1, header, codec_for(FLEX3).encode(KpmPdu.MESSAGE, message)
        )
    )
    samples = processor.handle_payload("gnb", payload)
    downlink = next(s for s in samples if s.direction == Direction.DOWNLINK)
    assert downlink.throughput_mbps == pytest.approx(342.0)
    assert processor.node_version("gnb") == FLEX3
    assert processor.rejected_count("version-mismatch") == 1
    processor.handle_payload("gnb", payload)
    assert processor.rejected_count("version-mismatch") == 1


def test_a_flexric_format1_never_yields_values_paired_with_the_subscription() -> None:
    """The misread the strict check exists for: FlexRIC's Format 1 read as the standard's
    dropped measInfoList and read granulPeriod 2, leaving bytes unread."""
    message = builders.message_format1(NAMES, [[1000, 2000]], 1000)
    data = codec_for(FLEX2).encode(KpmPdu.MESSAGE, message)
    with pytest.raises(CodecError, match=r"unread|re-encode"):
        decode_message(data, V2, NAMES)
    report = decode_message(data, FLEX2, NAMES)
    assert report.granularity_ms == 1000
    assert [(r.name, r.value) for r in report.records] == [
        ("DRB.UEThpDl", 1000.0),
        ("DRB.UEThpUl", 2000.0),
    ]


VECTORS = {
    v["id"]: bytes.fromhex(v["hex"])
    for v in json.loads(
        (Path(__file__).resolve().parents[1].parent / "shared/interop/e2-vectors.json").read_text()
    )
}
# v2.00 and v2.01 PDUs other implementations encoded (our builders make the v2.03 shapes).
FOREIGN_SAMPLES = {
    KpmVersion.V2_00: {
        KpmPdu.TRIGGER: "onos-kpm2-trigger",
        KpmPdu.HEADER: "onos-kpm2-header",
        KpmPdu.MESSAGE: "onos-kpm2-message-f1",
        KpmPdu.ACTION: "onos-kpm2-action-f1",
        KpmPdu.RANFUNCTION: "onos-kpm2-ranfunction-full",
    },
    KpmVersion.V2_01: {
        KpmPdu.MESSAGE: "viavi-ind-message-2",
        KpmPdu.ACTION: "pcap-kpimon-action-f3",
    },
}


def sample(layout: KpmVersion, pdu: KpmPdu) -> bytes:
    foreign = FOREIGN_SAMPLES.get(layout, {}).get(pdu)
    if foreign is not None:
        return VECTORS[foreign]
    value = {
        KpmPdu.TRIGGER: builders.trigger(1000),
        KpmPdu.HEADER: builders.header(NOW, layout),
        KpmPdu.MESSAGE: builders.message_format1(NAMES, [[1, 2]], 1000),
        KpmPdu.ACTION: builders.action_cell(NAMES, 1000),
        KpmPdu.RANFUNCTION: builders.ran_function_description(
            layout, "ORAN-E2SM-KPM", "KPM monitor", [builders.report_style(1, NAMES)]
        ),
    }[pdu]
    return codec_for(layout).encode(pdu, value)


@pytest.mark.parametrize("layout", list(KpmVersion))
@pytest.mark.parametrize("pdu", list(KpmPdu))
def test_trailing_bytes_are_refused_in_every_layout(layout: KpmVersion, pdu: KpmPdu) -> None:
    data = sample(layout, pdu)
    assert codec_for(layout).decode(pdu, data) is not None
    for junk in (b"\x00", b"\xff\xff", b"\x00" * 40):
        with pytest.raises(CodecError, match=r"left unread|re-encode"):
            codec_for(layout).decode(pdu, data + junk)


def test_e2ap_with_trailing_bytes_is_refused() -> None:
    data = e2ap.encode(e2ap.SubscriptionDeleteRequest(e2ap.RicRequestId(1, 2), 3))
    assert e2ap.decode(data) == e2ap.SubscriptionDeleteRequest(e2ap.RicRequestId(1, 2), 3)
    for junk in (b"\x00", b"\x01\x02\x03"):
        with pytest.raises(CodecError, match="left unread") as refused:
            e2ap.decode(data + junk)
        assert refused.value.cause == "e2ap-malformed"


@pytest.mark.parametrize("length", [151, 200, 1000])
def test_a_measurement_name_beyond_150_characters_is_size_extended(length: int) -> None:
    """X.691 §30.5: extension bit 1, then an octet-aligned length and 8-bit characters."""
    name = ("DRB.UEThpDl-" * 100)[:length]
    message = builders.message_format1([name], [[7]], 1000)
    data = codec_for(V3).encode(KpmPdu.MESSAGE, message)
    length_octets = bytes([length]) if length < 128 else bytes([0x80 | length >> 8, length & 0xFF])
    assert length_octets + name.encode() in data
    assert codec_for(V3).decode(KpmPdu.MESSAGE, data) == message
    result = CliRunner().invoke(kpm_app, ["decode", data.hex(), "--as", "message"])
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)["value"]
    info = shown["indicationMessage-formats"]["indicationMessage-Format1"]["measInfoList"]
    assert info[0]["measType"]["measName"] == name


def test_names_within_150_characters_encode_as_before() -> None:
    message = builders.message_format1(["DRB.UEThpDl"], [[7]], 1000)
    data = codec_for(V3).encode(KpmPdu.MESSAGE, message)
    assert b"\x0aDRB.UEThpDl" not in data  # constrained length (1..150) in 8 bits, not 0x0a
    assert codec_for(V3).decode(KpmPdu.MESSAGE, data) == message


def test_setup_detection_narrows_the_layouts_by_the_description() -> None:
    standard = sample(V3, KpmPdu.RANFUNCTION)
    detection = dialects.detect_from_setup("1.3.6.1.4.1.53148.1.3.2.2", standard)
    assert detection.candidates == (V3, FLEX3)
    assert detection.chosen == V3
    assert "fits flexric-v3.00 equally" in detection.note
    v2_00 = codec_for(KpmVersion.V2_00).encode(
        KpmPdu.RANFUNCTION,
        {
            "ranFunction-Name": {
                "ranFunction-ShortName": "ORAN-E2SM-KPM",
                "ranFunction-E2SM-OID": "1.3.6.1.4.1.53148.1.2.2.2",
                "ranFunction-Description": "KPM monitor",
            },
            "ric-KPM-Node-List": [
                {
                    "ric-KPMNode-Type": (
                        "gNB",
                        {
                            "global-gNB-ID": {
                                "plmn-id": b"\x00\xf1\x10",
                                "gnb-id": ("gnb-ID", (b"\x00\x00\x01", 22)),
                            }
                        },
                    )
                }
            ],
        },
    )
    detection = dialects.detect_from_setup("1.3.6.1.4.1.53148.1.2.2.2", v2_00)
    assert detection.candidates == (KpmVersion.V2_00,)
    assert not detection.ambiguous


@pytest.mark.parametrize("ues", [400, 1000])
def test_a_per_ue_report_beyond_16k_octets_is_fragmented_as_x691_says(ues: int) -> None:
    """Format 3 is an extension alternative, carried as an open type: above 16383 octets its
    length comes in fragments (X.691 §11.9), which we walk here by hand."""
    reports = [(gnb_du_ueid(i), NAMES, [[100_000 + i, 2_000]]) for i in range(ues)]
    message = builders.message_format3(reports, 1000)
    data = codec_for(V3).encode(KpmPdu.MESSAGE, message)
    # SEQUENCE extension bit 0, CHOICE extension bit 1, alternative index 0 (normally small
    # number, 7 bits), padding: 0x40 0x00, then the open type's length determinant.
    assert data[:2] == b"\x40\x00"
    position, content = 2, bytearray()
    while True:
        first = data[position]
        if first & 0xC0 == 0xC0:  # a fragment of 16K × (1..4) octets; more follow
            length, position = 16384 * (first & 0x3F), position + 1
        elif first & 0x80:
            length, position = ((first & 0x3F) << 8) | data[position + 1], position + 2
        else:
            length, position = first, position + 1
        content += data[position : position + length]
        position += length
        if first & 0xC0 != 0xC0:
            break
    assert position == len(data)
    assert len(content) > 16384
    inner = codec_for(V3)._per.decode("E2SM-KPM-IndicationMessage-Format3", bytes(content))
    assert inner == message["indicationMessage-formats"][1]
    assert codec_for(V3).decode(KpmPdu.MESSAGE, data) == message
