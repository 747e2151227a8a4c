"""Which E2SM-KPM layout a node speaks: announced in its E2 setup, confirmed by every PDU.

The RAN function OID names a standard version, but several layouts share an OID: v2.00, v2.01,
v2.03 and FlexRIC's v2.03 all announce ``1.3.6.1.4.1.53148.1.2.2.2``. A layout is accepted for
a PDU only if the PDU reads cleanly in it (`KpmCodec.decode`: every byte consumed, re-encoded to
the same bytes), so bytes of one layout are never read "successfully" as another. When the setup
leaves more than one layout possible, the standard one is used, the ambiguity is reported, and
the first PDU that reads cleanly in exactly one layout settles it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kpm.codec import KpmPdu, codec_for
from kpm.errors import CodecError
from kpm.versions import DEFAULT_VERSION, OID_BY_VERSION, KpmVersion, version_from_oid

# Order of preference when several layouts read the same bytes: the standards first.
PREFERENCE: tuple[KpmVersion, ...] = (
    KpmVersion.V3_00,
    KpmVersion.V2_03,
    KpmVersion.FLEXRIC_V3_00,
    KpmVersion.FLEXRIC_V2_03,
    KpmVersion.V2_01,
    KpmVersion.V2_00,
)


@dataclass(frozen=True)
class Reading:
    """A PDU read in ``version``; ``also`` lists other layouts in which it reads cleanly too."""

    version: KpmVersion
    value: Any
    also: tuple[KpmVersion, ...] = ()

    def describe(self) -> str:
        if not self.also:
            return f"reads cleanly only as E2SM-KPM {self.version}"
        others = ", ".join(v.value for v in self.also)
        return f"read as E2SM-KPM {self.version}; the bytes are equally valid as {others}"


def family(version: KpmVersion | None) -> tuple[KpmVersion, ...]:
    """The layouts a node announcing ``version``'s OID may speak, ``version`` first."""
    if version is None:
        return PREFERENCE
    oid = OID_BY_VERSION[version]
    return (version, *(v for v in PREFERENCE if v != version and OID_BY_VERSION[v] == oid))


def clean_layouts(pdu: KpmPdu, data: bytes, candidates: Sequence[KpmVersion]) -> list[KpmVersion]:
    return [v for v in candidates if codec_for(v).round_trips(pdu, data)]


def read(pdu: KpmPdu, data: bytes, candidates: Sequence[KpmVersion] = PREFERENCE) -> Reading:
    """The PDU in the first candidate layout that reads it cleanly; CodecError if none does."""
    first_error: CodecError | None = None
    for index, version in enumerate(candidates):
        try:
            value = codec_for(version).decode(pdu, data)
        except CodecError as error:
            first_error = first_error or error
            continue
        also = tuple(clean_layouts(pdu, data, candidates[index + 1 :]))
        return Reading(version, value, also)
    if len(candidates) == 1 and first_error is not None:
        raise first_error
    tried = ", ".join(v.value for v in candidates)
    reason = str(first_error).split("; bytes: ")[0] if first_error else ""
    detail = f" (as {candidates[0]}: {reason})" if reason else ""
    raise CodecError("malformed", f"E2SM-KPM {pdu} reads cleanly in none of {tried}{detail}", data)


@dataclass(frozen=True)
class SetupDetection:
    """What a node's E2 setup says about its layout."""

    candidates: tuple[KpmVersion, ...]  # layouts its RAN function description reads cleanly in
    chosen: KpmVersion
    note: str

    @property
    def ambiguous(self) -> bool:
        return len(self.candidates) > 1


def detect_from_setup(oid: str | None, description: bytes) -> SetupDetection:
    """The layouts a RAN function's OID and the shape of its description allow.

    The OID narrows the family; the description, read strictly, narrows it further (v2.00's
    has a node list, for one). FlexRIC's description has the standard layout, so a FlexRIC node
    and a standard one look alike here: that stays ambiguous until its PDUs settle it.
    """
    announced = version_from_oid(oid)
    wanted = family(announced)
    fitting = tuple(clean_layouts(KpmPdu.RANFUNCTION, description, wanted))
    if not fitting:
        chosen = announced or DEFAULT_VERSION
        return SetupDetection(
            (),
            chosen,
            f"the RAN function description reads in no layout of "
            f"{', '.join(v.value for v in wanted)}; using {chosen}",
        )
    chosen = fitting[0]
    if len(fitting) == 1:
        note = f"E2SM-KPM {chosen}: the only layout its RAN function description fits"
    else:
        others = ", ".join(v.value for v in fitting[1:])
        note = (
            f"E2SM-KPM {chosen} assumed: its E2 setup fits {others} equally; set the node's "
            "kpm_version if it is one of those, or its first indication will tell"
        )
    return SetupDetection(fitting, chosen, note)
