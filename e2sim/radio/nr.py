"""5G NR downlink/uplink capacity of one UE, and the KPIs a gNB reports for it.

Chain: SINR → CQI (TS 38.214 Table 5.2.2.1-3, the 256QAM table, 10 % BLER) → modulation and code
rate → spectral efficiency → rate over the carrier's PRBs, layers and TDD share (TS 38.306
§4.1.2 with its FR1 overheads) → the UE's PRB share of what other UEs leave.

The SINR thresholds of the CQIs follow the usual link-level fit: a CQI is usable once
log2(1 + SINR) reaches its efficiency divided by 0.75 (an attenuated Shannon bound as in
3GPP TR 36.942 Annex A). The paper's measured 342 Mbit/s (TDD "period 5 ms, 7 DL slots, 6 DL
symbols, 4 UL symbols, 2 UL slots") and 116 Mbit/s ("period 1 ms, 1 DL slot, 12 UL symbols")
at the testbed's best radio conditions are below what the formula gives, because TCP over a
real gNB/UE pair loses to HARQ and processing time, and more so with the 1 ms pattern's frequent
switching; each pattern carries a `measured_efficiency` calibrated to those two figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.standards.nr import CQI_TABLE_256QAM, NrCarrier

SHANNON_ATTENUATION = 0.75
SINR_FLOOR_DB = -10.0  # below this the model has no meaning (no CQI is usable far above it)
SINR_CEILING_DB = 40.0


class RadioStateError(ValueError):
    """A radio state the model cannot represent (e.g. SINR below its floor)."""


def cqi_from_sinr(sinr_db: float) -> int:
    check_sinr(sinr_db)
    capacity = SHANNON_ATTENUATION * math.log2(1 + 10 ** (sinr_db / 10))
    usable = [i for i, (_, _, eff) in enumerate(CQI_TABLE_256QAM) if eff <= capacity]
    return max(usable)


def sinr_for_cqi(cqi: int) -> float:
    """The lowest SINR (dB) at which ``cqi`` is reported."""
    efficiency = CQI_TABLE_256QAM[cqi][2]
    if efficiency <= 0:
        return SINR_FLOOR_DB
    return 10 * math.log10(2 ** (efficiency / SHANNON_ATTENUATION) - 1)


def check_sinr(sinr_db: float) -> None:
    if not math.isfinite(sinr_db) or not SINR_FLOOR_DB <= sinr_db <= SINR_CEILING_DB:
        raise RadioStateError(
            f"NR SINR {sinr_db:g} dB is outside the model's range "
            f"{SINR_FLOOR_DB:g}..{SINR_CEILING_DB:g} dB"
        )


def layers_for_sinr(sinr_db: float, max_layers: int) -> int:
    """Rank 2 needs a clean channel: above 10 dB, as rank adaptation typically decides."""
    return max_layers if sinr_db >= 10.0 else 1


def mcs_for_cqi(cqi: int) -> int:
    """The MCS index (TS 38.214 Table 5.1.3.1-2, 256QAM) whose efficiency matches the CQI's."""
    # Table 5.1.3.1-2 has 28 data MCSs; CQI n corresponds to roughly MCS 2n - 3 at the top end.
    return max(0, min(27, round(cqi * 27 / 15)))


@dataclass(frozen=True)
class NrUeState:
    """What the gNB knows about one UE in one period."""

    sinr_db: float
    cqi: int
    mcs: int
    layers_dl: int
    prb_share: float  # of the carrier's PRBs this UE may use
    capacity_dl_mbps: float
    capacity_ul_mbps: float
    rsrp_dbm: float


def ue_state(
    carrier: NrCarrier, sinr_db: float, other_load: float, active_ues: int, rsrp_dbm: float = -80.0
) -> NrUeState:
    """A UE's capacity given its SINR and how busy the cell is.

    ``other_load`` is the fraction of PRBs used by UEs outside the scenario; the rest is shared
    equally by the ``active_ues`` scenario UEs on this cell (what a proportional-fair scheduler
    converges to for saturated UEs).
    """
    if not 0 <= other_load <= 1:
        raise RadioStateError(f"cell load {other_load:g} is not a fraction 0..1")
    if active_ues < 1:
        raise RadioStateError(f"a cell needs at least one active UE, got {active_ues}")
    cqi = cqi_from_sinr(sinr_db)
    efficiency = CQI_TABLE_256QAM[cqi][2]
    layers = layers_for_sinr(sinr_db, carrier.max_layers_dl)
    share = (1 - other_load) / active_ues
    dl = carrier.rate_mbps(efficiency, layers, downlink=True) * share
    ul = carrier.rate_mbps(efficiency, carrier.max_layers_ul, downlink=False) * share
    return NrUeState(sinr_db, cqi, mcs_for_cqi(cqi), layers, share, dl, ul, rsrp_dbm)


def sinr_for_capacity(carrier: NrCarrier, capacity_dl_mbps: float, prb_share: float) -> float:
    """The lowest SINR whose CQI reaches ``capacity_dl_mbps`` with this PRB share (for scenarios
    that give capacities directly); the CQI-15 SINR when even that falls short."""
    for cqi in range(1, len(CQI_TABLE_256QAM)):
        sinr = sinr_for_cqi(cqi) + 1e-9
        state = ue_state(carrier, sinr, 1 - prb_share, 1)
        if state.capacity_dl_mbps >= capacity_dl_mbps:
            return sinr
    return max(sinr_for_cqi(15) + 1e-9, 10.0)
