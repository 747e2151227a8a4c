"""Read decoded E2SM-KPM indications into flat measurement records.

The pairing rule everything rests on: in every measData item (one per granularity period),
measRecord[j] is the value of measInfoList[j] (Format 1), of measCondUEidList[j] (Format 2).
Format 3 carries one Format 1 report per UE. A period whose record count does not match is
skipped and reported as a problem, never shifted onto the wrong measurement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from kpm.codec import KpmPdu, codec_for
from kpm.errors import CodecError
from kpm.timestamps import decode_timestamp
from kpm.ueid import ue_keys
from kpm.versions import TIMESTAMP_BYTES, KpmVersion


@dataclass(frozen=True)
class IndicationHeader:
    version: KpmVersion
    collect_start_unix_s: float
    sender_name: str | None = None
    sender_type: str | None = None
    vendor_name: str | None = None


# A record's labels when it has none: one shared mapping nobody can change.
NO_LABELS: Mapping[str, Any] = MappingProxyType({})


class MeasurementRecord(NamedTuple):
    """One value of one measurement (of one UE, in one period). A named tuple: a 1,000-UE
    Format 3 indication holds some 4,000 of them, and the compiled reader makes a tuple in a
    tenth of the time a dataclass instance takes."""

    name: str  # the measName, or "id:<n>" when the node sent only a measID
    value: float | None  # None for noValue
    period_index: int  # which measData item (granularity period) it came from
    ue_keys: tuple[str, ...] = ()  # empty for a cell-level value
    labels: Mapping[str, Any] = NO_LABELS


@dataclass(frozen=True)
class ReportProblem:
    cause: str
    message: str


@dataclass(frozen=True)
class IndicationReport:
    message_format: int
    granularity_ms: int | None
    records: tuple[MeasurementRecord, ...]
    problems: tuple[ReportProblem, ...] = ()


@dataclass(frozen=True)
class IndicationColumns:
    """A Format 3 report in its usual shape, as columns: every UE reports the same
    measurements (names) for one period, and nothing is amiss (no problem). What its records
    would say, without a record per value: record (UE u, measurement m) is
    ``MeasurementRecord(names[m], values[u, m] (None where NaN), 0, ue_keys[u], labels of
    (u, m))``, UE after UE, each UE's in measurement order (``records_of_columns``)."""

    granularity_ms: int | None
    names: tuple[str, ...]
    labels: tuple[Mapping[str, Any], ...]  # the first UE's, per measurement
    ue_keys: tuple[tuple[str, ...], ...]
    values: npt.NDArray[np.float64]  # (UEs, measurements); NaN: noValue
    # Measurements whose labels differ between UEs (a UE's CQI bin): each UE's labels.
    varying: Mapping[int, tuple[Mapping[str, Any], ...]]

    def labels_of(self, ue: int, measurement: int) -> Mapping[str, Any]:
        each = self.varying.get(measurement)
        return self.labels[measurement] if each is None else each[ue]


def records_of_columns(columns: IndicationColumns) -> list[MeasurementRecord]:
    """The records the columns stand for, in the order a reader gives them."""
    return [
        MeasurementRecord(
            name,
            None if math.isnan(value) else value,
            0,
            keys,
            columns.labels_of(ue, m),
        )
        for ue, (keys, row) in enumerate(zip(columns.ue_keys, columns.values.tolist(), strict=True))
        for m, (name, value) in enumerate(zip(columns.names, row, strict=True))
    ]


@dataclass(frozen=True)
class HeaderDetection:
    header: IndicationHeader
    expected: KpmVersion | None
    ambiguous: bool = False
    layouts: tuple[KpmVersion, ...] = ()  # every layout the header read cleanly in

    @property
    def mismatch(self) -> bool:
        if self.ambiguous:
            return False
        return self.expected is not None and self.expected != self.header.version

    def describe(self) -> str:
        found = self.header.version
        if self.ambiguous:
            return (
                f"header bytes are valid as {', '.join(v.value for v in self.layouts)}; kept "
                "only what the readings agree on (collection time to the second)"
            )
        if self.expected is None:
            return f"detected E2SM-KPM {found} from the indication header"
        if self.mismatch:
            return (
                f"expected E2SM-KPM {self.expected} but the header is {found}; decoded as {found}"
            )
        return f"E2SM-KPM {found} as expected"


# Header layouts on the wire: the other layouts' headers are bit for bit one of these.
_HEADER_SHAPES = (KpmVersion.V3_00, KpmVersion.V2_03, KpmVersion.V2_00)


def _header_candidates(
    expected: KpmVersion | None,
) -> tuple[list[KpmVersion], list[KpmVersion]]:
    """The layouts to read a header in first (the expected one and the standard of the other
    TimeStamp width, the confusion that happens), and those to try when none of them fits.

    v2.00's header differs from v2.03's only by an optional node ID, so most v2.03 headers are
    valid v2.00 headers too: v2.00 is only tried first for a node known to speak it.
    """
    if expected is None:
        first = [KpmVersion.V3_00, KpmVersion.V2_03]
    elif TIMESTAMP_BYTES[expected] == 8:
        first = [expected, KpmVersion.V2_03]
    else:
        first = [expected, KpmVersion.V3_00]
    fallback = [shape for shape in _HEADER_SHAPES if shape not in first]
    return first, fallback


def _clean_headers(data: bytes, layouts: Sequence[KpmVersion]) -> list[IndicationHeader]:
    readings = []
    for layout in layouts:
        try:
            value = codec_for(layout).decode(KpmPdu.HEADER, data)
        except CodecError:
            continue
        readings.append(header_from_value(value, layout))
    return readings


def decode_header(data: bytes, expected: KpmVersion | None = None) -> HeaderDetection:
    """Decode an indication header, telling the layouts apart by a strict read.

    A v3.00 header read as v2.03 takes 4 of the 8 TimeStamp bytes and leaves the rest, so it
    does not read cleanly (see `KpmCodec.decode`); the same holds the other way round, and for
    v2.00's extra optional node ID. Only a layout whose schema accounts for every byte is
    accepted. Some headers with sender strings are valid in both v2.03 and v3.00 (a string's
    bytes can pass for the other version's TimeStamp fraction and length); then only what both
    readings agree on is kept: the collection time to the second (the same 4 bytes in both)
    and any string both read alike. FlexRIC's and v2.01's headers look like the standard ones;
    the node's layout (``expected``) says how to read their TimeStamp.
    """
    preferred, fallback = _header_candidates(expected)
    readings = _clean_headers(data, preferred) or _clean_headers(data, fallback)
    if len(readings) == 1:
        return HeaderDetection(readings[0], expected)
    if len(readings) > 1:
        readings.sort(key=lambda reading: reading.version != expected)
        first, *others = readings
        agreed = IndicationHeader(
            version=first.version,
            collect_start_unix_s=float(math.floor(first.collect_start_unix_s)),
            sender_name=_agreed(first.sender_name, *(o.sender_name for o in others)),
            sender_type=_agreed(first.sender_type, *(o.sender_type for o in others)),
            vendor_name=_agreed(first.vendor_name, *(o.vendor_name for o in others)),
        )
        layouts = tuple(reading.version for reading in readings)
        return HeaderDetection(agreed, expected, ambiguous=True, layouts=layouts)
    raise CodecError(
        "header-version",
        "indication header reads cleanly in no E2SM-KPM layout we know: neither v3.00 (8-byte "
        "TimeStamp) nor v2.03 (4-byte) nor v2.00 (optional node ID)",
        data,
    )


def _agreed(first: str | None, *others: str | None) -> str | None:
    return first if all(other == first for other in others) else None


def header_from_value(value: Mapping[str, Any], version: KpmVersion) -> IndicationHeader:
    format_name, body = value["indicationHeader-formats"]
    if format_name != "indicationHeader-Format1":
        raise CodecError("format", f"indication header format {format_name} is not supported")
    return IndicationHeader(
        version=version,
        collect_start_unix_s=decode_timestamp(body["colletStartTime"], version),
        sender_name=body.get("senderName"),
        sender_type=body.get("senderType"),
        vendor_name=body.get("vendorName"),
    )


def decode_message(
    data: bytes, version: KpmVersion, subscribed_names: Sequence[str] = (), *, fast: bool = True
) -> IndicationReport:
    """The report in an indication message; the strict fast reader first (`kpm.fast_message`,
    unless ``fast`` is False), the generic strict reader for whatever it does not take."""
    if fast:
        from kpm.fast_message import read_message  # it builds on this module's types

        report = read_message(data, version, subscribed_names)
        if report is not None:
            return report
    value = codec_for(version).decode(KpmPdu.MESSAGE, data)
    return report_from_value(value, subscribed_names)


def report_from_value(
    value: Mapping[str, Any], subscribed_names: Sequence[str] = ()
) -> IndicationReport:
    """``subscribed_names`` stand in for measInfoList when a Format 1 report leaves it out."""
    format_name, body = value["indicationMessage-formats"]
    problems: list[ReportProblem] = []
    if format_name == "indicationMessage-Format1":
        records = _format1_records(body, subscribed_names, (), problems)
        return IndicationReport(1, body.get("granulPeriod"), tuple(records), tuple(problems))
    if format_name == "indicationMessage-Format2":
        records = _format2_records(body, problems)
        return IndicationReport(2, body.get("granulPeriod"), tuple(records), tuple(problems))
    if format_name == "indicationMessage-Format3":
        records = []
        granularity: int | None = None
        for report in body["ueMeasReportList"]:
            keys = ue_keys(report["ueID"])
            if not keys:
                # Without a usable id these are one UE's values; never treat them as the cell's.
                problems.append(
                    ReportProblem("unknown-ue", f"UE id {report['ueID'][0]} not understood")
                )
                continue
            measurement = report["measReport"]
            granularity = granularity or measurement.get("granulPeriod")
            records += _format1_records(measurement, subscribed_names, keys, problems)
        return IndicationReport(3, granularity, tuple(records), tuple(problems))
    raise CodecError("format", f"indication message {format_name} is not supported")


def _measurement_name(meas_type: tuple[str, Any]) -> str:
    kind, name = meas_type
    return str(name) if kind == "measName" else f"id:{name}"


class _UnknownValueError(Exception):
    """A record value of an alternative this version does not know (a later extension)."""


def _record_value(item: tuple[str | None, Any]) -> float | None:
    kind, raw = item
    if kind == "noValue":
        return None
    if kind not in ("integer", "real") or not isinstance(raw, int | float):
        raise _UnknownValueError(str(kind))
    number = float(raw)
    return number if math.isfinite(number) else math.nan


def _labels(label_info_list: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The first label that says more than noLabel, in JSON-friendly form."""
    for item in label_info_list:
        label = {k: _jsonable(v) for k, v in item["measLabel"].items() if k != "noLabel"}
        if label:
            return label
    return {}


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, tuple):
        return {str(value[0]): _jsonable(value[1])}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _format1_records(
    body: Mapping[str, Any],
    subscribed_names: Sequence[str],
    keys: tuple[str, ...],
    problems: list[ReportProblem],
) -> list[MeasurementRecord]:
    info = body.get("measInfoList")
    if info is not None:
        names = [_measurement_name(item["measType"]) for item in info]
        labels = [_labels(item.get("labelInfoList", ())) for item in info]
    elif subscribed_names:
        names, labels = list(subscribed_names), [{} for _ in subscribed_names]
    else:
        problems.append(ReportProblem("no-meas-info", "Format 1 without measInfoList"))
        return []
    return _pair(body["measData"], names, labels, [keys] * len(names), problems)


def _format2_records(
    body: Mapping[str, Any], problems: list[ReportProblem]
) -> list[MeasurementRecord]:
    names, labels, keys = [], [], []
    for item in body["measCondUEidList"]:
        names.append(_measurement_name(item["measType"]))
        label_items = [
            {"measLabel": value}
            for kind, value in (_matching_choice(cond) for cond in item["matchingCond"])
            if kind == "measLabel"
        ]
        labels.append(_labels(label_items))
        matching = item.get("matchingUEidList", [])
        # A value matched by exactly one UE is that UE's; by several, it is their aggregate.
        keys.append(ue_keys(matching[0]["ueID"]) if len(matching) == 1 else ())
    return _pair(body["measData"], names, labels, keys, problems)


def _matching_choice(condition: Any) -> tuple[str, Any]:
    """A matching condition's (kind, value): a SEQUENCE around the CHOICE since v2.03, the bare
    CHOICE before."""
    if isinstance(condition, Mapping):
        choice: tuple[str, Any] = condition["matchingCondChoice"]
        return choice
    kind, value = condition
    return str(kind), value


def _pair(
    meas_data: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    labels: Sequence[Mapping[str, Any]],
    keys: Sequence[tuple[str, ...]],
    problems: list[ReportProblem],
) -> list[MeasurementRecord]:
    records: list[MeasurementRecord] = []
    for period_index, item in enumerate(meas_data):
        values = item["measRecord"]
        if len(values) != len(names):
            problems.append(
                ReportProblem(
                    "record-length",
                    f"period {period_index}: measRecord has {len(values)} values for "
                    f"{len(names)} measurements; period skipped",
                )
            )
            continue
        if "incompleteFlag" in item:
            problems.append(
                ReportProblem(
                    "record-incomplete", f"period {period_index} is flagged incomplete; skipped"
                )
            )
            continue
        try:
            period = [
                MeasurementRecord(name, _record_value(raw), period_index, key, label)
                for name, label, key, raw in zip(names, labels, keys, values, strict=True)
            ]
        except _UnknownValueError as unknown:
            problems.append(
                ReportProblem(
                    "record-value", f"period {period_index}: value of unknown kind {unknown}"
                )
            )
            continue
        records += period
    return records


@dataclass(frozen=True)
class RanFunctionInfo:
    """What a node's E2SM-KPM RAN function description says it can do."""

    short_name: str
    oid: str
    report_styles: Mapping[int, tuple[str, ...]]  # style → measurement names offered

    def offers(self, style: int, names: Sequence[str]) -> list[str]:
        """The names in ``names`` that the node does not offer for ``style``."""
        offered = set(self.report_styles.get(style, ()))
        return [name for name in names if name not in offered]


def read_ran_function(data: bytes, version: KpmVersion) -> RanFunctionInfo:
    value = codec_for(version).decode(KpmPdu.RANFUNCTION, data)
    name = value["ranFunction-Name"]
    styles = {
        int(item["ric-ReportStyle-Type"]): tuple(
            m["measName"] for m in item["measInfo-Action-List"]
        )
        for item in value.get("ric-ReportStyle-List", [])
    }
    return RanFunctionInfo(name["ranFunction-ShortName"], name["ranFunction-E2SM-OID"], styles)
