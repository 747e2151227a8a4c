"""Wi-Fi 6 facts from the standard: IEEE 802.11ax-2021 §27.5 (HE PHY).

The HE MCS table (modulation bits per subcarrier and code rate), the data subcarriers per
channel width (HE SU PPDU), and the OFDM symbol time with the 0.8 µs guard interval, from which
a station's PHY rate follows: subcarriers × bits × rate × streams / symbol time.
"""

from __future__ import annotations

# HE MCS 0..11: (bits per subcarrier symbol, code rate) (802.11ax-2021 §27.5)
HE_MCS: tuple[tuple[int, float], ...] = (
    (1, 1 / 2),
    (2, 1 / 2),
    (2, 3 / 4),
    (4, 1 / 2),
    (4, 3 / 4),
    (6, 2 / 3),
    (6, 3 / 4),
    (6, 5 / 6),
    (8, 3 / 4),
    (8, 5 / 6),
    (10, 3 / 4),
    (10, 5 / 6),
)
DATA_SUBCARRIERS = {20: 234, 40: 468, 80: 980, 160: 1960}
HE_SYMBOL_S = 13.6e-6  # 12.8 µs + 0.8 µs GI
