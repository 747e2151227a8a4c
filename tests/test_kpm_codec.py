"""E2SM-KPM codec: round trips, cross-check vectors, version detection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kpm import builders
from kpm.codec import KpmPdu, codec_for
from kpm.errors import CodecError
from kpm.reports import decode_header, decode_message
from kpm.timestamps import decode_timestamp, encode_timestamp
from kpm.versions import (
    BUILDER_LAYOUTS,
    STANDARD_VERSIONS,
    KpmVersion,
    parse_version,
    version_from_oid,
)
from scripts.make_kpm_vectors import cases

VECTORS = json.loads((Path(__file__).parent / "vectors" / "e2sm_kpm.json").read_text())["vectors"]
V2, V3 = KpmVersion.V2_03, KpmVersion.V3_00
NOW = 1_700_000_000.0
SAME_SHAPES = BUILDER_LAYOUTS


@pytest.mark.parametrize("version", SAME_SHAPES)
@pytest.mark.parametrize("case", [c[0] for c in cases(V3)])
def test_every_format_round_trips(version: KpmVersion, case: str) -> None:
    _, pdu, value = next(c for c in cases(version) if c[0] == case)
    codec = codec_for(version)
    encoded = codec.encode(pdu, value)
    assert codec.decode(pdu, encoded) == value
    assert codec.from_json(pdu, codec.to_json(pdu, value)) == value


def test_vectors_cover_every_format_of_both_versions() -> None:
    names = {(v["version"], v["name"]) for v in VECTORS}
    for version in STANDARD_VERSIONS:
        for expected in ("trigger-format1", "header-format1-full", "ranfunction-description"):
            assert (version.value, expected) in names
        for n in range(1, 6):
            assert any(v == version.value and f"action-format{n}" in name for v, name in names)
        for n in range(1, 4):
            assert any(v == version.value and f"message-format{n}" in name for v, name in names)


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"{v['version']}-{v['name']}")
def test_independently_encoded_vectors_decode_to_the_same_values(vector: dict[str, Any]) -> None:
    codec = codec_for(KpmVersion(vector["version"]))
    pdu = KpmPdu(vector["pdu"])
    data = bytes.fromhex(vector["hex"])
    decoded = codec.decode(pdu, data)
    assert json.loads(codec.to_json(pdu, decoded)) == vector["value"]
    assert codec.encode(pdu, codec.from_json(pdu, json.dumps(vector["value"]))) == data


@pytest.mark.parametrize("version", STANDARD_VERSIONS)
def test_header_version_is_detected_from_the_bytes(version: KpmVersion) -> None:
    other = V2 if version == V3 else V3
    for extra in ({}, {"sender_name": "gnb"}, {"sender_name": "gnb-1 du", "vendor_name": "v"}):
        data = codec_for(version).encode(KpmPdu.HEADER, builders.header(NOW, version, **extra))
        assert decode_header(data).header.version == version
        detection = decode_header(data, expected=other)
        assert detection.header.version == version
        assert detection.mismatch
        assert f"expected E2SM-KPM {other}" in detection.describe()
        assert detection.header.collect_start_unix_s == pytest.approx(NOW, abs=1)


def test_header_decoded_under_the_wrong_schema_is_never_accepted() -> None:
    v3_header = codec_for(V3).encode(KpmPdu.HEADER, builders.header(NOW, V3))
    v2_header = codec_for(V2).encode(KpmPdu.HEADER, builders.header(NOW, V2))
    assert not codec_for(V2).round_trips(KpmPdu.HEADER, v3_header)
    assert not codec_for(V3).round_trips(KpmPdu.HEADER, v2_header)


@pytest.mark.parametrize("sender_type", ["pYc ?tXN", "Rfb ptse"])
def test_header_valid_in_both_versions_keeps_only_what_both_agree_on(sender_type: str) -> None:
    # Found by search: an 8-character senderType with a space in 4th place passes for a v3.00
    # TimeStamp fraction plus a shorter string.
    data = codec_for(V2).encode(
        KpmPdu.HEADER, builders.header(NOW + 0.7, V2, sender_type=sender_type)
    )
    assert all(codec_for(v).round_trips(KpmPdu.HEADER, data) for v in STANDARD_VERSIONS)
    detection = decode_header(data, expected=V3)
    assert detection.ambiguous
    assert not detection.mismatch
    assert detection.header.collect_start_unix_s == NOW
    assert detection.header.sender_type is None
    assert "valid as v3.00, v2.03" in detection.describe()


def test_garbage_header_is_rejected_with_a_clear_message() -> None:
    with pytest.raises(CodecError, match=r"no E2SM-KPM layout we know") as error:
        decode_header(b"\x08\x00")
    assert error.value.cause == "header-version"
    assert "0800" in str(error.value)


def test_indication_message_of_either_version_reads_the_same() -> None:
    message = builders.message_format1(["DRB.UEThpDl"], [[1000]], 1000)
    for writer in STANDARD_VERSIONS:
        data = codec_for(writer).encode(KpmPdu.MESSAGE, message)
        for reader in STANDARD_VERSIONS:
            report = decode_message(data, reader)
            assert [(r.name, r.value) for r in report.records] == [("DRB.UEThpDl", 1000.0)]


def test_timestamps() -> None:
    assert len(encode_timestamp(NOW + 0.5, V3)) == 8
    assert len(encode_timestamp(NOW + 0.5, V2)) == 4
    assert decode_timestamp(encode_timestamp(NOW + 0.5, V3)) == pytest.approx(NOW + 0.5, abs=1e-6)
    assert decode_timestamp(encode_timestamp(NOW + 0.5, V2)) == NOW
    with pytest.raises(ValueError, match="4 or 8 bytes"):
        decode_timestamp(b"123")
    with pytest.raises(ValueError, match="NTP era"):
        encode_timestamp(3e9, V3)


def test_versions_from_oid_and_text() -> None:
    assert version_from_oid("1.3.6.1.4.1.53148.1.3.2.2") == V3
    assert version_from_oid("1.3.6.1.4.1.53148.1.2.2.2 ") == V2
    assert version_from_oid("1.2.3") is None
    assert parse_version("3") == V3
    assert parse_version("v2.03") == V2
    with pytest.raises(ValueError, match="unknown E2SM-KPM version"):
        parse_version("v4")


def test_encode_errors_name_the_problem() -> None:
    with pytest.raises(CodecError, match=r"cannot encode E2SM-KPM v3\.00 trigger"):
        codec_for(V3).encode(KpmPdu.TRIGGER, builders.trigger(0))


def test_parsed_modules_are_kept_on_disk_and_a_broken_cache_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kpm import codec as codec_module

    monkeypatch.setenv("ATSSS_CACHE_DIR", str(tmp_path))
    codec_module._parsed.cache_clear()
    try:
        first = codec_module._parsed(V3)
        (cached,) = tmp_path.glob("kpm-v3.00-*.pickle")
        codec_module._parsed.cache_clear()
        assert codec_module._parsed(V3) == first
        cached.write_bytes(b"not a pickle")
        codec_module._parsed.cache_clear()
        assert codec_module._parsed(V3) == first
    finally:
        codec_module._parsed.cache_clear()
