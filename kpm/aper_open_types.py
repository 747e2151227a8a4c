"""Open types longer than 16K octets for asn1tools' PER codec (X.691 §11.2 and §11.9).

An extension addition (a CHOICE alternative or SEQUENCE component after the extension marker)
travels as an open type: an unconstrained length, then that many octets. Above 16383 octets
the length is fragmented: a 16K, 32K, 48K or 64K fragment (0xC1..0xC4), its octets, and so
on, ending with an ordinary length. asn1tools (through 0.169) writes a single fragment header
and then all the octets, and reads back by decoding straight through and stepping back, so
its large open types are not what other decoders expect, and its decoder misreads theirs.

This matters here: a per-UE (Format 3) indication is an extension alternative in v2.03 and
v3.00, so a node with a couple of hundred UEs sends one. `install()` replaces the additions
encoding and decoding of asn1tools' CHOICE and SEQUENCE with ones that fragment as X.691 says;
below 16K octets the bytes are the same as before. The content of an addition is decoded on
its own, as the complete encoding it is, and what a decoder skips (an addition this schema does
not know, octets left in an open type) is added to its ``skipped_extension_bits`` when it has
one (see `kpm.codec`).
"""

from __future__ import annotations

from typing import Any

from asn1tools.codecs import ErrorWithLocation, per

_FRAGMENT = 16384


def _append_open_type(encoder: Any, content_encoder: Any) -> None:
    content_encoder.align_always()
    size = content_encoder.number_of_bytes()
    if size < _FRAGMENT:
        encoder.append_length_determinant(size)
        encoder += content_encoder
        return
    content = bytes(content_encoder.as_bytearray())
    for offset, length in encoder.append_length_determinant_chunks(size):
        encoder.append_bytes(content[offset : offset + length])


def _read_open_type(decoder: Any) -> bytes:
    content = bytearray()
    for length in decoder.read_length_determinant_chunks():
        if length:
            content += decoder.read_bytes(length)
    return bytes(content)


def _note_skipped(decoder: Any, bits: int) -> None:
    if bits >= 8 and hasattr(decoder, "skipped_extension_bits"):
        decoder.skipped_extension_bits += bits


def _decode_content(decoder: Any, member: Any, content: bytes) -> Any:
    inner = type(decoder)(bytearray(content))
    try:
        value = member.decode(inner)
    except ErrorWithLocation as error:
        error.add_location(member)
        raise
    _note_skipped(decoder, inner.number_of_bits + getattr(inner, "skipped_extension_bits", 0))
    return value


def _choice_encode_additions(self: Any, data: Any, encoder: Any) -> None:
    try:
        index = self.additions_name_to_index[data[0]]
    except KeyError:
        raise per.EncodeError(
            f"Expected choice {self.format_names()}, but got '{data[0]}'."
        ) from None
    member = self.additions_index_to_member[index]
    content = encoder.__class__()
    try:
        member.encode(data[1], content)
    except ErrorWithLocation as error:
        error.add_location(member)
        raise
    encoder.append_normally_small_non_negative_whole_number(index)
    encoder.align()
    _append_open_type(encoder, content)


def _choice_decode_additions(self: Any, decoder: Any) -> tuple[str | None, Any]:
    index = decoder.read_normally_small_non_negative_whole_number()
    decoder.align()
    content = _read_open_type(decoder)
    member = self.additions_index_to_member.get(index)
    if member is None:
        _note_skipped(decoder, 8 * len(content))
        return (None, None)
    return (member.name, _decode_content(decoder, member, content))


def _sequence_encode_additions(self: Any, data: Any, encoder: Any) -> bool:
    presence_bits = 0
    contents = []
    counted = 0
    try:
        for addition in self.additions:
            presence_bits <<= 1
            counted += 1
            content = encoder.__class__()
            if isinstance(addition, per.AdditionGroup):
                addition.encode_addition_group(data, content)
            else:
                self.encode_member(addition, data, content, encode_default=True)
            if content.number_of_bits > 0 or addition.name in data:
                contents.append(content)
                presence_bits |= 1
    except per.EncodeError:
        pass
    if not contents:
        return False
    total = len(self.additions)
    presence_bits <<= total - counted
    encoder.append_normally_small_length(total)
    encoder.append_non_negative_binary_integer(presence_bits, total)
    encoder.align()
    for content in contents:
        _append_open_type(encoder, content)
    return True


def _sequence_decode_additions(self: Any, decoder: Any) -> dict[str, Any]:
    count = decoder.read_normally_small_length()
    presence_bits = decoder.read_non_negative_binary_integer(count)
    decoder.align()
    decoded: dict[str, Any] = {}
    for position in range(count):
        if not presence_bits & (1 << (count - position - 1)):
            continue
        content = _read_open_type(decoder)
        if position >= len(self.additions):
            _note_skipped(decoder, 8 * len(content))
            continue
        addition = self.additions[position]
        value = _decode_content(decoder, addition, content)
        if isinstance(addition, per.AdditionGroup):
            decoded.update(value)
        else:
            decoded[addition.name] = value
    return decoded


def install() -> None:
    if getattr(per.Choice, "_atsss_open_types", False):
        return
    per.Choice.encode_additions = _choice_encode_additions
    per.Choice.decode_additions = _choice_decode_additions
    per.Sequence.encode_additions = _sequence_encode_additions
    per.Sequence.decode_additions = _sequence_decode_additions
    per.Choice._atsss_open_types = True
