"""Build E2SM-KPM values (asn1tools' Python form) for the containers we send or simulate.

Report styles and the formats they use (E2SM-KPM §7.4): style 1 → action Format 1 → cell-level
indication Format 1; style 2 → Format 2 (one UE) → Format 1; style 3 → Format 3 (conditions) →
indication Format 2; style 4 → Format 4 (UEs matching a condition) → indication Format 3;
style 5 → Format 5 (a list of two or more UEs) → indication Format 3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kpm.timestamps import encode_timestamp
from kpm.versions import OID_BY_VERSION, KpmVersion

RecordValue = int | float | None
NO_LABEL: dict[str, Any] = {"noLabel": "true"}
UINT32_MAX = 2**32 - 1


def trigger(reporting_period_ms: int) -> dict[str, Any]:
    return {
        "eventDefinition-formats": (
            "eventDefinition-Format1",
            {"reportingPeriod": reporting_period_ms},
        )
    }


def measurement_info_list(names: Sequence[str]) -> list[dict[str, Any]]:
    return [
        {"measType": ("measName", name), "labelInfoList": [{"measLabel": dict(NO_LABEL)}]}
        for name in names
    ]


def action_format1(names: Sequence[str], granularity_ms: int) -> dict[str, Any]:
    return {"measInfoList": measurement_info_list(names), "granulPeriod": granularity_ms}


@dataclass(frozen=True)
class UeCondition:
    """A UE test condition of Format 4, e.g. ``rSRP present`` (every UE with a radio link)."""

    test: str = "rSRP"
    expression: str | None = "present"
    value_int: int | None = None

    def to_value(self) -> dict[str, Any]:
        info: dict[str, Any] = {"testType": (self.test, "true")}
        if self.expression is not None:
            info["testExpr"] = self.expression
        if self.value_int is not None:
            info["testValue"] = ("valueInt", self.value_int)
        return {"testCondInfo": info}


def action(style: int, format_name: str, body: Mapping[str, Any]) -> dict[str, Any]:
    return {"ric-Style-Type": style, "actionDefinition-formats": (format_name, dict(body))}


def action_cell(names: Sequence[str], granularity_ms: int) -> dict[str, Any]:
    return action(1, "actionDefinition-Format1", action_format1(names, granularity_ms))


def action_single_ue(ueid: Any, names: Sequence[str], granularity_ms: int) -> dict[str, Any]:
    body = {"ueID": ueid, "subscriptInfo": action_format1(names, granularity_ms)}
    return action(2, "actionDefinition-Format2", body)


def action_ue_condition(
    names: Sequence[str], granularity_ms: int, condition: UeCondition = UeCondition()
) -> dict[str, Any]:
    body = {
        "matchingUeCondList": [condition.to_value()],
        "subscriptionInfo": action_format1(names, granularity_ms),
    }
    return action(4, "actionDefinition-Format4", body)


def action_ue_list(
    ueids: Sequence[Any], names: Sequence[str], granularity_ms: int
) -> dict[str, Any]:
    if len(ueids) < 2:
        raise ValueError("action definition Format 5 lists at least two UEs; use Format 2")
    body = {
        "matchingUEidList": [{"ueID": ueid} for ueid in ueids],
        "subscriptionInfo": action_format1(names, granularity_ms),
    }
    return action(5, "actionDefinition-Format5", body)


def action_conditions(
    conditions: Sequence[tuple[str, Mapping[str, Any]]], granularity_ms: int
) -> dict[str, Any]:
    """Format 3: each measurement with the label it must match (indication Format 2 answers)."""
    items = [
        {
            "measType": ("measName", name),
            "matchingCond": [{"matchingCondChoice": ("measLabel", dict(label))}],
        }
        for name, label in conditions
    ]
    return action(
        3, "actionDefinition-Format3", {"measCondList": items, "granulPeriod": granularity_ms}
    )


def header(
    collect_start_unix_s: float,
    version: KpmVersion,
    sender_name: str | None = None,
    sender_type: str | None = None,
    vendor_name: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"colletStartTime": encode_timestamp(collect_start_unix_s, version)}
    if sender_name is not None:
        body["senderName"] = sender_name
    if sender_type is not None:
        body["senderType"] = sender_type
    if vendor_name is not None:
        body["vendorName"] = vendor_name
    return {"indicationHeader-formats": ("indicationHeader-Format1", body)}


def record_item(value: RecordValue) -> tuple[str, Any]:
    """An integer when the value is a whole number in range, real otherwise, noValue for None."""
    if value is None:
        return ("noValue", None)
    if isinstance(value, int) and 0 <= value <= UINT32_MAX:
        return ("integer", value)
    return ("real", float(value))


def message_format1_body(
    names: Sequence[str], periods: Sequence[Sequence[RecordValue]], granularity_ms: int | None
) -> dict[str, Any]:
    """One measData item per granularity period; each holds one value per name, in order."""
    body: dict[str, Any] = {
        "measData": [{"measRecord": [record_item(v) for v in values]} for values in periods],
        "measInfoList": measurement_info_list(names),
    }
    if granularity_ms is not None:
        body["granulPeriod"] = granularity_ms
    return body


def message_format1(
    names: Sequence[str], periods: Sequence[Sequence[RecordValue]], granularity_ms: int | None
) -> dict[str, Any]:
    body = message_format1_body(names, periods, granularity_ms)
    return {"indicationMessage-formats": ("indicationMessage-Format1", body)}


def message_format2(
    items: Sequence[tuple[str, Sequence[Any]]],
    periods: Sequence[Sequence[RecordValue]],
    granularity_ms: int | None,
) -> dict[str, Any]:
    """Each (name, matching UE ids) item pairs with the value at the same place in each period."""
    cond_list = []
    for name, ueids in items:
        entry: dict[str, Any] = {
            "measType": ("measName", name),
            "matchingCond": [{"matchingCondChoice": ("measLabel", dict(NO_LABEL))}],
        }
        if ueids:
            entry["matchingUEidList"] = [{"ueID": ueid} for ueid in ueids]
        cond_list.append(entry)
    body: dict[str, Any] = {
        "measData": [{"measRecord": [record_item(v) for v in values]} for values in periods],
        "measCondUEidList": cond_list,
    }
    if granularity_ms is not None:
        body["granulPeriod"] = granularity_ms
    return {"indicationMessage-formats": ("indicationMessage-Format2", body)}


def message_format3(
    reports: Sequence[tuple[Any, Sequence[str], Sequence[Sequence[RecordValue]]]],
    granularity_ms: int | None,
) -> dict[str, Any]:
    """Per-UE reports: (UE id, names, periods) each."""
    items = [
        {"ueID": ueid, "measReport": message_format1_body(names, periods, granularity_ms)}
        for ueid, names, periods in reports
    ]
    return {"indicationMessage-formats": ("indicationMessage-Format3", {"ueMeasReportList": items})}


@dataclass(frozen=True)
class ReportStyle:
    style: int
    name: str
    action_format: int
    header_format: int
    message_format: int
    measurements: tuple[str, ...]


STANDARD_STYLES: dict[int, tuple[str, int, int]] = {
    1: ("E2 Node Measurement", 1, 1),
    2: ("E2 Node Measurement for a single UE", 2, 1),
    3: ("Condition-based, UE-level E2 Node Measurement", 3, 2),
    4: ("Common Condition-based, UE-level Measurement", 4, 3),
    5: ("E2 Node Measurement for multiple UEs", 5, 3),
}


def report_style(style: int, measurements: Sequence[str]) -> ReportStyle:
    name, action_format, message_format = STANDARD_STYLES[style]
    return ReportStyle(style, name, action_format, 1, message_format, tuple(measurements))


def ran_function_description(
    version: KpmVersion,
    short_name: str,
    description: str,
    styles: Sequence[ReportStyle],
    instance: int | None = None,
) -> dict[str, Any]:
    name: dict[str, Any] = {
        "ranFunction-ShortName": short_name,
        "ranFunction-E2SM-OID": OID_BY_VERSION[version],
        "ranFunction-Description": description,
    }
    if instance is not None:
        name["ranFunction-Instance"] = instance
    return {
        "ranFunction-Name": name,
        "ric-EventTriggerStyle-List": [
            {
                "ric-EventTriggerStyle-Type": 1,
                "ric-EventTriggerStyle-Name": "Periodic Report",
                "ric-EventTriggerFormat-Type": 1,
            }
        ],
        "ric-ReportStyle-List": [
            {
                "ric-ReportStyle-Type": style.style,
                "ric-ReportStyle-Name": style.name,
                "ric-ActionFormat-Type": style.action_format,
                "measInfo-Action-List": [{"measName": m} for m in style.measurements],
                "ric-IndicationHeaderFormat-Type": style.header_format,
                "ric-IndicationMessageFormat-Type": style.message_format,
            }
            for style in styles
        ],
    }
