"""A strict fast reader for E2SM-KPM indication messages (Format 1 and Format 3), pure Python.

The generic reader (`kpm.codec`: asn1tools' APER decoder, then a re-encode to check the bytes
are the canonical encoding of what was read) costs about 250 µs per UE of a Format 3 message.
This reader knows the few shapes an indication takes in the layouts the xApp subscribes with
(v3.00, v2.03 and FlexRIC's two) and reads them directly, bit by bit as X.691's ALIGNED variant
lays them out. It is strict by construction: every field is checked as it is read, so a
message is accepted only if it is the one canonical encoding of the value returned:

- extension bits and optional-field bitmaps: only the shapes read here (any extension addition,
  or an optional field this reader does not read, hands the message over);
- lengths (X.691 §11.9): constrained ones inside their bounds, unconstrained ones in the shortest
  form (one octet below 128, two below 16K; fragmented ones are handed over);
- constrained whole numbers (§11.5.7): inside their range; in the indefinite-length case in the
  fewest octets;
- every padding bit zero, and every byte consumed (up to the last octet's zero padding);
- REAL (§15, X.690 §8.5 with CER/DER's §11.3.1): N in the fewest unsigned or signed octets, the one
  rule both readers share (kpm/reals.py).

Anything it cannot show conforms — another shape, an extension, a UE identity kind it does not
read, a byte it does not like — is not an error here: `read_message` returns None and the caller
goes to the generic reader, which accepts or explains. So "the fast reader accepts" always
implies "the generic reader accepts with equal values"; tests/test_fast_message.py checks that
with generated messages, the shared interop vectors and single-bit flips.

Speed comes mostly from Format 3's repetition: each UE repeats the list of measurement names
(about 60 % of its bytes). The first UE's list is read field by field; the next ones are
compared byte for byte with it (same bytes at an octet-aligned start, in the same place of the
same grammar: the same value), which replaces some forty field reads per UE.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from core.compiled import compiled_core
from kpm.reals import LEAST_EXACT_EXPONENT, mantissa_length_allowed
from kpm.reports import IndicationColumns, IndicationReport, MeasurementRecord, ReportProblem
from kpm.ueid import ue_keys
from kpm.versions import KpmVersion

# Where Format 3 sits in the indication message's format CHOICE: an extension addition in the
# standard (the first after the marker), the third root alternative in FlexRIC's copies.
FORMAT3_IN_ROOT = {
    KpmVersion.V3_00: False,
    KpmVersion.V2_03: False,
    KpmVersion.FLEXRIC_V3_00: True,
    KpmVersion.FLEXRIC_V2_03: True,
}

# MeasurementLabel's optional root fields (noLabel … startEndInd, min, max, avg), the same in
# every layout read here: its presence bitmap is this wide.
LABEL_OPTIONALS = 21
NO_LABEL = 1 << (LABEL_OPTIONALS - 1)  # the first optional field
DIST_BIN_X = 1 << (LABEL_OPTIONALS - 14)  # the fourteenth

FAST_LAYOUTS: tuple[KpmVersion, ...] = tuple(FORMAT3_IN_ROOT)

# PrintableString's characters (X.680 §41.4): what a measName may hold.
_PRINTABLE = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 '()+,-./:=?"
)


# The C core, where `pip install` could build it (a compiler was there); this module's Python
# reads the same otherwise. ATSSS_PURE_PYTHON=1 leaves the core out (to compare, or to rule it
# out of a problem).
_core: Any = compiled_core("kpm._fast_message")
if _core is not None:
    _core.configure(MeasurementRecord, IndicationReport, ReportProblem)

COMPILED = _core is not None  # whether read_message uses the C core by default
_default_compiled = COMPILED


@contextlib.contextmanager
def python_twin_by_default() -> Iterator[None]:
    """Within the block ``read_message`` reads with the Python twin unless told otherwise (the
    benches time the two on the same bytes)."""
    global _default_compiled
    before, _default_compiled = _default_compiled, False
    try:
        yield
    finally:
        _default_compiled = before


class _HandOverError(Exception):
    """This reader cannot show the bytes conform: the generic reader decides."""


class _Bits:
    """A cursor over APER bits: ``pos`` counts bits from the start."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.end = len(data) * 8

    def bits(self, count: int) -> int:
        start = self.pos
        stop = start + count
        if stop > self.end:
            raise _HandOverError
        last = (stop + 7) >> 3
        self.pos = stop
        chunk = int.from_bytes(self.data[start >> 3 : last], "big")
        return (chunk >> ((last << 3) - stop)) & ((1 << count) - 1)

    def align(self) -> None:
        """Skip to the next octet; padding bits are zero in a canonical encoding."""
        offset = self.pos & 7
        if offset and self.bits(8 - offset):
            raise _HandOverError

    def octets(self, count: int) -> bytes:
        self.align()
        start = self.pos >> 3
        if start + count > len(self.data):
            raise _HandOverError
        self.pos += count << 3
        return self.data[start : start + count]

    def octet(self) -> int:
        self.align()
        start = self.pos >> 3
        if start >= len(self.data):
            raise _HandOverError
        self.pos += 8
        return self.data[start]

    def length(self) -> int:
        """An unconstrained length determinant (§11.9.3.6-8), shortest form only."""
        first = self.octet()
        if first < 0x80:
            return first
        if first < 0xC0:
            value = ((first & 0x3F) << 8) | self.octet()
            if value < 0x80:
                raise _HandOverError  # the one-octet form was required
            return value
        raise _HandOverError  # fragmented (16K and more): left to the generic reader

    def open_type(self) -> bytes:
        """An open type's octets (§11.2), fragmented as §11.9.3.8 has it from 16K up: whole
        64K fragments while that much is left, then one of 16K, 32K or 48K, then the rest."""
        parts = []
        while True:
            first = self.octet()
            if first < 0xC0:
                self.pos -= 8
                size = self.length()
                parts.append(self.octets(size))
                break
            fragments = first - 0xC0
            if not 1 <= fragments <= 4:
                raise _HandOverError
            parts.append(self.octets(fragments << 14))
            if fragments < 4:  # only the last part may follow a fragment under 64K
                follow = self.octet()
                self.pos -= 8
                if follow >= 0xC0:
                    raise _HandOverError
        content = b"".join(parts)
        if not content:
            raise _HandOverError  # a complete encoding has at least one octet (§11.1)
        return content

    def count(self, upper: int) -> int:
        """A SEQUENCE OF's size in 1..upper, ``upper`` below 64K (§11.9.3.3 → §11.5.7)."""
        return self.whole(upper - 1) + 1

    def whole(self, highest: int) -> int:
        """A constrained whole number 0..highest (range below 64K or indefinite, §11.5.7)."""
        span = highest + 1
        if span == 1:
            return 0
        if span <= 255:
            value = self.bits((span - 1).bit_length())
        elif span == 256:
            value = self.octet()
        elif span <= 65536:
            self.align()
            value = self.bits(16)
        else:
            most = (highest.bit_length() + 7) // 8
            size = self.bits((most - 1).bit_length()) + 1
            raw = self.octets(size)
            if size > 1 and raw[0] == 0:
                raise _HandOverError  # not the fewest octets
            value = int.from_bytes(raw, "big")
        if value > highest:
            raise _HandOverError
        return value

    def done(self) -> None:
        """Every byte used: at most the last octet's padding, all zero, remains."""
        self.align()
        if self.pos != self.end:
            raise _HandOverError


def read_message(
    data: bytes,
    version: KpmVersion,
    subscribed_names: Sequence[str] = (),
    *,
    compiled: bool | None = None,
) -> IndicationReport | None:
    """The report in ``data``, or None when this reader cannot show the bytes are a canonical
    Format 1 or Format 3 message of ``version`` (the generic reader then decides).

    ``compiled``: read with the C core (``kpm/_fast_message.c``, built by ``pip install``
    where a compiler is) or with this module's Python; None: the core where it was built."""
    in_root = FORMAT3_IN_ROOT.get(version)
    if in_root is None or not data:
        return None
    if compiled is None:
        compiled = _default_compiled
    if compiled:
        if _core is None:
            raise RuntimeError("the compiled reader kpm._fast_message was not built here")
        report: IndicationReport | None = _core.read_message(data, in_root, tuple(subscribed_names))
        return report
    try:
        return _Reader(data, subscribed_names).message(in_root)
    except _HandOverError:
        return None
    except (IndexError, ValueError, OverflowError):  # a cut value; never trusted
        return None


def read_columns(
    data: bytes, version: KpmVersion, subscribed_names: Sequence[str] = ()
) -> IndicationColumns | None:
    """A Format 3 message in its usual shape (``IndicationColumns``) read as columns by the C
    core, which reads it as ``read_message`` does, check for check, and keeps the values as
    doubles rather than making a record of each; None for any other message, or where the
    core is not built or not used by default (``read_message`` then reads it as records)."""
    in_root = FORMAT3_IN_ROOT.get(version)
    if in_root is None or not data or _core is None or not _default_compiled:
        return None
    read = _core.read_columns(data, in_root, tuple(subscribed_names))
    if read is None:
        return None
    granularity, names, labels, keys, values, varying = read
    table = np.frombuffer(values, dtype=np.float64).reshape(len(keys), len(names))
    return IndicationColumns(granularity, names, labels, keys, table, varying)


class _Reader:
    def __init__(self, data: bytes, subscribed_names: Sequence[str]) -> None:
        self.bits = _Bits(data)
        self.subscribed = tuple(subscribed_names)
        self.problems: list[ReportProblem] = []
        # Format 3: the measInfoList octets seen last, and what they said.
        self.info_octets: bytes | None = None
        self.info_tail: tuple[int, int] = (0, 0)  # (bits, value) after the whole octets
        self.info_names: tuple[tuple[str, ...], tuple[dict[str, Any], ...]] = ((), ())

    def message(self, format3_in_root: bool) -> IndicationReport:
        bits = self.bits
        if bits.bits(1):  # E2SM-KPM-IndicationMessage's own extension additions
            raise _HandOverError
        if format3_in_root:
            if bits.bits(1):
                raise _HandOverError
            chosen = bits.bits(2)  # three root alternatives: 0..2
        elif bits.bits(1) == 0:
            chosen = bits.bits(1)
        else:
            # An extension alternative: a normally small number (§11.6), then an open type.
            if bits.bits(1):
                raise _HandOverError
            if bits.bits(6) != 0:
                raise _HandOverError  # not Format 3: a later addition
            content = bits.open_type()
            bits.done()
            inner = _Reader(content, self.subscribed)
            report = inner.format3()
            inner.bits.done()
            return report
        if chosen == 0:
            report = self.format1_report()
        elif chosen == 2:
            report = self.format3()
        else:
            raise _HandOverError  # Format 2: the generic reader's
        bits.done()
        return report

    def format1_report(self) -> IndicationReport:
        granularity, records = self.format1(())
        return IndicationReport(1, granularity, tuple(records), tuple(self.problems))

    def format3(self) -> IndicationReport:
        bits = self.bits
        if bits.bits(1):
            raise _HandOverError
        ues = bits.count(65535)
        records: list[MeasurementRecord] = []
        granularity: int | None = None
        for _ in range(ues):
            if bits.bits(1):  # UEMeasurementReportItem's extension additions
                raise _HandOverError
            ueid = self.ueid()
            keys = ue_keys(ueid)
            if not keys:
                raise _HandOverError  # the generic reader words the problem
            period, ue_records = self.format1(keys)
            granularity = granularity or period
            records += ue_records
        return IndicationReport(3, granularity, tuple(records), tuple(self.problems))

    def ueid(self) -> tuple[str, dict[str, Any]]:
        bits = self.bits
        if bits.bits(1):
            raise _HandOverError
        kind = bits.bits(3)
        if kind == 1 or kind == 2:  # gNB-DU-UEID, gNB-CU-UP-UEID: an id and an optional RAN id
            if bits.bits(1):
                raise _HandOverError
            has_ran = bits.bits(1)
            identifier = bits.whole(4294967295)
            fields: dict[str, Any] = {
                ("gNB-CU-UE-F1AP-ID" if kind == 1 else "gNB-CU-CP-UE-E1AP-ID"): identifier
            }
            if has_ran:
                fields["ran-UEID"] = bits.octets(8)
            return ("gNB-DU-UEID" if kind == 1 else "gNB-CU-UP-UEID", fields)
        if kind == 0:  # gNB-UEID: AMF UE NGAP ID, GUAMI, and of the options only a RAN id
            if bits.bits(1):
                raise _HandOverError
            present = bits.bits(5)
            if present & 0b11011:  # F1AP/E1AP lists, XnAP id, global gNB id: generic reader
                raise _HandOverError
            fields = {"amf-UE-NGAP-ID": bits.whole(1099511627775), "guami": self.guami()}
            if present & 0b00100:
                fields["ran-UEID"] = bits.octets(8)
            return ("gNB-UEID", fields)
        raise _HandOverError

    def guami(self) -> dict[str, Any]:
        bits = self.bits
        if bits.bits(1):
            raise _HandOverError
        plmn = bits.octets(3)
        region = bits.bits(8)  # fixed-size BIT STRINGs up to 16 bits: not aligned (§16.9)
        amf_set = bits.bits(10)
        pointer = bits.bits(6)
        return {
            "pLMNIdentity": plmn,
            "aMFRegionID": (bytes([region]), 8),
            "aMFSetID": ((amf_set << 6).to_bytes(2, "big"), 10),
            "aMFPointer": (bytes([pointer << 2]), 6),
        }

    def format1(self, keys: tuple[str, ...]) -> tuple[int | None, list[MeasurementRecord]]:
        """An E2SM-KPM-IndicationMessage-Format1: (granulPeriod, its records)."""
        bits = self.bits
        if bits.bits(1):
            raise _HandOverError
        has_info = bits.bits(1)
        has_granularity = bits.bits(1)
        periods = [self.data_item() for _ in range(bits.count(65535))]
        if has_info:
            names, labels = self.info_list()
        elif self.subscribed:
            names, labels = self.subscribed, tuple({} for _ in self.subscribed)
        else:
            self.problems.append(ReportProblem("no-meas-info", "Format 1 without measInfoList"))
            names, labels = (), ()
        granularity = bits.whole(4294967294) + 1 if has_granularity else None
        if not names:
            return granularity, []
        records: list[MeasurementRecord] = []
        for index, (values, incomplete) in enumerate(periods):
            if len(values) != len(names):
                self.problems.append(
                    ReportProblem(
                        "record-length",
                        f"period {index}: measRecord has {len(values)} values for "
                        f"{len(names)} measurements; period skipped",
                    )
                )
                continue
            if incomplete:
                self.problems.append(
                    ReportProblem(
                        "record-incomplete", f"period {index} is flagged incomplete; skipped"
                    )
                )
                continue
            records += [
                MeasurementRecord(name, value, index, keys, label)
                for name, label, value in zip(names, labels, values, strict=True)
            ]
        return granularity, records

    def data_item(self) -> tuple[list[float | None], bool]:
        """A MeasurementDataItem: its values (None for noValue) and whether flagged incomplete."""
        bits = self.bits
        if bits.bits(1):
            raise _HandOverError
        incomplete = bits.bits(1)
        values: list[float | None] = []
        for _ in range(self._record_count()):
            if bits.bits(1):  # a later alternative of MeasurementRecordItem
                raise _HandOverError
            kind = bits.bits(2)
            if kind == 0:
                values.append(float(bits.whole(4294967295)))
            elif kind == 1:
                values.append(_real(bits.octets(bits.length())))
            elif kind == 2:
                values.append(None)
            else:
                raise _HandOverError  # index 3 is not a root alternative
        if incomplete and bits.bits(1):  # ENUMERATED { true, ... }: extension bit, no index
            raise _HandOverError
        return values, bool(incomplete)

    def _record_count(self) -> int:
        count = self.bits.length()  # SIZE (1..maxnoofMeasurementValue): above 64K, unconstrained
        if count == 0:
            raise _HandOverError
        return count

    def info_list(self) -> tuple[tuple[str, ...], tuple[dict[str, Any], ...]]:
        bits = self.bits
        bits.align()
        start = bits.pos
        known = self.info_octets
        if known is not None:
            whole = start + len(known) * 8
            tail_bits, tail_value = self.info_tail
            if bits.data.startswith(known, start >> 3) and whole + tail_bits <= bits.end:
                bits.pos = whole
                if not tail_bits or bits.bits(tail_bits) == tail_value:
                    return self.info_names
                bits.pos = start
        names = []
        labels = []
        for _ in range(bits.count(65535)):
            if bits.bits(1):
                raise _HandOverError
            names.append(self.meas_type())
            labels.append(self.label_info())
        end = bits.pos
        self.info_octets = bits.data[start >> 3 : end >> 3]
        tail = end & 7
        self.info_tail = (tail, bits.data[end >> 3] >> (8 - tail) if tail else 0)
        self.info_names = (tuple(names), tuple(labels))
        return self.info_names

    def meas_type(self) -> str:
        bits = self.bits
        if bits.bits(1):
            raise _HandOverError
        if bits.bits(1):  # measID
            if bits.bits(1):
                raise _HandOverError
            return f"id:{bits.whole(65535) + 1}"
        if bits.bits(1):  # a name outside SIZE (1..150): the generic reader's
            raise _HandOverError
        size = bits.whole(149) + 1
        raw = bits.octets(size)  # 8 bits a character (§30.5.4), aligned since 150 × 8 > 16
        if not _PRINTABLE.issuperset(raw):
            raise _HandOverError
        return raw.decode("ascii")

    def label_info(self) -> dict[str, Any]:
        """A labelInfoList whose labels are each noLabel alone or distBinX alone (a distribution's
        bin, what the KPM simulator and distribution counters send); the first bin is what the
        list says (as `kpm.reports` reads it). Other labels are the generic reader's."""
        bits = self.bits
        count = bits.length()
        if count == 0:
            raise _HandOverError
        found: dict[str, Any] = {}
        for _ in range(count):
            if bits.bits(1):  # LabelInfoItem's extension
                raise _HandOverError
            if bits.bits(1):  # MeasurementLabel's extension
                raise _HandOverError
            present = bits.bits(LABEL_OPTIONALS)
            if present == NO_LABEL:
                if bits.bits(1):  # ENUMERATED { true, ... }: root value, no index bits
                    raise _HandOverError
            elif present == DIST_BIN_X:
                if bits.bits(1):  # INTEGER (1..65535, ...): a value outside the root
                    raise _HandOverError
                bin_x = bits.whole(65534) + 1
                found = found or {"distBinX": bin_x}
            else:
                raise _HandOverError
        return found


def _real(octets: bytes) -> float:
    """A REAL's contents (X.690 §8.5) in a canonical form (kpm/reals.py): base 2, scale factor
    0, an odd mantissa in the fewest octets as an unsigned or as a signed number, a one- or
    two-octet exponent in the fewest octets; or 0 (no octets), or +∞, −∞, NaN (one octet)."""
    if not octets:
        return 0.0
    first = octets[0]
    if first in (0x40, 0x41, 0x42) and len(octets) == 1:
        return math.nan  # the records keep any non-finite value as NaN
    if first & 0xBF not in (0x80, 0x81):
        raise _HandOverError  # base 8/16, a scale factor, 3-octet exponents, decimal: not canonical
    exponent_size = 1 if first & 0x01 == 0 else 2
    exponent = int.from_bytes(octets[1 : 1 + exponent_size], "big", signed=True)
    mantissa_octets = octets[1 + exponent_size :]
    if not mantissa_octets or len(octets) < 2 + exponent_size:
        raise _HandOverError
    mantissa = int.from_bytes(mantissa_octets, "big")
    if mantissa & 1 == 0 or not mantissa_length_allowed(
        len(mantissa_octets), mantissa.bit_length()
    ):
        raise _HandOverError  # kpm/reals.py: the octets the clauses and asn1tools write
    if exponent_size == 2 and -128 <= exponent <= 127:
        raise _HandOverError  # the one-octet exponent was required
    if exponent < LEAST_EXACT_EXPONENT:
        raise _HandOverError  # kpm/reals.py: no double holds it exactly
    value = math.ldexp(float(mantissa), exponent)
    if mantissa.bit_length() > 53:
        raise _HandOverError  # more precision than a double: the generic reader rounds
    return -value if first & 0x40 else value
