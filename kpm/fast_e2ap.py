"""A strict fast reader for the E2AP RIC indication PDU, pure Python.

pycrate, the generic E2AP reader (`kpm.e2ap.decode`), walks its whole object model for every PDU
and then encodes the value again to check the bytes were its canonical encoding: about 1.5 ms
for an indication, whatever its size, which is most of the time the xApp spends on a small
node's report (one Wi-Fi or LiFi station, a 100 ms period). An indication has one fixed shape,
read here directly as X.691's ALIGNED variant lays it out:

    E2AP-PDU          CHOICE, no extension, initiatingMessage (3 bits, padded): 0x00
    procedureCode     INTEGER (0..255), one octet: 5 (id-RICindication)
    criticality       ENUMERATED, 2 bits, padded: 0x40 (ignore, the procedure's own)
    value             open type: a length determinant and the RICindication's encoding
      RICindication   SEQUENCE with an extension marker: 0x00 (no extension, padding)
      protocolIEs     SEQUENCE (SIZE (0..65535)) OF, the count in two octets; each IE:
        id            INTEGER (0..65535), two octets
        criticality   0x00 (reject, what every RICindication IE carries)
        value         open type

Strict by construction: every field is checked as it is read (extension bits and padding
zero, values inside their ranges, each IE at most once, every mandatory one present, lengths in
their shortest form and fragments as an encoder makes them, every byte of every open type
consumed), so a PDU is accepted only as the one canonical encoding of the value returned.
Anything else (another procedure, an extension, the optional RICcallProcessID, a non-canonical
length) is not an error here: `read_indication` returns None and the caller goes to the
generic reader, which accepts or explains. tests/test_fast_e2ap.py checks "accepted here ⇒
accepted by pycrate with an equal value" on generated PDUs, the shared interop vectors and
every single-bit flip of representative PDUs.
"""

from __future__ import annotations

from kpm.e2ap import Indication, RicRequestId

# initiatingMessage, procedure code 5 (RICindication), criticality ignore
_START = b"\x00\x05\x40"

IE_REQUEST_ID = 29
IE_RAN_FUNCTION_ID = 5
IE_ACTION_ID = 15
IE_SEQUENCE_NUMBER = 27
IE_TYPE = 28
IE_HEADER = 25
IE_MESSAGE = 26
_READ = frozenset(
    {
        IE_REQUEST_ID,
        IE_RAN_FUNCTION_ID,
        IE_ACTION_ID,
        IE_SEQUENCE_NUMBER,
        IE_TYPE,
        IE_HEADER,
        IE_MESSAGE,
    }
)
_MANDATORY = _READ - {IE_SEQUENCE_NUMBER}
# RICindicationType ::= ENUMERATED {report, insert, ...}: extension bit 0, one index bit
_TYPES = {0x00: "report", 0x40: "insert"}
MAX_RAN_FUNCTION_ID = 4095

FRAGMENT = 16384  # X.691 §11.9.3.8: lengths from 16K on are sent in fragments of 16K × m
MAX_FRAGMENT_UNITS = 4


class _NotCanonicalError(Exception):
    """The bytes are not in a shape this reader can show canonical: the generic reader's."""


def read_indication(data: bytes) -> Indication | None:
    """The RIC indication ``data`` encodes, or None when it is not one read here."""
    if data[:3] != _START:
        return None
    try:
        return _indication(data)
    except (_NotCanonicalError, IndexError):
        return None


def _indication(data: bytes) -> Indication:
    body, end = _open_type(data, 3)
    if end != len(data):
        raise _NotCanonicalError  # bytes after the PDU
    if body[0] != 0:
        raise _NotCanonicalError  # an extension, or padding that is not zero
    count = body[1] << 8 | body[2]
    at = 3
    ies: dict[int, bytes] = {}
    for _ in range(count):
        ie_id = body[at] << 8 | body[at + 1]
        if body[at + 2] != 0 or ie_id not in _READ or ie_id in ies:
            raise _NotCanonicalError
        ies[ie_id], at = _open_type(body, at + 3)
    if at != len(body) or not ies.keys() >= _MANDATORY:
        raise _NotCanonicalError
    request = ies[IE_REQUEST_ID]
    if len(request) != 5 or request[0] != 0:
        raise _NotCanonicalError
    function = _two_octets(ies[IE_RAN_FUNCTION_ID])
    if function > MAX_RAN_FUNCTION_ID:
        raise _NotCanonicalError
    action = ies[IE_ACTION_ID]
    kind = ies[IE_TYPE]
    if len(action) != 1 or len(kind) != 1 or kind[0] not in _TYPES:
        raise _NotCanonicalError
    sequence = ies.get(IE_SEQUENCE_NUMBER)
    return Indication(
        request_id=RicRequestId(request[1] << 8 | request[2], request[3] << 8 | request[4]),
        ran_function_id=function,
        action_id=action[0],
        header=_octet_string(ies[IE_HEADER]),
        message=_octet_string(ies[IE_MESSAGE]),
        sequence_number=None if sequence is None else _two_octets(sequence),
        indication_type=_TYPES[kind[0]],
    )


def _two_octets(content: bytes) -> int:
    if len(content) != 2:
        raise _NotCanonicalError
    return content[0] << 8 | content[1]


def _octet_string(content: bytes) -> bytes:
    """An unconstrained OCTET STRING that is the whole of an open type's content."""
    value, end = _open_type(content, 0)
    if end != len(content):
        raise _NotCanonicalError
    return value


def _open_type(data: bytes, at: int) -> tuple[bytes, int]:
    """The octets after an unconstrained length determinant at ``at`` (an open type's content
    or an OCTET STRING's value), and where they end. X.691 §11.9.3.6-8: below 128 one octet,
    below 16K two (``10`` and 14 bits), from 16K on fragments of 16K × m octets (``11`` and m,
    1 to 4) and a final length below 16K, possibly 0. Only the shortest forms, and fragments
    as an encoder makes them: 64K ones while at least 64K remain, then at most one smaller,
    then the final length."""
    first = data[at]
    if first < 0x80:
        end = at + 1 + first
        if end > len(data):
            raise _NotCanonicalError
        return data[at + 1 : end], end
    if first < 0xC0:
        length = (first & 0x3F) << 8 | data[at + 1]
        end = at + 2 + length
        if length < 0x80 or end > len(data):
            raise _NotCanonicalError
        return data[at + 2 : end], end
    parts: list[bytes] = []
    while first >= 0xC0:
        units = first & 0x3F
        if not 1 <= units <= MAX_FRAGMENT_UNITS:
            raise _NotCanonicalError
        end = at + 1 + units * FRAGMENT
        if end > len(data):
            raise _NotCanonicalError
        parts.append(data[at + 1 : end])
        at = end
        first = data[at]
        if units < MAX_FRAGMENT_UNITS and first >= 0xC0:
            raise _NotCanonicalError  # a smaller fragment is the last one
    if first < 0x80:
        length, start = first, at + 1
    else:
        length, start = (first & 0x3F) << 8 | data[at + 1], at + 2
        if length < 0x80:
            raise _NotCanonicalError
    end = start + length
    if end > len(data):
        raise _NotCanonicalError
    parts.append(data[start:end])
    return b"".join(parts), end
