"""A correction to pycrate's PER runtime, applied before the generic E2AP path reads anything.

X.691 §11.9 cuts a length of 16K units or more into fragments: each full fragment (16K, 32K,
48K or 64K units) says its size, the next length determinant follows it, and a last fragment
under 16K ends the string. pycrate (``pycrate_asn1rt`` 0.8.1, ``ASN1CodecPER.decode_fragbytes``)
reads them, and for the ALIGNED variant keeps the bit offset from which it works out the
padding before the next aligned field. It counts the last fragment's octets as bits: after a
fragmented octet string whose last fragment is not a multiple of eight octets, the next field
is read from the wrong place, and the strict reader (re-encode and compare) refuses the PDU.

E2AP carries a KPM report in open types, and a fleet's report is large (a 1,000-UE Format 3
indication is about 98 KB). The strict fast reader (kpm/fast_e2ap.py) reads those, but hands a
RIC indication with a RICcallProcessID, or with its IEs in another order, to pycrate: such a
PDU with a large message before another IE was refused though valid. (A differential fuzz of
the two readers found it: the fast reader accepted, pycrate did not.)

pycrate also returns, as the length read, the sum of the fragments after the first with the
last counted twice, where its callers take the whole length (a fragmented BIT STRING's number
of bits). Here every fragment moves the offset by its own units, and the length is their sum.
"""

from __future__ import annotations

from typing import Any

# the sizes of a full fragment (X.691 §11.9.3.8): 16K, 32K, 48K, 64K units
_FULL_FRAGMENTS = (16384, 32768, 49152, 65536)

_applied = False


def _fragments(codec: Any, char: Any, length: int, bits: bool = False) -> tuple[bytes, int]:
    """``decode_fragbytes`` as X.691 reads it: ``length`` the first fragment's size (units:
    bits where ``bits``, else octets); each fragment taken, then the next length determinant
    after a full one; the bytes read and the number of units in all."""
    from pycrate_asn1rt.err import ASN1PERDecodeErr

    parts: list[bytes] = []
    total = 0
    while True:
        size_in_bits = length if bits else 8 * length
        parts.append(char.get_bytes(size_in_bits))
        if codec.ALIGNED:
            codec._off[-1] += size_in_bits
        total += length
        if total > codec.DEC_MAXL:
            raise ASN1PERDecodeErr(f"too many fragments, {total!r}")
        if length not in _FULL_FRAGMENTS:
            return b"".join(parts), total
        length = codec.decode_count(char)


def apply() -> None:
    """Put the correction in pycrate's PER codec (once; every later call does nothing)."""
    global _applied
    if _applied:
        return
    from pycrate_asn1rt.codecs import ASN1CodecPER

    ASN1CodecPER.decode_fragbytes = classmethod(_fragments)
    _applied = True
