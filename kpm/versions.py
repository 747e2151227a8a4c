"""Which E2SM-KPM versions we speak, and how to tell them apart.

A RAN function announces its service model by OID in the E2 setup; when that OID is missing or
wrong, the indication header tells the versions apart by its TimeStamp (4 bytes in 2.0x, 8 in 3.00).
"""

from __future__ import annotations

from enum import StrEnum


class KpmVersion(StrEnum):
    V2_03 = "v2.03"
    V3_00 = "v3.00"


# O-RAN OIDs: enterprise 53148, e2(1), version2(2)/version3(3), e2sm(2), e2sm-KPMMON-IEs(2).
OID_BY_VERSION: dict[KpmVersion, str] = {
    KpmVersion.V2_03: "1.3.6.1.4.1.53148.1.2.2.2",
    KpmVersion.V3_00: "1.3.6.1.4.1.53148.1.3.2.2",
}

DEFAULT_VERSION = KpmVersion.V3_00

TIMESTAMP_BYTES: dict[KpmVersion, int] = {KpmVersion.V2_03: 4, KpmVersion.V3_00: 8}


def version_from_oid(oid: str | None) -> KpmVersion | None:
    """The version a RAN function OID names, or None when we do not know the OID."""
    if oid is None:
        return None
    wanted = oid.strip()
    for version, known in OID_BY_VERSION.items():
        if wanted == known:
            return version
    return None


def parse_version(text: str) -> KpmVersion:
    """A version from user input such as ``v3.00``, ``3.00`` or ``3``."""
    cleaned = text.strip().lower().lstrip("v")
    aliases = {"2": "2.03", "2.03": "2.03", "3": "3.00", "3.0": "3.00", "3.00": "3.00"}
    if cleaned not in aliases:
        known = ", ".join(v.value for v in KpmVersion)
        raise ValueError(f"unknown E2SM-KPM version {text!r} (known: {known})")
    return KpmVersion("v" + aliases[cleaned])
