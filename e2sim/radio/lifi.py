"""LiFi capacity of one station and the KPIs a LiFi access point reports.

The 5G-CLARITY LiFi system has 16.6 MHz of optical bandwidth and up to 42 Mbit/s nominal; the
paper measured 5 to 20 Mbit/s (mean 12.1), very variable, and nothing while the beam is blocked.
Model: rate = min(nominal, η · B · log2(1 + SNR)) with the SNR in dB a time-correlated random
walk around a mean. η = 0.5 and a mean SNR of 2.2 dB with 2.5 dB spread reproduce the measured
mean and range; blockage (the scenario's availability) is an outage: link state 0, no data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from e2sim.radio.nr import RadioStateError

BANDWIDTH_HZ = 16.6e6
NOMINAL_MBPS = 42.0
EFFICIENCY = 0.5
MEAN_SNR_DB = 2.2
SNR_SPREAD_DB = 2.5
SNR_FLOOR_DB = -15.0
SNR_CEILING_DB = 40.0
UPLINK_SHARE = 0.5  # the infrared uplink of the testbed runs at about half the downlink rate


@dataclass(frozen=True)
class LifiStationState:
    snr_db: float
    link_up: bool
    phy_rate_dl_mbps: float
    phy_rate_ul_mbps: float
    capacity_dl_mbps: float
    capacity_ul_mbps: float


def rate_mbps(snr_db: float) -> float:
    if not math.isfinite(snr_db) or not SNR_FLOOR_DB <= snr_db <= SNR_CEILING_DB:
        raise RadioStateError(
            f"LiFi SNR {snr_db:g} dB is outside the model's range "
            f"{SNR_FLOOR_DB:g}..{SNR_CEILING_DB:g} dB"
        )
    return min(NOMINAL_MBPS, EFFICIENCY * BANDWIDTH_HZ * math.log2(1 + 10 ** (snr_db / 10)) / 1e6)


def snr_for_rate(rate: float) -> float:
    """Inverse of ``rate_mbps`` below the nominal ceiling (for scenarios giving capacities)."""
    if rate <= 0:
        return SNR_FLOOR_DB
    clipped = min(rate, NOMINAL_MBPS)
    return max(
        SNR_FLOOR_DB, 10 * math.log10(2 ** (clipped * 1e6 / (EFFICIENCY * BANDWIDTH_HZ)) - 1)
    )


def station_state(snr_db: float, link_up: bool, active_stations: int = 1) -> LifiStationState:
    if active_stations < 1:
        raise RadioStateError(f"a LiFi AP needs at least one active station, got {active_stations}")
    phy = rate_mbps(snr_db)
    if not link_up:
        return LifiStationState(snr_db, False, 0.0, 0.0, 0.0, 0.0)
    share = 1.0 / active_stations
    return LifiStationState(
        snr_db, True, phy, phy * UPLINK_SHARE, phy * share, phy * UPLINK_SHARE * share
    )
