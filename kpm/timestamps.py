"""E2SM-KPM TimeStamps: NTP format (RFC 5905), 8 bytes in v3.00, the 4 seconds bytes in v2.0x.

FlexRIC's dialects put Unix time there instead (see `kpm.versions.UNIX_CLOCK`).
"""

from __future__ import annotations

import struct

from kpm.versions import TIMESTAMP_BYTES, UNIX_CLOCK, KpmVersion

NTP_UNIX_OFFSET_S = 2_208_988_800  # seconds from 1900-01-01 to 1970-01-01
_FRACTION = 2**32


def encode_timestamp(unix_s: float, version: KpmVersion) -> bytes:
    if version in UNIX_CLOCK:
        if not 0 <= unix_s < 2**32:
            raise ValueError(f"time {unix_s} s is outside what a 32-bit Unix time holds")
        if TIMESTAMP_BYTES[version] == 4:
            return struct.pack("<I", int(unix_s))
        return struct.pack(">Q", round(unix_s * 1e6))
    ntp_s = unix_s + NTP_UNIX_OFFSET_S
    if not 0 <= ntp_s < 2**32:
        raise ValueError(f"time {unix_s} s is outside the NTP era 0 (1900–2036)")
    seconds = int(ntp_s)
    if TIMESTAMP_BYTES[version] == 4:
        return struct.pack(">I", seconds)
    fraction = min(round((ntp_s - seconds) * _FRACTION), _FRACTION - 1)
    return struct.pack(">II", seconds, fraction)


def decode_timestamp(raw: bytes, version: KpmVersion | None = None) -> float:
    """Unix seconds from a 4- or 8-byte TimeStamp of ``version`` (NTP unless a Unix-clock one)."""
    if version in UNIX_CLOCK:
        if len(raw) == 4:
            return float(struct.unpack("<I", raw)[0])
        if len(raw) == 8:
            return float(struct.unpack(">Q", raw)[0]) / 1e6
    if len(raw) == 4:
        (seconds,) = struct.unpack(">I", raw)
        return float(int(seconds) - NTP_UNIX_OFFSET_S)
    if len(raw) == 8:
        seconds, fraction = struct.unpack(">II", raw)
        return float(int(seconds) - NTP_UNIX_OFFSET_S + int(fraction) / _FRACTION)
    raise ValueError(f"a TimeStamp has 4 or 8 bytes, not {len(raw)}")
