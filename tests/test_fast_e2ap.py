"""The strict fast E2AP indication reader (kpm/fast_e2ap.py) against pycrate, the generic one:
whatever the fast reader accepts, pycrate accepts with an equal value (no silent misread), on
generated indications of every size class, the shared interop vectors and single-bit flips."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpm import e2ap
from kpm.errors import CodecError
from kpm.fast_e2ap import FRAGMENT, read_indication

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1].parent / "shared/interop/e2-vectors.json").read_text()
)


def generic(data: bytes) -> e2ap.E2apMessage | CodecError:
    try:
        return e2ap.decode(data, fast=False)
    except CodecError as error:
        return error


def agrees(data: bytes) -> bool:
    """The property: an accepted PDU is one pycrate accepts, with an equal value."""
    fast = read_indication(data)
    return fast is None or generic(data) == fast


indications = st.builds(
    e2ap.Indication,
    request_id=st.builds(e2ap.RicRequestId, st.integers(0, 65535), st.integers(0, 65535)),
    ran_function_id=st.integers(0, 4095),
    action_id=st.integers(0, 255),
    header=st.binary(max_size=300),
    message=st.one_of(
        st.binary(max_size=300),
        # the length forms: two octets, then the fragments of X.691 §11.9.3.8
        st.integers(126, 130).map(bytes),
        st.sampled_from([16383, 16384, 16385, 4 * FRAGMENT, 5 * FRAGMENT + 7]).map(bytes),
    ),
    sequence_number=st.one_of(st.none(), st.integers(0, 65535)),
    indication_type=st.sampled_from(["report", "insert"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(indications)
def test_every_indication_pycrate_writes_is_read_alike(indication: e2ap.Indication) -> None:
    data = e2ap.encode(indication)
    assert read_indication(data) == indication
    assert generic(data) == indication


@pytest.mark.parametrize(
    "size", [0, 127, 128, 16383, 16384, 3 * FRAGMENT + 1, 4 * FRAGMENT, 9 * FRAGMENT + 100]
)
def test_a_fleet_sized_message_reads_through_its_fragments(size: int) -> None:
    """A 1,000-UE per-UE report is some 100 KB: its open types and octet string are sent in
    fragments, nested; each is reassembled, and only the encoder's own fragmenting is read."""
    indication = e2ap.Indication(
        e2ap.RicRequestId(1001, 3), 2, 1, b"\x01" * 12, random.Random(size).randbytes(size), 41
    )
    data = e2ap.encode(indication)
    assert read_indication(data) == indication


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=80))
def test_arbitrary_bytes_after_an_indications_start_are_never_misread(tail: bytes) -> None:
    assert agrees(b"\x00\x05\x40" + tail)


def representative() -> list[bytes]:
    return [
        e2ap.encode(e2ap.Indication(e2ap.RicRequestId(1001, 1), 2, 1, b"\x0a" * 9, b"\xbb" * 40)),
        e2ap.encode(
            e2ap.Indication(e2ap.RicRequestId(7, 9), 4095, 255, b"hd", b"\xcc" * 200, 65535)
        ),
    ]


@pytest.mark.parametrize("data", representative(), ids=["one-octet lengths", "two-octet"])
def test_every_single_bit_flip_is_refused_or_read_as_pycrate_reads_it(data: bytes) -> None:
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 0x80 >> (bit % 8)
        assert agrees(bytes(flipped)), f"bit {bit}"


def test_bit_flips_in_a_fragmented_indication_are_refused_or_read_alike() -> None:
    data = e2ap.encode(
        e2ap.Indication(e2ap.RicRequestId(1001, 1), 2, 1, b"h" * 10, bytes(5 * FRAGMENT + 9), 1)
    )
    # every bit of the lengths and IEs before the message's octets, and of the fragment and
    # length octets inside it (where the reader reads structure), and some of the rest
    structural = list(range(64)) + [
        at for at in range(len(data)) if data[at] in (0xC4, 0xC1, 0x00) and at % FRAGMENT < 8
    ]
    for at in sorted(set(structural)) + random.Random(5).sample(range(len(data)), 40):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[at] ^= 0x80 >> bit
            assert agrees(bytes(flipped)), f"byte {at} bit {bit}"


@pytest.mark.parametrize(
    "vector", [v for v in VECTORS if v["layer"] == "e2ap"], ids=lambda v: v["id"]
)
def test_the_shared_e2ap_vectors_give_the_same_outcome_through_both(
    vector: dict[str, str],
) -> None:
    data = bytes.fromhex(vector["hex"])
    fast = e2ap.decode(data) if not isinstance(generic(data), CodecError) else None
    assert agrees(data)
    if fast is not None:
        assert fast == generic(data)
    else:
        with pytest.raises(CodecError):
            e2ap.decode(data)


def test_the_optional_call_process_id_and_other_procedures_go_to_pycrate() -> None:
    """What the reader does not read is not an error: pycrate reads it (or explains)."""
    setup = next(v for v in VECTORS if v["layer"] == "e2ap" and "E2setupRequest" in v["kind"])
    assert read_indication(bytes.fromhex(setup["hex"])) is None
    assert read_indication(b"") is None
    with pytest.raises(CodecError, match="empty"):
        e2ap.decode(b"")


def handmade(long_lengths: bool) -> bytes:
    """An indication written byte by byte as X.691 lays it out; ``long_lengths``: every length
    in the two-octet form even where one octet holds it (not canonical)."""

    def length(n: int) -> bytes:
        return bytes([0x80 | n >> 8, n & 0xFF]) if long_lengths or n >= 128 else bytes([n])

    def ie(ie_id: int, value: bytes) -> bytes:
        return ie_id.to_bytes(2, "big") + b"\x00" + length(len(value)) + value

    body = b"\x00\x00\x06" + b"".join(
        [
            ie(29, b"\x00\x03\xe9\x00\x01"),
            ie(5, b"\x00\x02"),
            ie(15, b"\x01"),
            ie(28, b"\x00"),
            ie(25, length(3) + b"abc"),
            ie(26, length(4) + b"wxyz"),
        ]
    )
    return b"\x00\x05\x40" + length(len(body)) + body


def test_lengths_in_a_longer_form_than_needed_are_refused_by_both() -> None:
    canonical = e2ap.Indication(e2ap.RicRequestId(1001, 1), 2, 1, b"abc", b"wxyz")
    assert handmade(long_lengths=False) == e2ap.encode(canonical)
    assert read_indication(handmade(long_lengths=False)) == canonical
    assert read_indication(handmade(long_lengths=True)) is None
    assert isinstance(generic(handmade(long_lengths=True)), CodecError)


def _length(n: int) -> bytes:
    return bytes([n]) if n < 128 else bytes([0x80 | n >> 8, n & 0xFF])


def _open_type(content: bytes) -> bytes:
    """``content`` behind its length determinant, in fragments from 16K octets on (X.691
    §11.9.3.8: full fragments of up to four 16K blocks, then the rest with its own length)."""
    out, at = b"", 0
    while len(content) - at >= FRAGMENT:
        blocks = min(4, (len(content) - at) // FRAGMENT)
        out += bytes([0xC0 | blocks]) + content[at : at + blocks * FRAGMENT]
        at += blocks * FRAGMENT
    return out + _length(len(content) - at) + content[at:]


def _ie(ie_id: int, value: bytes) -> bytes:
    return ie_id.to_bytes(2, "big") + b"\x00" + _open_type(value)


def _indication(ies: list[bytes]) -> bytes:
    body = b"\x00" + len(ies).to_bytes(2, "big") + b"".join(ies)
    return b"\x00\x05\x40" + _open_type(body)


@pytest.mark.parametrize("size", [16383, 16384 + 16381, 4 * FRAGMENT - 3, 5 * FRAGMENT + 7])
def test_a_large_message_before_another_ie_is_read_alike_by_both(size: int) -> None:
    """A RIC indication whose message is fragmented and followed by another IE: the header
    after it (IEs in another order), or a RICcallProcessID (which the fast reader hands to
    pycrate). pycrate 0.8.1 lost its place after such a fragment (kpm/pycrate_fixes.py): it
    refused both, where the fast reader read the first; both now read them alike."""
    message = bytes(range(256)) * (size // 256) + bytes(size % 256)
    indication = e2ap.Indication(e2ap.RicRequestId(1001, 1), 2, 1, b"abc", message)
    request, function = _ie(29, b"\x00\x03\xe9\x00\x01"), _ie(5, b"\x00\x02")
    action, kind = _ie(15, b"\x01"), _ie(28, b"\x00")
    header, body = _ie(25, _open_type(b"abc")), _ie(26, _open_type(message))
    canonical = _indication([request, function, action, kind, header, body])
    assert canonical == e2ap.encode(indication)
    reordered = _indication([request, function, action, kind, body, header])
    assert read_indication(reordered) == indication
    assert generic(reordered) == indication
    with_call_process = _indication(
        [request, function, action, kind, header, body, _ie(20, _open_type(b"\x07\x08"))]
    )
    assert read_indication(with_call_process) is None
    assert generic(with_call_process) == indication
    assert e2ap.decode(with_call_process) == indication  # (the service's path)


@pytest.mark.parametrize("size", [FRAGMENT, FRAGMENT + 13, 3 * FRAGMENT + 5, 4 * FRAGMENT + 1])
def test_pycrate_reads_fragmented_strings_whole(size: int) -> None:
    """A BIT STRING and an OCTET STRING of ``size`` bits and octets, written by pycrate in
    fragments, read back whole (pycrate 0.8.1 gave a fragmented BIT STRING the length of the
    fragments after the first, the last twice: 26 bits of 16,397)."""
    from pycrate_asn1rt.asnobj_str import BIT_STR, OCT_STR

    from kpm import pycrate_fixes

    pycrate_fixes.apply()
    bits, octets = BIT_STR(), OCT_STR()
    bits.set_val((5, size))
    content = bytes(range(251)) * (size // 251) + bytes(size % 251)
    octets.set_val(content)
    bits_again, octets_again = BIT_STR(), OCT_STR()
    bits_again.from_aper(bits.to_aper())
    octets_again.from_aper(octets.to_aper())
    assert bits_again.get_val() == (5, size)
    assert octets_again.get_val() == content
