"""Size-extended character strings for asn1tools' PER codec (X.691 §30.5).

E2SM-KPM names measurements with ``PrintableString (SIZE(1..150, ...))``: a name longer than 150
characters, or an empty one, is valid and encoded with the extension bit set. asn1tools (through
0.169) refuses both ways ("String size extension is not yet implemented"), so Viavi's Format 2
messages and ONOS's RAN function descriptions could not be read. X.691 says what such a value
looks like: the extension bit is 1, then the length as if the type had no size constraint
(an octet-aligned length determinant, fragmented above 16K), then the characters with the same
bits per character as in the root, since the permitted-alphabet constraint is not extensible.
That is exactly asn1tools' own encoding of an unbounded string, after the bit.

`install()` wraps the two methods of asn1tools' known-multiplier string type: a value outside
the root takes the extended form; every other value goes through asn1tools' own code unchanged.
It is idempotent; the codec calls it before compiling a schema.
"""

from __future__ import annotations

from typing import Any

from asn1tools.codecs import per

_StringType: Any = per.KnownMultiplierStringType
_ROOT_ENCODE = _StringType.encode
_ROOT_DECODE = _StringType.decode


def _outside_root(string_type: Any, length: int) -> bool:
    minimum = string_type.minimum if string_type.minimum is not None else 0
    maximum = string_type.maximum
    return length < minimum or (maximum is not None and length > maximum)


def _encode(self: Any, data: str, encoder: Any) -> None:
    if self.has_extension_marker and _outside_root(self, len(data)):
        encoder.append_bit(1)
        self.encode_unbound(data, encoder)
    else:
        _ROOT_ENCODE(self, data, encoder)


def _next_bit_is_set(decoder: Any) -> bool:
    position = decoder.number_of_read_bits()
    return bool(decoder.number_of_bits > 0 and decoder.value[position] == "1")


def _decode(self: Any, decoder: Any) -> str:
    if self.has_extension_marker and _next_bit_is_set(decoder):
        decoder.read_bit()
        text: str = self.decode_unbound(decoder)
        return text
    root: str = _ROOT_DECODE(self, decoder)
    return root


def install() -> None:
    if getattr(_StringType, "_atsss_size_extension", False):
        return
    _StringType.encode = _encode
    _StringType.decode = _decode
    _StringType._atsss_size_extension = True
