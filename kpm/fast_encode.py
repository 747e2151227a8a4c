"""A fast writer for the per-UE indication message the KPM simulator sends most (Format 3).

asn1tools writes a 1,000-UE Format 3 message in about 0.3 s: a simulated site of a thousand
CPEs on three nodes would spend a core on encoding alone, which a bench on a small machine
cannot give it (real E2 nodes encode on their own hardware). This writer lays out the same
shape bit by bit as X.691's ALIGNED variant has it, the mirror of `kpm.fast_message`:
Format 3, each UE a gNB-DU UEID (optionally with a RAN UE ID) and a Format 1 report of
integer, REAL or absent values, with or without a measInfoList of names labelled noLabel or
distBinX (a distribution's bin), with or without a granularity period. Any other value
returns None and the caller uses asn1tools.
tests/test_fast_message.py checks it writes exactly asn1tools' bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kpm.fast_message import DIST_BIN_X, FORMAT3_IN_ROOT, LABEL_OPTIONALS, NO_LABEL
from kpm.versions import KpmVersion

_UINT32 = 2**32 - 1


class _Unsupported(Exception):  # noqa: N818 - internal signal: asn1tools writes this value
    pass


class _Writer:
    """APER bits, most significant first; ``align`` pads with zeros."""

    __slots__ = ("bits", "out", "value")

    def __init__(self) -> None:
        self.out = bytearray()
        self.value = 0  # bits not yet a whole octet
        self.bits = 0

    def put(self, value: int, count: int) -> None:
        self.value = (self.value << count) | value
        self.bits += count
        while self.bits >= 8:
            self.bits -= 8
            self.out.append((self.value >> self.bits) & 0xFF)
        self.value &= (1 << self.bits) - 1

    def align(self) -> None:
        if self.bits:
            self.put(0, 8 - self.bits)

    def octets(self, data: bytes) -> None:
        self.align()
        self.out += data

    def length(self, count: int) -> None:
        """An unconstrained length below 16K (§11.9.3.6-7)."""
        self.align()
        if count < 0x80:
            self.out.append(count)
        elif count < 0x4000:
            self.out += bytes((0x80 | (count >> 8), count & 0xFF))
        else:
            raise _Unsupported

    def uint32(self, value: int) -> None:
        """A constrained whole number 0..2^32-1: its octet count in 2 bits, then the octets."""
        size = max(1, (value.bit_length() + 7) // 8)
        self.put(size - 1, 2)
        self.octets(value.to_bytes(size, "big"))

    def done(self) -> bytes:
        self.align()
        return bytes(self.out)


def encode_format3(version: KpmVersion, value: dict[str, Any]) -> bytes | None:
    """asn1tools' bytes for ``value`` (an E2SM-KPM-IndicationMessage in asn1tools' form) when
    it has the shape described above, else None."""
    in_root = FORMAT3_IN_ROOT.get(version)
    if in_root is None:
        return None
    try:
        name, body = value["indicationMessage-formats"]
        if name != "indicationMessage-Format3" or set(body) != {"ueMeasReportList"}:
            return None
        inner = _format3(body["ueMeasReportList"])
    except (_Unsupported, KeyError, TypeError, ValueError, OverflowError):
        return None
    out = _Writer()
    out.put(0, 1)  # E2SM-KPM-IndicationMessage: no extension additions
    if in_root:
        out.put(0b0_10, 3)  # root alternative 2 of 3
    else:
        out.put(0b1_0_000000, 8)  # extension alternative 0: a normally small number
        _open_type(out, inner)
        return out.done()
    # In the root, Format 3's own extension bit follows the index at once; the rest of it
    # starts on an octet (its UE count is aligned), so its first octet is that bit alone.
    out.put(inner[0] >> 7, 1)
    out.octets(inner[1:])
    return out.done()


def _open_type(out: _Writer, content: bytes) -> None:
    """§11.9.3.8's fragments: 64K while that much is left, then 48K, 32K or 16K, then the rest."""
    offset = 0
    while True:
        left = len(content) - offset
        if left < 0x4000:
            out.length(left)
            out.octets(content[offset:])
            return
        fragments = min(4, left >> 14)
        out.octets(bytes((0xC0 | fragments,)))
        out.octets(content[offset : offset + (fragments << 14)])
        offset += fragments << 14


def _format3(reports: Sequence[dict[str, Any]]) -> bytes:
    if not 1 <= len(reports) <= 65535:
        raise _Unsupported
    out = _Writer()
    out.put(0, 1)  # Format 3's extension bit
    out.align()
    out.put(len(reports) - 1, 16)
    for report in reports:
        if set(report) != {"ueID", "measReport"}:
            raise _Unsupported
        out.put(0, 1)  # UEMeasurementReportItem's extension bit
        _ueid(out, report["ueID"])
        _format1(out, report["measReport"])
    return out.done()


def _ueid(out: _Writer, ueid: Any) -> None:
    kind, fields = ueid
    if kind != "gNB-DU-UEID" or not set(fields) <= {"gNB-CU-UE-F1AP-ID", "ran-UEID"}:
        raise _Unsupported
    identifier = fields["gNB-CU-UE-F1AP-ID"]
    ran = fields.get("ran-UEID")
    if not 0 <= identifier <= _UINT32 or (ran is not None and len(ran) != 8):
        raise _Unsupported
    out.put(0b0_001_0, 5)  # UEID root, alternative 1 (gNB-DU-UEID), its extension bit
    out.put(ran is not None, 1)
    out.uint32(identifier)
    if ran is not None:
        out.octets(bytes(ran))


def _format1(out: _Writer, body: dict[str, Any]) -> None:
    if not set(body) <= {"measData", "measInfoList", "granulPeriod"}:
        raise _Unsupported
    granularity = body.get("granulPeriod")
    info = body.get("measInfoList")
    out.put(0, 1)  # extension bit
    out.put(info is not None, 1)
    out.put(granularity is not None, 1)
    data = body["measData"]
    if not 1 <= len(data) <= 65535:
        raise _Unsupported
    out.align()
    out.put(len(data) - 1, 16)
    for item in data:
        if set(item) != {"measRecord"}:
            raise _Unsupported
        records = item["measRecord"]
        out.put(0, 2)  # MeasurementDataItem's extension bit; no incompleteFlag
        if not records:
            raise _Unsupported
        out.length(len(records))
        for kind, raw in records:
            if kind == "integer":
                if not 0 <= raw <= _UINT32:
                    raise _Unsupported
                out.put(0b0_00, 3)
                out.uint32(raw)
            elif kind == "real":
                octets = _real(float(raw))
                out.put(0b0_01, 3)
                out.length(len(octets))
                out.octets(octets)
            elif kind == "noValue":
                out.put(0b0_10, 3)
            else:
                raise _Unsupported
    if info is not None:
        _info_list(out, info)
    if granularity is not None:
        if not 1 <= granularity <= _UINT32:
            raise _Unsupported
        out.uint32(granularity - 1)


def _info_list(out: _Writer, info: Sequence[dict[str, Any]]) -> None:
    if not 1 <= len(info) <= 65535:
        raise _Unsupported
    out.align()
    out.put(len(info) - 1, 16)
    for item in info:
        if set(item) != {"measType", "labelInfoList"}:
            raise _Unsupported
        kind, name = item["measType"]
        if kind != "measName" or not 1 <= len(name) <= 150 or not name.isascii():
            raise _Unsupported
        out.put(0b0_0_0_0, 4)  # item's extension, measType root alternative 0, size in root
        out.put(len(name) - 1, 8)
        out.octets(name.encode("ascii"))
        labels = item["labelInfoList"]
        if not labels:
            raise _Unsupported
        out.length(len(labels))
        for label in labels:
            if set(label) != {"measLabel"}:
                raise _Unsupported
            fields = label["measLabel"]
            out.put(0, 2)  # LabelInfoItem's and MeasurementLabel's extension bits
            if fields == {"noLabel": "true"}:
                out.put(NO_LABEL, LABEL_OPTIONALS)
                out.put(0, 1)
            elif set(fields) == {"distBinX"} and 1 <= fields["distBinX"] <= 65535:
                out.put(DIST_BIN_X, LABEL_OPTIONALS)
                out.put(0, 1)
                out.align()
                out.put(fields["distBinX"] - 1, 16)
            else:
                raise _Unsupported


def _real(value: float) -> bytes:
    """X.690 §8.5 in asn1tools' canonical form (see `kpm.fast_message._real`)."""
    if math.isnan(value):
        return b"\x42"
    if math.isinf(value):
        return b"\x40" if value > 0 else b"\x41"
    if value == 0.0:
        return b""
    sign = 0x40 if value < 0 else 0
    mantissa, exponent = math.frexp(abs(value))
    whole = int(mantissa * 2**53)
    exponent -= 53
    while whole & 1 == 0:
        whole >>= 1
        exponent += 1
    body = whole.to_bytes(whole.bit_length() // 8 + 1, "big")
    if -128 <= exponent <= 127:
        return bytes((0x80 | sign, exponent & 0xFF)) + body
    return bytes((0x81 | sign, (exponent >> 8) & 0xFF, exponent & 0xFF)) + body
