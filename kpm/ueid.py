"""Stable text keys for E2SM UE identities, so a configured CPE can be matched to a report.

A UEID is a CHOICE of seven node-specific structures; the keys name the alternative and the
identifier that the node assigned (``gnb:17`` for a gNB's AMF UE NGAP ID 17). When the node also
reports a RAN UE ID, it adds ``ran:<16 hex digits>``; Wi-Fi and LiFi access points put the
station's MAC address in the low six bytes of it, which also yields ``mac:aa:bb:cc:dd:ee:ff``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# UEID alternative → (key prefix, field carrying the node-assigned id)
_PRIMARY_FIELD: dict[str, tuple[str, str]] = {
    "gNB-UEID": ("gnb", "amf-UE-NGAP-ID"),
    "gNB-DU-UEID": ("gnb-du", "gNB-CU-UE-F1AP-ID"),
    "gNB-CU-UP-UEID": ("gnb-cu-up", "gNB-CU-CP-UE-E1AP-ID"),
    "ng-eNB-UEID": ("ng-enb", "amf-UE-NGAP-ID"),
    "ng-eNB-DU-UEID": ("ng-enb-du", "ng-eNB-CU-UE-W1AP-ID"),
    "en-gNB-UEID": ("en-gnb", "m-eNB-UE-X2AP-ID"),
    "eNB-UEID": ("enb", "mME-UE-S1AP-ID"),
}


def ue_keys(ueid: Any) -> tuple[str, ...]:
    """All keys under which this UE can be configured; empty for an unknown alternative.

    E2SM-KPM v2.00 carries an opaque OCTET STRING instead of the CHOICE: its key is
    ``ue:<hex>``.
    """
    if isinstance(ueid, bytes) and ueid:
        return ("ue:" + ueid.hex(),)
    if not (isinstance(ueid, tuple) and len(ueid) == 2 and isinstance(ueid[1], Mapping)):
        return ()
    alternative, fields = ueid
    keys: list[str] = []
    if alternative in _PRIMARY_FIELD:
        prefix, field_name = _PRIMARY_FIELD[alternative]
        if field_name in fields:
            keys.append(f"{prefix}:{fields[field_name]}")
    ran_ueid = fields.get("ran-UEID")
    if isinstance(ran_ueid, bytes) and len(ran_ueid) == 8:
        keys.append("ran:" + ran_ueid.hex())
        if ran_ueid[:2] == b"\x00\x00":
            keys.append("mac:" + ":".join(f"{octet:02x}" for octet in ran_ueid[2:]))
    return tuple(keys)


def ran_ueid_from_mac(mac: str) -> bytes:
    """The 8-byte RAN UE ID an access point uses for a station: two zero bytes, then the MAC."""
    octets = bytes(int(part, 16) for part in mac.split(":"))
    if len(octets) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    return b"\x00\x00" + octets


def gnb_du_ueid(f1ap_id: int, mac: str | None = None) -> tuple[str, dict[str, Any]]:
    """A gNB-DU style UEID, the form our simulated access points use for their stations."""
    fields: dict[str, Any] = {"gNB-CU-UE-F1AP-ID": f1ap_id}
    if mac is not None:
        fields["ran-UEID"] = ran_ueid_from_mac(mac)
    return ("gNB-DU-UEID", fields)
