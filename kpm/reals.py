"""What a REAL's contents may look like: the one rule both E2 readers apply (the fast reader,
``kpm.fast_message`` and its C core, and the generic path in ``kpm.codec``).

X.691 encodes a REAL as the contents octets of X.690's encoding with a length in front, and
asks for the restrictions CER and DER put on it (X.690 §11.3.1): base 2, and a mantissa M that
is 0 or odd. X.690 §8.5.7.5 writes the mantissa's magnitude N "as an unsigned binary number",
and nothing in §8.5.7 or §11.3 adds octets in front of it: N in the fewest octets is what the
clauses describe (asn1c writes 76.5 as ``80 ff 99``). asn1tools, and other encoders that
reuse their INTEGER code, write N as if it were signed, with a ``00`` octet in front when its
top bit is set (``80 ff 00 99``). A node may send either: both are read as the same value.
Any other length of N (a second leading zero octet, or a missing one) is not read.
"""

from __future__ import annotations

# The least exponent a REAL (with its odd mantissa M, X.690 §11.3.1) may have and still be a
# double exactly: M's lowest bit is worth 2^exponent, and the least subnormal double is 2^-1074.
# Below it the value rounds (3 × 2^-1075 to 2^-1074, 2^-1076 to 0), and neither reader gives a
# value other than the one sent: the generic path's round trip refuses it, and the fast reader
# hands it over.
LEAST_EXACT_EXPONENT = -1074


def mantissa_length_allowed(octets: int, bit_length: int) -> bool:
    """Whether N of ``bit_length`` bits may take ``octets`` octets: the fewest as an unsigned
    number (X.690 §8.5.7.5), or the fewest as a signed one (asn1tools' form)."""
    return octets in ((bit_length + 7) // 8, bit_length // 8 + 1)


def _head_and_mantissa(contents: bytes) -> tuple[bytes, bytes] | None:
    """A binary REAL's contents (base 2, scale factor 0, a one- or two-octet exponent) split
    into the octets before N and N's; None for any other form."""
    if len(contents) < 2 or contents[0] & 0xBC != 0x80:  # binary, base 2, scale factor 0
        return None
    exponent_size = 1 + (contents[0] & 0x03)
    if exponent_size > 2 or len(contents) < 2 + exponent_size:
        return None
    return contents[: 1 + exponent_size], contents[1 + exponent_size :]


def written_unsigned(contents: bytes) -> bool:
    """Whether N is in the fewest unsigned octets with its top bit set: the form asn1tools
    would write with a leading ``00`` octet (with the top bit clear the two forms agree)."""
    parts = _head_and_mantissa(contents)
    return parts is not None and parts[1][0] & 0x80 != 0


def as_unsigned_writes(contents: bytes) -> bytes:
    """asn1tools' contents of a binary REAL with N's leading ``00`` octet (before a set top
    bit) taken out: N in the fewest unsigned octets. Anything else is returned as it is."""
    parts = _head_and_mantissa(contents)
    if parts is None:
        return contents
    head, mantissa = parts
    if len(mantissa) < 2 or mantissa[0] != 0 or mantissa[1] & 0x80 == 0:
        return contents
    return head + mantissa[1:]
