"""E2 PDUs encoded by other implementations (../shared/interop/e2-vectors.json) through
`atsss kpm decode`: each valid one decodes with the values its source asserts and names its
layout; each invalid one is refused with a named cause; none is read silently wrong.

The shared file's `expect` field describes the scope the corpus was collected for (v2.03 and
v3.00 only); the outcomes below are this decoder's, with v2.00–v2.01 and FlexRIC's layouts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kpm.cli import kpm_app

VECTORS_FILE = Path(__file__).resolve().parents[1].parent / "shared" / "interop" / "e2-vectors.json"
VECTORS: dict[str, dict[str, Any]] = {v["id"]: v for v in json.loads(VECTORS_FILE.read_text())}

F1 = "value.indicationMessage-formats.indicationMessage-Format1"
F2 = "value.indicationMessage-formats.indicationMessage-Format2"
H1 = "value.indicationHeader-formats.indicationHeader-Format1"
A = "value.actionDefinition-formats"

# id → (exit status, layout named for the PDU or None, further values the source asserts)
OK, KPM_PART_FAILS, REFUSED = 0, 1, 2
OUTCOMES: dict[str, tuple[int, str | None, dict[str, Any]]] = {
    "srsran-ric-control-request": (REFUSED, None, {"error": "RICcontrolRequest is not handled"}),
    "srsran-ric-control-failure": (REFUSED, None, {"error": "RICcontrolFailure is not handled"}),
    "srsran-kpm-v1-ranfunction": (REFUSED, None, {"error": "reads cleanly in none of"}),
    "srsran-subscription-request": (
        KPM_PART_FAILS,
        None,
        {"decoded.trigger.error.cause": "malformed"},
    ),
    "srsran-subscription-delete-request": (OK, None, {}),
    "srsran-e2-setup-response": (OK, None, {}),
    "srsran-e2-connection-update": (REFUSED, None, {"error": "E2connectionUpdate is not handled"}),
    "srsran4g-foreign-e2-setup-request": (OK, None, {}),
    "submgr-legacy-subscription-request": (REFUSED, None, {"error": "procedure code 201"}),
    "submgr-legacy-subscription-response-1": (REFUSED, None, {"error": "procedure code 201"}),
    "submgr-legacy-subscription-response-2": (REFUSED, None, {"error": "procedure code 201"}),
    "viavi-ind-header": (OK, "v2.03", {}),
    "viavi-ind-message-1": (OK, "v2.03", {}),  # asked as v2.03; the same bytes in v2.01–v3.00
    "viavi-ind-message-2": (
        OK,
        "v2.01",
        {
            f"{F2}.granulPeriod": 10000,
            f"{F2}.measData[26].measRecord[0].integer": 27,
            f"{F2}.measCondUEidList[0].measType.measName": "",  # size-extended: 0 < SIZE(1..)
            f"{F2}.measCondUEidList[0].matchingCond[0].measLabel.noLabel": "true",
            f"{F2}.measCondUEidList[26].matchingUEidList[0].ueID.gNB-DU-UEID.gNB-CU-UE-F1AP-ID": 1,
        },
    ),
    "onos-kpm2-header": (
        OK,
        "v2.00",
        {
            f"{H1}.colletStartTime": "21222324",
            f"{H1}.fileFormatversion": "txt",
            f"{H1}.senderName": "ONF",
            f"{H1}.senderType": "someType",
            f"{H1}.vendorName": "onf",
            f"{H1}.kpmNodeID.gNB.gNB-CU-UP-ID": 12345,
            f"{H1}.kpmNodeID.gNB.gNB-DU-ID": 6789,
        },
    ),
    "onos-kpm2-trigger": (OK, "v3.00", {}),
    "onos-kpm2-action-f1": (
        OK,
        "v2.00",
        {
            f"{A}.actionDefinition-Format1.cellObjID": "onf",
            f"{A}.actionDefinition-Format1.subscriptID": 12345,
            f"{A}.actionDefinition-Format1.measInfoList[0].measType.measName": "trial",
        },
    ),
    "onos-kpm2-action-f2": (
        OK,
        "v2.00",
        {f"{A}.actionDefinition-Format2.ueID": b"SomeUE".hex().upper()},
    ),
    "onos-kpm2-action-f3": (
        OK,
        "v2.00",
        {
            f"{A}.actionDefinition-Format3.measCondList[0].matchingCond[0].testCondInfo.testType"
            ".rSRP": "true",
            f"{A}.actionDefinition-Format3.measCondList[0].matchingCond[0].testCondInfo.testExpr": (
                "lessthan"
            ),
            f"{A}.actionDefinition-Format3.measCondList[0].matchingCond[0].testCondInfo"
            ".testValue.valueEnum": 201,
        },
    ),
    "onos-kpm2-message-f1": (
        OK,
        "v2.00",
        {
            f"{F1}.subscriptID": 12345,
            f"{F1}.cellObjID": "onf",
            f"{F1}.measData[0].measRecord[0].integer": 12345,
            f"{F1}.measData[0].measRecord[1].noValue": None,
            f"{F1}.measData[0].incompleteFlag": "true",
        },
    ),
    "onos-kpm2-message-f2": (
        OK,
        "v2.00",
        {
            f"{F2}.subscriptID": 12345,
            f"{F2}.measCondUEidList[0].matchingUEidList[0].ueID": b"SomeUE".hex().upper(),
            f"{F2}.measCondUEidList[0].matchingCond[0].testCondInfo.testType.rSRP": "true",
        },
    ),
    "radisys-e2-setup-request": (
        OK,
        None,
        {
            "decoded.ran_functions[0].kpm_version": "v2.00",
            "decoded.ran_functions[1].service_model": "E2SM-RC",
        },
    ),
    "onos-e2t-kpm1-header": (REFUSED, None, {"error": "no E2SM-KPM layout we know"}),
    "onos-e2t-kpm1-message": (REFUSED, None, {"error": "reads cleanly in none of"}),
    "hampi105-kpm3-message": (OK, "v3.00", {}),
    "pcap-srsran-e2-setup-request": (OK, None, {"decoded.node_name": "gnb_001_001_0000019b"}),
    "pcap-osc-e2-setup-response": (OK, None, {}),
    "pcap-kpimon-subscription-request": (
        OK,
        None,
        {"decoded.actions[0].version": "v2.01", "decoded.actions[0].value.ric-Style-Type": 3},
    ),
    "pcap-kpimon-trigger": (OK, "v3.00", {}),
    "pcap-kpimon-action-f3": (
        OK,
        "v2.01",
        {
            f"{A}.actionDefinition-Format3.granulPeriod": 10000,
            f"{A}.actionDefinition-Format3.measCondList[12].matchingCond[0].measLabel.noLabel": (
                "true"
            ),
            f"{A}.actionDefinition-Format3.measCondList[0].measType.measName": "CQI",
        },
    ),
    "pcap-srsran-subscription-response": (OK, None, {}),
}

ONOS_RAN_FUNCTIONS = [
    "onos-kpm2-ranfunction-full",
    "onos-kpm2-ranfunction-nodelistonly",
    "onos-kpm2-ranfunction-eventlistonly",
    "onos-kpm2-ranfunction-reportlistonly",
    "onos-kpm2-ranfunction-mndtonly",
]
for _name in ONOS_RAN_FUNCTIONS:
    OUTCOMES[_name] = (
        OK,
        "v2.00",
        {
            "value.ranFunction-Name.ranFunction-ShortName": "onf",
            "value.ranFunction-Name.ranFunction-E2SM-OID": "oid123",
            "value.ranFunction-Name.ranFunction-Description": "someDescription",
        },
    )


def at(tree: Any, path: str) -> Any:
    """The value at a path like ``a.b[2].c`` (keys may hold dashes)."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        tree = tree[int(part[1:-1])] if part.startswith("[") else tree[part]
    return tree


def decode(vector: dict[str, Any]) -> tuple[int, Any, str]:
    result = CliRunner().invoke(
        kpm_app, ["decode", vector["hex"], "--as", vector["layer"], "--version", vector["version"]]
    )
    stdout = result.stdout
    parsed = json.loads(stdout) if stdout.strip().startswith("{") else None
    return result.exit_code, parsed, result.stderr


def test_every_shared_vector_has_an_expected_outcome() -> None:
    assert set(OUTCOMES) == set(VECTORS)


@pytest.mark.parametrize("vector_id", sorted(VECTORS))
def test_vector_decodes_with_its_values_or_is_refused_by_name(vector_id: str) -> None:
    vector = VECTORS[vector_id]
    status, layout, values = OUTCOMES[vector_id]
    code, decoded, stderr = decode(vector)
    assert code == status, stderr
    if status == REFUSED:
        assert decoded is None
        assert stderr.startswith("error: ")
        assert values["error"] in stderr
        return
    assert decoded is not None
    if layout is not None:
        assert decoded["version"] == layout
    for path, expected in {**_source_values(vector), **values}.items():
        assert at(decoded, path) == expected, path


def _source_values(vector: dict[str, Any]) -> dict[str, Any]:
    """The values the shared file lists, where they apply."""
    expected: dict[str, Any] = vector["expected"]
    # Paths under "e2ap." name E2AP fields in the corpus's own terms; ours are under "fields.".
    return {
        path.replace("e2ap.", "fields.request_id.", 1)
        if path.startswith("e2ap.requestor") or path.startswith("e2ap.instance")
        else path.replace("e2ap.", "fields.", 1): value
        for path, value in expected.items()
        if vector["expect"] != "unsupported"
    }
