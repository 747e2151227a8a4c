"""5G NR facts from the standards that the xApp's estimators and the simulator both use.

- CQI → modulation order, code rate and spectral efficiency: TS 38.214 Table 5.2.2.1-3 (the
  256QAM table, 10 % BLER target).
- The approximate data rate of a carrier: TS 38.306 §4.1.2, with its FR1 overheads.
- TDD slot patterns as fractions of downlink and uplink symbols (TS 38.213 §11.1); the two the
  5G-CLARITY testbed used (Navarro-Ortiz et al., Sensors 2024, 24, 6022) with the TCP goodput
  measured there over the TS 38.306 rate, since a deployment's real rate is below the formula.

Models of the radio (SINR, fading, load) are not here: they belong to the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

# TS 38.214 Table 5.2.2.1-3: CQI → (modulation order, code rate × 1024, efficiency)
CQI_TABLE_256QAM: tuple[tuple[int, int, float], ...] = (
    (0, 0, 0.0),
    (2, 78, 0.1523),
    (2, 193, 0.3770),
    (2, 449, 0.8770),
    (4, 378, 1.4766),
    (4, 490, 1.9141),
    (4, 616, 2.4063),
    (6, 466, 2.7305),
    (6, 567, 3.3223),
    (6, 666, 3.9023),
    (6, 772, 4.5234),
    (6, 873, 5.1152),
    (8, 711, 5.5547),
    (8, 797, 6.2266),
    (8, 885, 6.9141),
    (8, 948, 7.4063),
)
OVERHEAD_DL = 0.14  # TS 38.306 §4.1.2, FR1 downlink
OVERHEAD_UL = 0.08  # TS 38.306 §4.1.2, FR1 uplink
SUBCARRIERS_PER_PRB = 12
SYMBOLS_PER_SLOT = 14


@dataclass(frozen=True)
class TddPattern:
    name: str
    period_slots: int
    dl_symbols: int  # per period, data and special slots together
    ul_symbols: int
    measured_efficiency: float  # measured TCP goodput over the TS 38.306 rate at CQI 15

    @property
    def dl_fraction(self) -> float:
        return self.dl_symbols / (self.period_slots * SYMBOLS_PER_SLOT)

    @property
    def ul_fraction(self) -> float:
        return self.ul_symbols / (self.period_slots * SYMBOLS_PER_SLOT)


# 30 kHz SCS: 2 slots per ms.
# "period 5 ms, 7 DL slots, 6 DL symbols, 4 UL symbols, 2 UL slots": 10 slots, 7·14+6 DL symbols.
PATTERN_5MS = TddPattern(
    "7D-6d4u-2U (5 ms)", 10, 7 * 14 + 6, 2 * 14 + 4, measured_efficiency=342.0 / 422.889
)
# "period 1 ms, 1 DL slot, 12 UL symbols": 2 slots, 14 DL symbols, 12 UL symbols.
PATTERN_1MS = TddPattern("1D-12u (1 ms)", 2, 14, 12, measured_efficiency=116.0 / 284.637)
PATTERNS = {"5ms": PATTERN_5MS, "1ms": PATTERN_1MS}


@dataclass(frozen=True)
class NrCarrier:
    prbs: int = 133  # 50 MHz at 30 kHz SCS
    scs_khz: int = 30
    max_layers_dl: int = 2  # MIMO 2x2
    max_layers_ul: int = 1
    tdd: TddPattern = PATTERN_5MS

    @property
    def slots_per_second(self) -> int:
        return 1000 * self.scs_khz // 15

    def rate_mbps(self, efficiency: float, layers: int, downlink: bool) -> float:
        """TS 38.306 rate with a CQI efficiency in place of Qm·R, times the measured efficiency."""
        resource_elements = (
            self.prbs * SUBCARRIERS_PER_PRB * SYMBOLS_PER_SLOT * self.slots_per_second
        )
        share = self.tdd.dl_fraction if downlink else self.tdd.ul_fraction
        overhead = OVERHEAD_DL if downlink else OVERHEAD_UL
        bits = efficiency * layers * resource_elements * share * (1 - overhead)
        return bits * self.tdd.measured_efficiency / 1e6
