"""The strict fast reader (`kpm.fast_message`) against the generic strict reader.

The property everything rests on: whatever the fast reader accepts, the generic reader accepts
too, with equal values. Checked on generated messages of every shape the fast reader reads (in
every layout it reads), on every shared interop vector, and on every single-bit flip of
representative messages. The fast reader must also really take the shapes it is for: a reader
that hands everything over would pass the property and help nobody.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpm import builders, e2ap
from kpm.codec import KpmPdu, codec_for
from kpm.errors import CodecError
from kpm.fast_encode import encode_format3
from kpm.fast_message import COMPILED, FAST_LAYOUTS, LABEL_OPTIONALS, read_message
from kpm.reports import IndicationReport, decode_message
from kpm.ueid import gnb_du_ueid
from kpm.versions import KpmVersion

NAMES = ("DRB.UEThpDl", "DRB.UEThpUl", "RRU.PrbUsedDl", "L1M.SS-SINR")
VECTORS = json.loads(
    (Path(__file__).resolve().parents[1].parent / "shared/interop/e2-vectors.json").read_text()
)


def same(fast: IndicationReport, generic: IndicationReport) -> bool:
    if (fast.message_format, fast.granularity_ms, fast.problems) != (
        generic.message_format,
        generic.granularity_ms,
        generic.problems,
    ) or len(fast.records) != len(generic.records):
        return False
    for a, b in zip(fast.records, generic.records, strict=True):
        if (a.name, a.period_index, a.ue_keys, dict(a.labels)) != (
            b.name,
            b.period_index,
            b.ue_keys,
            dict(b.labels),
        ):
            return False
        both_nan = (
            a.value is not None
            and b.value is not None
            and math.isnan(a.value)
            and math.isnan(b.value)
        )
        if a.value != b.value and not both_nan:
            return False
    return True


def generic_or_none(data: bytes, layout: KpmVersion, names: tuple[str, ...]) -> Any:
    try:
        return decode_message(data, layout, names, fast=False)
    except CodecError:
        return None


# Both twins where the C core was built (tests/test_fast_message_core.py insists it is in CI).
READERS = (True, False) if COMPILED else (False,)


def assert_agrees(data: bytes, layout: KpmVersion, names: tuple[str, ...] = NAMES) -> bool:
    """The property, for the C core and the Python reader; True when they took the bytes."""
    taken = set()
    for compiled in READERS:
        fast = read_message(data, layout, names, compiled=compiled)
        taken.add(fast is not None)
        if fast is None:
            continue
        generic = generic_or_none(data, layout, names)
        assert generic is not None, f"fast reader accepted what the generic refuses: {data.hex()}"
        assert same(fast, generic), f"readers disagree on {data.hex()} (compiled: {compiled})"
    assert len(taken) == 1, f"one twin took {data.hex()}, the other handed it over"
    return taken.pop()


def gnb_ueid(amf_id: int, ran: bytes | None) -> tuple[str, dict[str, Any]]:
    fields: dict[str, Any] = {
        "amf-UE-NGAP-ID": amf_id,
        "guami": {
            "pLMNIdentity": b"\x00\xf1\x10",
            "aMFRegionID": (b"\x80", 8),
            "aMFSetID": (b"\x01\x40", 10),
            "aMFPointer": (b"\x04", 6),
        },
    }
    if ran is not None:
        fields["ran-UEID"] = ran
    return ("gNB-UEID", fields)


# Strategies: the shapes the fast reader reads, with values over their whole ranges.
record_values = st.one_of(
    st.integers(0, 2**32 - 1),
    st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: x == 0 or abs(x) > 1e-300),
    st.none(),
)
writer_ueids = st.one_of(
    st.builds(gnb_du_ueid, st.integers(0, 2**32 - 1), st.none()),
    st.builds(
        lambda n, m: gnb_du_ueid(n, ":".join(f"{b:02x}" for b in m)),
        st.integers(0, 2**32 - 1),
        st.binary(min_size=6, max_size=6),
    ),
)
ueids = st.one_of(
    writer_ueids,
    st.builds(lambda n: ("gNB-CU-UP-UEID", {"gNB-CU-CP-UE-E1AP-ID": n}), st.integers(0, 2**32 - 1)),
    st.builds(
        gnb_ueid,
        st.integers(0, 2**40 - 1),
        st.one_of(st.none(), st.binary(min_size=8, max_size=8)),
    ),
)
labels = st.sampled_from(
    [{"measLabel": {"noLabel": "true"}}]
    + [{"measLabel": {"distBinX": n}} for n in (1, 2, 16, 255, 256, 65535)]
)
printable = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 '()+,-./:=?",
    min_size=1,
    max_size=150,
)


@st.composite
def format1_bodies(draw: st.DrawFn, names: list[str]) -> dict[str, Any]:
    periods = draw(
        st.lists(
            st.lists(record_values, min_size=len(names), max_size=len(names)),
            min_size=1,
            max_size=3,
        )
    )
    body = builders.message_format1_body(
        names, periods, draw(st.one_of(st.none(), st.integers(1, 2**32 - 1)))
    )
    if draw(st.booleans()):
        del body["measInfoList"]
    if draw(st.booleans()):
        body["measData"][0]["incompleteFlag"] = "true"
    if draw(st.booleans()) and "measInfoList" in body:
        body["measInfoList"][0]["measType"] = ("measID", draw(st.integers(1, 65536)))
    if "measInfoList" in body:
        for item in body["measInfoList"]:
            item["labelInfoList"] = draw(st.lists(labels, min_size=1, max_size=2))
    return body


@st.composite
def messages(draw: st.DrawFn) -> tuple[dict[str, Any], tuple[str, ...]]:
    names = draw(st.lists(printable, min_size=1, max_size=4))
    if draw(st.booleans()):
        return {
            "indicationMessage-formats": ("indicationMessage-Format1", draw(format1_bodies(names)))
        }, tuple(names)
    reports = [
        {"ueID": draw(ueids), "measReport": draw(format1_bodies(names))}
        for _ in range(draw(st.integers(1, 4)))
    ]
    return (
        {"indicationMessage-formats": ("indicationMessage-Format3", {"ueMeasReportList": reports})},
        tuple(names),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=messages(), layout=st.sampled_from(FAST_LAYOUTS))
def test_generated_messages_are_read_alike_and_taken(
    message: tuple[dict[str, Any], tuple[str, ...]], layout: KpmVersion
) -> None:
    value, names = message
    data = codec_for(layout).encode(KpmPdu.MESSAGE, value)
    generic = generic_or_none(data, layout, names)
    if generic is None:
        return  # e.g. a REAL the generic reader rounds; the fast one must refuse it as well
    taken = assert_agrees(data, layout, names)
    assert taken, f"the fast reader handed over a shape it reads: {data.hex()}"


@pytest.mark.parametrize(
    ("written", "taken"),
    [
        ("0480ff0099", True),  # asn1tools: N as if signed, a 00 in front of its top bit
        ("0380ff99", True),  # X.690 §8.5.7.5: N unsigned, in the fewest octets (asn1c)
        ("0580ff000099", False),  # a second leading zero octet: neither form
        ("0480ff0019", False),  # a leading zero octet before a clear top bit: neither form
        ("0380ff98", False),  # X.690 §11.3.1: the mantissa is odd (or 0)
    ],
)
def test_a_real_s_mantissa_is_read_in_the_forms_the_clauses_and_asn1tools_write(
    written: str, taken: bool
) -> None:
    """REAL 76.5 (153 × 2⁻¹): X.691 carries X.690's contents octets with CER/DER's
    restrictions (§11.3.1: base 2, M odd); §8.5.7.5 writes N as an unsigned number, which
    asn1tools writes as a signed one. Both forms are read, by both readers alike, as 76.5;
    nothing else is (kpm/reals.py)."""
    layout = KpmVersion.V3_00
    canonical = codec_for(layout).encode(
        KpmPdu.MESSAGE, builders.message_format1(["A"], [[76.5]], None)
    )
    assert canonical.find(bytes.fromhex("0480ff0099")) > 0
    data = canonical.replace(bytes.fromhex("0480ff0099"), bytes.fromhex(written))
    for compiled in READERS:
        fast = read_message(data, layout, ("A",), compiled=compiled)
        assert (fast is not None) == taken, (written, compiled)
        if fast is not None:
            assert [r.value for r in fast.records] == [76.5]
    generic = generic_or_none(data, layout, ("A",))
    assert (generic is not None) == taken, written
    if taken:
        assert_agrees(data, layout, ("A",))


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("0481fbce03", 3 * 2.0**-1074),  # M's lowest bit at 2^-1074: a subnormal double exactly
        ("0481fbcd03", None),  # 3 × 2^-1075: rounds to 2^-1073 as a double
        ("0481fbcc01", None),  # 2^-1076: rounds to 0
        ("04c1fbcd01", None),  # -2^-1075: rounds to -0
    ],
)
def test_a_real_no_double_holds_exactly_is_read_by_neither(
    written: str, value: float | None
) -> None:
    """A REAL below the doubles' least exponent (kpm/reals.py, LEAST_EXACT_EXPONENT): the
    generic path's round trip refuses it, and the fast reader hands it over rather than give
    a rounded value (a differential fuzz of the two found it read as 1e-323, 0.0 or -0.0)."""
    for layout in FAST_LAYOUTS:
        canonical = codec_for(layout).encode(
            KpmPdu.MESSAGE, builders.message_format1(["A"], [[3 * 2.0**-300]], None)
        )
        data = canonical.replace(bytes.fromhex("0481fed403"), bytes.fromhex(written))
        assert data != canonical
        for compiled in READERS:
            fast = read_message(data, layout, ("A",), compiled=compiled)
            assert (None if fast is None else [r.value for r in fast.records]) == (
                None if value is None else [value]
            ), (layout, compiled)
        generic = generic_or_none(data, layout, ("A",))
        assert (generic is not None) == (value is not None), layout
        assert_agrees(data, layout, ("A",))


def test_a_message_may_mix_the_two_forms_of_a_real() -> None:
    """Each REAL is read in its own form: one of each in a message, both readers alike."""
    layout = KpmVersion.V3_00
    canonical = codec_for(layout).encode(
        KpmPdu.MESSAGE, builders.message_format1(["A", "B"], [[76.5, 66.5]], None)
    )
    mixed = canonical.replace(bytes.fromhex("0480ff0099"), bytes.fromhex("0380ff99"))
    assert mixed != canonical
    assert bytes.fromhex("0480ff0085") in mixed
    assert assert_agrees(mixed, layout, ("A", "B"))
    generic = generic_or_none(mixed, layout, ("A", "B"))
    assert [r.value for r in generic.records] == [76.5, 66.5]


def _representative() -> list[tuple[bytes, KpmVersion]]:
    out = []
    reports: list[tuple[Any, list[str], list[list[builders.RecordValue]]]] = [
        (gnb_du_ueid(7, "02:00:00:00:00:07"), list(NAMES[:2]), [[1234, 2.5]]),
        (gnb_ueid(2**33, b"\x00\x00\x01\x02\x03\x04\x05\x06"), list(NAMES[:2]), [[None, 17]]),
    ]
    for layout in (KpmVersion.V3_00, KpmVersion.FLEXRIC_V3_00):
        codec = codec_for(layout)
        out.append((codec.encode(KpmPdu.MESSAGE, builders.message_format3(reports, 1000)), layout))
    out.append(
        (
            codec_for(KpmVersion.V2_03).encode(
                KpmPdu.MESSAGE, builders.message_format1(list(NAMES[:2]), [[5, -0.125]], 100)
            ),
            KpmVersion.V2_03,
        )
    )
    return out


@pytest.mark.parametrize(("data", "layout"), _representative(), ids=["f3", "flexric-f3", "f1"])
def test_every_single_bit_flip_is_read_alike(data: bytes, layout: KpmVersion) -> None:
    assert assert_agrees(data, layout)
    taken = 0
    for position in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[position // 8] ^= 0x80 >> (position % 8)
        for reading_layout in FAST_LAYOUTS:
            taken += assert_agrees(bytes(flipped), reading_layout)
    assert taken > 0  # some flips (values, ids) still make valid messages


def _vector_messages() -> list[tuple[str, bytes]]:
    found = []
    for vector in VECTORS:
        data = bytes.fromhex(vector["hex"])
        if vector["layer"] == "message":
            found.append((vector["id"], data))
        elif vector["layer"] == "e2ap":
            try:
                message = e2ap.decode(data)
            except CodecError:
                continue
            if isinstance(message, e2ap.Indication):
                found.append((vector["id"], message.message))
    return found


@pytest.mark.parametrize(("vector_id", "data"), _vector_messages(), ids=lambda v: str(v)[:40])
def test_interop_vectors_have_the_same_outcome_through_both_readers(
    vector_id: str, data: bytes
) -> None:
    for layout in FAST_LAYOUTS:
        fast = read_message(data, layout, ())
        generic = generic_or_none(data, layout, ())
        if fast is not None:
            assert generic is not None, (vector_id, layout)
            assert same(fast, generic), (vector_id, layout)
        # Through the service's call (fast first, generic behind) the outcome is the generic one.
        try:
            through = decode_message(data, layout, ())
        except CodecError:
            through = None
        assert (through is None) == (generic is None), (vector_id, layout)


def test_the_label_bitmap_width_is_each_layouts() -> None:
    for layout in FAST_LAYOUTS:
        label = codec_for(layout)._per._types["MeasurementLabel"].type
        assert len(label.optionals) == LABEL_OPTIONALS, layout


def test_a_large_per_ue_message_travels_fragmented_and_is_read() -> None:
    """Above 16K octets the standard layout's Format 3 (an extension alternative, so an open
    type) is fragmented (X.691 §11.9.3.8); FlexRIC's (a root alternative) is not."""
    reports = [(gnb_du_ueid(i), list(NAMES), [[i, 20_000, 40, 12.5]]) for i in range(400)]
    for layout in (KpmVersion.V3_00, KpmVersion.FLEXRIC_V2_03):
        data = codec_for(layout).encode(KpmPdu.MESSAGE, builders.message_format3(reports, 1000))
        assert len(data) > 32768
        assert assert_agrees(data, layout)
        report = read_message(data, layout, NAMES)
        assert report is not None
        assert len(report.records) == 1600
        assert report.records[-4].ue_keys == ("gnb-du:399",)
    # A fragment that is not the largest possible is not canonical: handed over.
    standard = codec_for(KpmVersion.V3_00).encode(
        KpmPdu.MESSAGE, builders.message_format3(reports, 1000)
    )
    header = standard.find(b"\xc2")
    assert header > 0
    assert (
        read_message(standard[:header] + b"\xc1" + standard[header + 1 :], KpmVersion.V3_00, NAMES)
        is None
    )


def test_a_repeated_name_list_is_compared_not_trusted() -> None:
    """Format 3 with measInfoList in every UE: the second UE's list is taken by comparison with
    the first's; one that differs is read on its own."""
    names_a, names_b = ["AAA", "BBB"], ["AAA", "BBC"]
    reports = [
        (gnb_du_ueid(1), names_a, [[1, 2]]),
        (gnb_du_ueid(2), names_a, [[3, 4]]),
        (gnb_du_ueid(3), names_b, [[5, 6]]),
    ]
    data = codec_for(KpmVersion.V3_00).encode(
        KpmPdu.MESSAGE, builders.message_format3(reports, None)
    )
    report = read_message(data, KpmVersion.V3_00, ())
    assert report is not None
    assert [r.name for r in report.records] == ["AAA", "BBB", "AAA", "BBB", "AAA", "BBC"]
    assert assert_agrees(data, KpmVersion.V3_00, ())


@st.composite
def simulator_messages(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(printable, min_size=1, max_size=4))
    reports = []
    for _ in range(draw(st.integers(1, 4))):
        periods = draw(
            st.lists(
                st.lists(record_values, min_size=len(names), max_size=len(names)),
                min_size=1,
                max_size=2,
            )
        )
        body = builders.message_format1_body(
            names, periods, draw(st.one_of(st.none(), st.integers(1, 2**32 - 1)))
        )
        if draw(st.booleans()):
            del body["measInfoList"]
        else:
            for item in body["measInfoList"]:
                item["labelInfoList"] = draw(st.lists(labels, min_size=1, max_size=2))
        reports.append({"ueID": draw(writer_ueids), "measReport": body})
    return {
        "indicationMessage-formats": ("indicationMessage-Format3", {"ueMeasReportList": reports})
    }


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=simulator_messages(), layout=st.sampled_from(FAST_LAYOUTS))
def test_the_fast_writer_writes_asn1tools_bytes(value: dict[str, Any], layout: KpmVersion) -> None:
    try:
        expected = codec_for(layout).encode(KpmPdu.MESSAGE, value)
    except CodecError:
        assert encode_format3(layout, value) is None  # nothing asn1tools refuses either
        return
    assert encode_format3(layout, value) == expected


def test_the_fast_writer_leaves_other_shapes_to_asn1tools() -> None:
    gnb = {
        "ueID": gnb_ueid(5, None),
        "measReport": builders.message_format1_body(["A"], [[1]], None),
    }
    value = {
        "indicationMessage-formats": ("indicationMessage-Format3", {"ueMeasReportList": [gnb]})
    }
    assert encode_format3(KpmVersion.V3_00, value) is None
    assert encode_format3(KpmVersion.V2_00, value) is None
    cell = builders.message_format1(["A"], [[1]], 1000)
    assert encode_format3(KpmVersion.V3_00, cell) is None
