"""E2SM-KPM APER codec for each supported version, compiled with asn1tools from kpm/asn1/.

Values are asn1tools' Python form (SEQUENCE → dict, CHOICE → (name, value), OCTET STRING →
bytes, BIT STRING → (bytes, bits)); JSON uses the ASN.1 JSON encoding rules (JER), so what
`atsss kpm decode` prints is what `atsss kpm encode` reads back.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import threading
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

import asn1tools
from asn1tools.codecs import per as asn1tools_per

from kpm import aper_open_types, aper_strings
from kpm.errors import CodecError
from kpm.reals import as_unsigned_writes, written_unsigned
from kpm.versions import KpmVersion

ASN1_DIR = Path(__file__).with_name("asn1")

_MODULE_FILES: dict[KpmVersion, tuple[str, ...]] = {
    KpmVersion.V2_00: ("e2sm_kpm_v02_00.asn",),
    KpmVersion.V2_01: ("e2sm_kpm_v02_01.asn", "e2sm_common.asn"),
    KpmVersion.V2_03: ("e2sm_kpm_v02_03.asn", "e2sm_common.asn"),
    KpmVersion.V3_00: ("e2sm_kpm_v03_00.asn", "e2sm_common.asn"),
    KpmVersion.FLEXRIC_V2_03: ("e2sm_kpm_v02_03_flexric.asn", "e2sm_common.asn"),
    KpmVersion.FLEXRIC_V3_00: ("e2sm_kpm_v03_00_flexric.asn", "e2sm_common.asn"),
}


class _ExtensionCountingDecoder(asn1tools_per.Decoder):  # type: ignore[misc]
    """asn1tools' PER decoder, counting what it skips: the open-type contents of extension
    additions this schema does not know (whole octets; alignment padding is under 8 bits)."""

    def __init__(self, encoded: bytearray) -> None:
        super().__init__(encoded)
        self.skipped_extension_bits = 0


# kpm/reals.py reads a REAL's mantissa in two forms; asn1tools writes one of them. So that a
# value re-encodes to its own bytes, each REAL read notes its form (in decoding order, which
# is also the order of encoding), and the re-encoding writes each REAL in the form it had.
# asn1tools is pinned exactly (pyproject.toml): its REAL coding is wrapped, not replaced, and
# behaves as before outside a strict decode (the simulator's encoding, for one).
_real_forms = threading.local()
UNSIGNED = "unsigned"  # N in the fewest unsigned octets, top bit set (asn1tools: a 00 first)
_plain_real_decode = asn1tools_per.Real.decode
_plain_real_encode = asn1tools_per.Real.encode


def _real_decode(real: Any, decoder: Any) -> Any:
    noting: list[str] | None = getattr(_real_forms, "noting", None)
    if noting is None:
        return _plain_real_decode(real, decoder)
    decoder.align()
    contents = bytearray(decoder.read_bytes(decoder.read_length_determinant()))
    noting.append(UNSIGNED if written_unsigned(bytes(contents)) else "")
    return asn1tools_per.decode_real(contents)


def _real_encode(real: Any, data: Any, encoder: Any) -> None:
    writing: Iterator[str] | None = getattr(_real_forms, "writing", None)
    if writing is None or next(writing, "") != UNSIGNED:
        _plain_real_encode(real, data, encoder)
        return
    encoded = as_unsigned_writes(bytes(asn1tools_per.encode_real(data)))
    encoder.align()
    encoder.append_length_determinant(len(encoded))
    encoder.append_bytes(encoded)


asn1tools_per.Real.decode = _real_decode
asn1tools_per.Real.encode = _real_encode


@contextlib.contextmanager
def _noting_real_forms() -> Iterator[list[str]]:
    forms: list[str] = []
    _real_forms.noting = forms
    try:
        yield forms
    finally:
        _real_forms.noting = None


@contextlib.contextmanager
def _writing_real_forms(forms: list[str]) -> Iterator[None]:
    _real_forms.writing = iter(forms)
    try:
        yield
    finally:
        _real_forms.writing = None


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
    aper_strings.install()
    aper_open_types.install()
    return asn1tools.compile_dict(_parsed(version), rules)


@functools.cache
def _parsed(version: KpmVersion) -> Any:
    """The layout's ASN.1 parsed: about a second per layout, so kept on disk between runs
    (keyed by the modules' text and asn1tools' version); compiling from it takes milliseconds."""
    paths = [ASN1_DIR / name for name in _MODULE_FILES[version]]
    texts = [path.read_bytes() for path in paths]
    key = hashlib.sha256(asn1tools.__version__.encode() + b"\0".join(texts)).hexdigest()[:24]
    cache = _cache_dir() / f"kpm-{version.value}-{key}.pickle"
    with contextlib.suppress(OSError, pickle.UnpicklingError, EOFError, AttributeError):
        return pickle.loads(cache.read_bytes())
    parsed = asn1tools.parse_files([str(path) for path in paths])
    with contextlib.suppress(OSError):
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(pickle.dumps(parsed))
        os.replace(partial, cache)
    return parsed


def _cache_dir() -> Path:
    chosen = os.environ.get("ATSSS_CACHE_DIR")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "atsss"


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
        """The value of ``data``, accepted only if it reads cleanly in this layout.

        Cleanly means: the decoder consumed every byte (up to the last octet's padding) and the
        value re-encodes to exactly these bytes. A layout whose extension markers or fields sit
        elsewhere can "decode" another layout's bytes into wrong values while skipping the
        rest; both checks catch that, and junk appended to a valid PDU as well.
        """
        if not data:
            raise CodecError("empty", f"empty E2SM-KPM {pdu}", data)
        where = f"E2SM-KPM {self.version} {pdu}"
        try:
            with _noting_real_forms() as real_forms:
                value, used_bytes, skipped_extensions = self._decode_counting(pdu, data)
        except Exception as error:  # garbage can trip any part of the decoder
            raise CodecError("malformed", f"not a valid {where}: {error}", data) from error
        if used_bytes < len(data):
            raise CodecError(
                "malformed",
                f"not a valid {where}: {len(data) - used_bytes} of {len(data)} bytes left "
                "unread after a complete value (another version or dialect, or bytes appended)",
                data,
            )
        if skipped_extensions:
            # X.691 lets a later version add extensions an earlier decoder skips; their bytes
            # cannot be re-encoded, so here the consumed-bytes check above is what remains.
            return value
        try:
            with _writing_real_forms(real_forms):
                again = self._per.encode(TYPE_NAMES[pdu], value)
        except Exception:  # a value the decoder let through but the schema refuses
            again = None
        if again != data:
            raise CodecError(
                "malformed",
                f"not a valid {where}: the bytes decode but do not re-encode to themselves, so "
                "the decoder skipped something this layout does not describe (another version "
                "or dialect, an unknown extension, or non-zero padding)",
                data,
            )
        return value

    def _decode_counting(self, pdu: KpmPdu, data: bytes) -> tuple[Any, int, bool]:
        """The value, the bytes the decoder consumed, and whether it skipped unknown extensions.

        asn1tools' PER codec has no decode_with_length; its decoder object counts the bits read
        (a private API, hence asn1tools' exact pin in pyproject.toml).
        """
        compiled = self._per._types[TYPE_NAMES[pdu]]
        decoder = _ExtensionCountingDecoder(bytearray(data))
        value = compiled.type.decode(decoder)
        compiled.check_constraints(value)
        used_bytes = (decoder.number_of_read_bits() + 7) // 8
        return value, used_bytes, decoder.skipped_extension_bits > 0

    def round_trips(self, pdu: KpmPdu, data: bytes) -> bool:
        """True when ``data`` reads cleanly in this layout (see `decode`)."""
        try:
            self.decode(pdu, data)
        except CodecError:
            return False
        return True

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
