"""Generate the E2SM-KPM cross-check vectors in tests/vectors/e2sm_kpm.json.

Run once, by hand, with an independently written copy of the E2SM-KPM ASN.1 (both modules of
each version in one file each, e.g. transcribed from the O-RAN specification by someone else):

    python scripts/make_kpm_vectors.py --independent DIR

DIR holds e2sm_kpm_v02_03.asn and e2sm_kpm_v03_00.asn. asn1tools compiles those copies, encodes
each case below with them, and stores the hex together with the value it holds (JER). The
tests then check that our own modules decode every hex to the same value and encode the value
to the same hex, so a transcription slip in either copy shows up. The independent copies are
not part of this repository.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import asn1tools

from kpm import builders
from kpm.codec import TYPE_NAMES, KpmPdu
from kpm.ueid import gnb_du_ueid
from kpm.versions import KpmVersion

OUT = Path(__file__).resolve().parents[1] / "tests" / "vectors" / "e2sm_kpm.json"
FILES = {KpmVersion.V2_03: "e2sm_kpm_v02_03.asn", KpmVersion.V3_00: "e2sm_kpm_v03_00.asn"}

GUAMI = {
    "pLMNIdentity": b"\x00\xf1\x10",
    "aMFRegionID": (b"\x80", 8),
    "aMFSetID": (b"\x00\x40", 10),
    "aMFPointer": (b"\x04", 6),
}
GNB_UE = (
    "gNB-UEID",
    {"amf-UE-NGAP-ID": 1099511627775, "guami": GUAMI, "ran-UEID": bytes(range(8))},
)
DU_UE = gnb_du_ueid(7, "02:00:00:00:00:07")
ENB_UE = (
    "eNB-UEID",
    {
        "mME-UE-S1AP-ID": 4294967295,
        "gUMMEI": {
            "pLMN-Identity": b"\x00\xf1\x10",
            "mME-Group-ID": b"\x01\x02",
            "mME-Code": b"\x03",
        },
    },
)
NR_CGI = (
    "nR-CGI",
    {"pLMNIdentity": b"\x00\xf1\x10", "nRCellIdentity": (b"\x12\x34\x56\x78\x90", 36)},
)
LABEL = {
    "plmnID": b"\x00\xf1\x10",
    "sliceID": {"sST": b"\x01", "sD": b"\x00\x00\x01"},
    "fiveQI": 9,
    "distBinX": 12,
    "min": "true",
    "ssbIndex": 3,
}


def cases(version: KpmVersion) -> list[tuple[str, KpmPdu, Any]]:
    names = ["DRB.UEThpDl", "RRU.PrbUsedDl", "L1M.SS-SINR"]
    format1_cell = builders.action_cell(names, 1000)
    format1_cell["actionDefinition-formats"][1]["cellGlobalID"] = NR_CGI
    labelled = builders.message_format1(["CARR.WBCQIDist"], [[7], [None]], 500)
    labelled["indicationMessage-formats"][1]["measInfoList"][0]["labelInfoList"] = [
        {"measLabel": LABEL}
    ]
    labelled["indicationMessage-formats"][1]["measData"][1]["incompleteFlag"] = "true"
    return [
        ("trigger-format1", KpmPdu.TRIGGER, builders.trigger(1000)),
        ("action-format1-cell", KpmPdu.ACTION, format1_cell),
        ("action-format2-one-ue", KpmPdu.ACTION, builders.action_single_ue(GNB_UE, names, 100)),
        (
            "action-format3-conditions",
            KpmPdu.ACTION,
            builders.action_conditions(
                [("DRB.UEThpDl", {"fiveQI": 9}), ("RRU.PrbUsedDl", {"sUM": "true"})], 1000
            ),
        ),
        (
            "action-format4-ue-condition",
            KpmPdu.ACTION,
            builders.action_ue_condition(
                names, 1000, builders.UeCondition("cQI", "greaterthan", 3)
            ),
        ),
        (
            "action-format5-ue-list",
            KpmPdu.ACTION,
            builders.action_ue_list([DU_UE, ENB_UE], names, 1000),
        ),
        ("header-format1-bare", KpmPdu.HEADER, builders.header(1_700_000_000.5, version)),
        (
            "header-format1-full",
            KpmPdu.HEADER,
            builders.header(1_700_000_000.25, version, "gnb-1 du", "gNB", "atsss"),
        ),
        (
            "message-format1-values",
            KpmPdu.MESSAGE,
            builders.message_format1(names, [[342000, 133, 21.5], [0, None, -3.25]], 1000),
        ),
        ("message-format1-labels", KpmPdu.MESSAGE, labelled),
        (
            "message-format2-matching-ues",
            KpmPdu.MESSAGE,
            builders.message_format2(
                [("DRB.UEThpDl", [DU_UE]), ("DRB.UEThpDl", [GNB_UE, DU_UE])],
                [[1190000, 1500000.5]],
                1000,
            ),
        ),
        (
            "message-format3-per-ue",
            KpmPdu.MESSAGE,
            builders.message_format3(
                [
                    (DU_UE, ["WLAN.StaThpDl", "WLAN.StaAirtime"], [[1190000, 87.5]]),
                    (GNB_UE, ["DRB.UEThpDl"], [[None]]),
                ],
                1000,
            ),
        ),
        (
            "ranfunction-description",
            KpmPdu.RANFUNCTION,
            builders.ran_function_description(
                version,
                "ORAN-E2SM-KPM",
                "KPM Monitor",
                [builders.report_style(1, names), builders.report_style(4, names)],
                instance=1,
            ),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--independent", type=Path, required=True, help="folder of the independent ASN.1 copies"
    )
    args = parser.parse_args()
    vectors = []
    for version, file_name in FILES.items():
        per = asn1tools.compile_files([str(args.independent / file_name)], "per")
        jer = asn1tools.compile_files([str(args.independent / file_name)], "jer")
        for name, pdu, value in cases(version):
            encoded = per.encode(TYPE_NAMES[pdu], value, check_constraints=True)
            vectors.append(
                {
                    "name": name,
                    "version": version.value,
                    "pdu": pdu.value,
                    "hex": encoded.hex(),
                    "value": json.loads(jer.encode(TYPE_NAMES[pdu], value)),
                }
            )
    source = {
        "generated_by": "scripts/make_kpm_vectors.py",
        "independent_asn1": sorted(FILES.values()),
    }
    OUT.write_text(json.dumps({"source": source, "vectors": vectors}, indent=1) + "\n")
    print(f"wrote {len(vectors)} vectors to {OUT}")


if __name__ == "__main__":
    main()
