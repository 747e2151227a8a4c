"""E2SM-KPM APER codec for each supported version, compiled with asn1tools from kpm/asn1/.

Values are asn1tools' Python form (SEQUENCE → dict, CHOICE → (name, value), OCTET STRING →
bytes, BIT STRING → (bytes, bits)); JSON uses the ASN.1 JSON encoding rules (JER), so what
`atsss kpm decode` prints is what `atsss kpm encode` reads back.
"""

from __future__ import annotations

import functools
import threading
from enum import StrEnum
from pathlib import Path
from typing import Any

import asn1tools

from kpm.errors import CodecError
from kpm.versions import KpmVersion

ASN1_DIR = Path(__file__).with_name("asn1")

_MODULE_FILES: dict[KpmVersion, tuple[str, ...]] = {
    KpmVersion.V2_03: ("e2sm_kpm_v02_03.asn", "e2sm_common.asn"),
    KpmVersion.V3_00: ("e2sm_kpm_v03_00.asn", "e2sm_common.asn"),
}


class KpmPdu(StrEnum):
    """The E2SM-KPM containers carried inside E2AP OCTET STRINGs."""

    TRIGGER = "trigger"
    ACTION = "action"
    HEADER = "header"
    MESSAGE = "message"
    RANFUNCTION = "ranfunction"


TYPE_NAMES: dict[KpmPdu, str] = {
    KpmPdu.TRIGGER: "E2SM-KPM-EventTriggerDefinition",
    KpmPdu.ACTION: "E2SM-KPM-ActionDefinition",
    KpmPdu.HEADER: "E2SM-KPM-IndicationHeader",
    KpmPdu.MESSAGE: "E2SM-KPM-IndicationMessage",
    KpmPdu.RANFUNCTION: "E2SM-KPM-RANfunction-Description",
}


@functools.cache
def _specification(version: KpmVersion, rules: str) -> Any:
    files = [str(ASN1_DIR / name) for name in _MODULE_FILES[version]]
    return asn1tools.compile_files(files, rules)


class KpmCodec:
    """Encodes and decodes the E2SM-KPM containers of one version; no state besides the schema."""

    def __init__(self, version: KpmVersion) -> None:
        self.version = version
        self._per = _specification(version, "per")
        self._jer = _specification(version, "jer")

    def encode(self, pdu: KpmPdu, value: Any) -> bytes:
        try:
            encoded: bytes = self._per.encode(TYPE_NAMES[pdu], value, check_constraints=True)
        except Exception as error:  # asn1tools raises several unrelated types
            raise CodecError(
                "encode", f"cannot encode E2SM-KPM {self.version} {pdu}: {error}"
            ) from error
        return encoded

    def decode(self, pdu: KpmPdu, data: bytes) -> Any:
        if not data:
            raise CodecError("empty", f"empty E2SM-KPM {pdu}", data)
        try:
            return self._per.decode(TYPE_NAMES[pdu], data, check_constraints=True)
        except Exception as error:  # garbage can trip any part of the decoder
            raise CodecError(
                "malformed", f"not a valid E2SM-KPM {self.version} {pdu}: {error}", data
            ) from error

    def round_trips(self, pdu: KpmPdu, data: bytes) -> bool:
        """True when ``data`` decodes and re-encodes to exactly the same bytes (canonical APER)."""
        try:
            value = self._per.decode(TYPE_NAMES[pdu], data, check_constraints=True)
            return bool(self._per.encode(TYPE_NAMES[pdu], value) == data)
        except Exception:  # any failure means "not this version"
            return False

    def to_json(self, pdu: KpmPdu, value: Any) -> str:
        try:
            text: bytes = self._jer.encode(TYPE_NAMES[pdu], value)
        except Exception as error:  # e.g. an extension alternative this version cannot name
            raise CodecError("json", f"cannot show this E2SM-KPM {pdu} as JSON: {error}") from error
        return text.decode()

    def from_json(self, pdu: KpmPdu, text: str) -> Any:
        try:
            return self._jer.decode(TYPE_NAMES[pdu], text.encode())
        except Exception as error:  # the JSON names a field or value the schema lacks
            raise CodecError(
                "json", f"JSON is not a valid E2SM-KPM {self.version} {pdu}: {error}"
            ) from error


# Compiling a version takes about a second: E2 connections that start together must not all
# compile it at once (functools.cache alone lets each of them do so).
_COMPILING = threading.Lock()


def codec_for(version: KpmVersion) -> KpmCodec:
    with _COMPILING:
        return _codec(version)


def compile_all() -> None:
    """Compile every version now: a service does it before its first E2 node connects."""
    for version in KpmVersion:
        codec_for(version)


@functools.cache
def _codec(version: KpmVersion) -> KpmCodec:
    return KpmCodec(version)
