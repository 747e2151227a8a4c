"""Which E2SM-KPM versions we speak, and how to tell them apart.

A RAN function announces its service model by OID in the E2 setup; when that OID is missing or
wrong, the indication header tells the versions apart by its TimeStamp (4 bytes in 2.0x, 8 in 3.00).
"""

from __future__ import annotations

from enum import StrEnum


class KpmVersion(StrEnum):
    """One wire layout of E2SM-KPM: a standard version, or a dialect some implementations speak.

    v2.00 and v2.01 share v2.03's OID but not its layout; FlexRIC's dialects are v2.03 and
    v3.00 with six extension markers moved (kpm/asn1/ has each module and where it comes from).
    """

    V2_00 = "v2.00"
    V2_01 = "v2.01"
    V2_03 = "v2.03"
    V3_00 = "v3.00"
    FLEXRIC_V2_03 = "flexric-v2.03"
    FLEXRIC_V3_00 = "flexric-v3.00"


# O-RAN OIDs: enterprise 53148, e2(1), version2(2)/version3(3), e2sm(2), e2sm-KPMMON-IEs(2).
_OID_V2 = "1.3.6.1.4.1.53148.1.2.2.2"
_OID_V3 = "1.3.6.1.4.1.53148.1.3.2.2"

# The RAN function OID each layout announces (the O-RAN OIDs: enterprise 53148, e2(1),
# version2(2)/version3(3), e2sm(2), e2sm-KPMMON-IEs(2)).
OID_BY_VERSION: dict[KpmVersion, str] = {
    KpmVersion.V2_00: _OID_V2,
    KpmVersion.V2_01: _OID_V2,
    KpmVersion.V2_03: _OID_V2,
    KpmVersion.V3_00: _OID_V3,
    KpmVersion.FLEXRIC_V2_03: _OID_V2,
    KpmVersion.FLEXRIC_V3_00: _OID_V3,
}

# The standard versions: what an OID names, and what we subscribe in unless told otherwise.
STANDARD_VERSIONS: tuple[KpmVersion, ...] = (KpmVersion.V2_03, KpmVersion.V3_00)

# The layouts whose values have the shapes kpm.builders makes: what we subscribe in and what
# the simulator speaks (v2.00 and v2.01 name and nest things differently).
BUILDER_LAYOUTS: tuple[KpmVersion, ...] = (
    *STANDARD_VERSIONS,
    KpmVersion.FLEXRIC_V2_03,
    KpmVersion.FLEXRIC_V3_00,
)


def parse_builder_layout(text: str) -> KpmVersion:
    """A layout the simulator can speak, from user input."""
    version = parse_version(text)
    if version not in BUILDER_LAYOUTS:
        known = ", ".join(v.value for v in BUILDER_LAYOUTS)
        raise ValueError(f"the simulator speaks {known}, not {version}")
    return version


DEFAULT_VERSION = KpmVersion.V3_00

TIMESTAMP_BYTES: dict[KpmVersion, int] = {
    KpmVersion.V2_00: 4,
    KpmVersion.V2_01: 4,
    KpmVersion.V2_03: 4,
    KpmVersion.V3_00: 8,
    KpmVersion.FLEXRIC_V2_03: 4,
    KpmVersion.FLEXRIC_V3_00: 8,
}

# The standard's TimeStamp is NTP time (its seconds only, before v3.00). FlexRIC fills it with
# Unix time: seconds in host byte order (little-endian on x86) in v2.03, microseconds in v3.00.
UNIX_CLOCK = frozenset({KpmVersion.FLEXRIC_V2_03, KpmVersion.FLEXRIC_V3_00})


def version_from_oid(oid: str | None) -> KpmVersion | None:
    """The standard version a RAN function OID names, or None when we do not know the OID."""
    if oid is None:
        return None
    wanted = oid.strip()
    for version in STANDARD_VERSIONS:
        if wanted == OID_BY_VERSION[version]:
            return version
    return None


def parse_version(text: str) -> KpmVersion:
    """A version from user input such as ``v3.00``, ``3.00`` or ``3``."""
    cleaned = text.strip().lower()
    aliases = {
        "2": "v2.03",
        "3": "v3.00",
        "3.0": "v3.00",
        "2.0": "v2.00",
    }
    for version in KpmVersion:
        aliases[version.value] = version.value
        aliases[version.value.replace("v", "", 1)] = version.value
    found = aliases.get(cleaned)
    if found is None:
        known = ", ".join(v.value for v in KpmVersion)
        raise ValueError(f"unknown E2SM-KPM version {text!r} (known: {known})")
    return KpmVersion(found)


# O-RAN service model OIDs: 1.3.6.1.4.1.53148.1.<version>.2.<model>.
_O_RAN_E2SM_PREFIX = "1.3.6.1.4.1.53148.1."
_SERVICE_MODELS = {"1": "E2SM-NI", "2": "E2SM-KPM", "3": "E2SM-RC", "4": "E2SM-CCC"}


def service_model_name(oid: str | None) -> str | None:
    """The O-RAN service model a RAN function OID names (E2SM-KPM, E2SM-RC, …); None when the
    OID is not an O-RAN one (some nodes announce KPM under their own)."""
    if oid is None:
        return None
    parts = oid.strip().removeprefix(_O_RAN_E2SM_PREFIX).split(".")
    if not oid.strip().startswith(_O_RAN_E2SM_PREFIX) or len(parts) != 3 or parts[1] != "2":
        return None
    return _SERVICE_MODELS.get(parts[2])
