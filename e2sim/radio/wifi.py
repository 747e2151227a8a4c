"""Wi-Fi 6 (802.11ax) capacity of one station, and the KPIs an access point reports for it.

Chain: distance → log-distance path loss with shadowing → RSSI and SNR → HE MCS (the highest
whose SNR threshold is met) and spatial streams → PHY rate (802.11ax-2021 §27.5, 0.8 µs GI) →
MAC efficiency → the station's airtime share (what other traffic on the channel leaves, shared
with the other stations).

Calibration (5G-CLARITY testbed, Navarro-Ortiz et al. 2024): a 4x4 160 MHz AP (peak PHY
4804 Mbit/s) and a 2x2 client (AX201): 2 streams at MCS 11 give 2402 Mbit/s PHY, and 1.19 Gbit/s
was measured at 1 m, so the MAC efficiency (TCP goodput over PHY rate) is 1190 / 2402.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.standards.wifi import DATA_SUBCARRIERS, HE_MCS, HE_SYMBOL_S
from e2sim.radio.nr import RadioStateError

# Minimum SNR (dB) per MCS for 10 % PER: receiver-sensitivity steps of 802.11ax, as commonly used.
HE_MCS_MIN_SNR_DB: tuple[float, ...] = (2, 5, 9, 11, 15, 18, 20, 25, 29, 31, 34, 37)
MAC_EFFICIENCY = 1190.0 / 2401.96
NOISE_FIGURE_DB = 7.0
THERMAL_NOISE_DBM_PER_HZ = -174.0
MIN_DISTANCE_M = 0.1


@dataclass(frozen=True)
class WifiLink:
    """AP and client radio settings; defaults are the paper's testbed at 5 GHz."""

    channel_mhz: int = 160
    ap_streams: int = 4
    client_streams: int = 2
    tx_power_dbm: float = 20.0
    antenna_gain_db: float = 3.0
    reference_loss_db: float = 46.4  # free space at 1 m, 5.2 GHz
    path_loss_exponent: float = 3.5  # indoor, TGax residential/enterprise
    mac_efficiency: float = MAC_EFFICIENCY

    @property
    def noise_dbm(self) -> float:
        return THERMAL_NOISE_DBM_PER_HZ + 10 * math.log10(self.channel_mhz * 1e6) + NOISE_FIGURE_DB

    def rssi_dbm(self, distance_m: float, shadowing_db: float = 0.0) -> float:
        if not math.isfinite(distance_m) or distance_m < MIN_DISTANCE_M:
            raise RadioStateError(
                f"Wi-Fi distance {distance_m:g} m is below the model's {MIN_DISTANCE_M} m"
            )
        loss = (
            self.reference_loss_db
            + 10 * self.path_loss_exponent * math.log10(distance_m)
            + shadowing_db
        )
        return self.tx_power_dbm + self.antenna_gain_db - loss

    def phy_rate_mbps(self, mcs: int, streams: int) -> float:
        bits, rate = HE_MCS[mcs]
        return DATA_SUBCARRIERS[self.channel_mhz] * bits * rate * streams / HE_SYMBOL_S / 1e6


def mcs_for_snr(snr_db: float) -> int | None:
    """The highest HE MCS whose SNR threshold is met; None when not even MCS 0 works."""
    usable = [mcs for mcs, threshold in enumerate(HE_MCS_MIN_SNR_DB) if snr_db >= threshold]
    return max(usable) if usable else None


@dataclass(frozen=True)
class WifiStationState:
    rssi_dbm: float
    snr_db: float
    mcs: int | None  # None: out of range
    streams: int
    phy_rate_mbps: float
    airtime_share: float
    capacity_dl_mbps: float
    capacity_ul_mbps: float


def station_state(
    link: WifiLink,
    distance_m: float,
    channel_busy_by_others: float,
    active_stations: int,
    shadowing_db: float = 0.0,
) -> WifiStationState:
    if not 0 <= channel_busy_by_others <= 1:
        raise RadioStateError(
            f"channel utilisation {channel_busy_by_others:g} is not a fraction 0..1"
        )
    if active_stations < 1:
        raise RadioStateError(f"an AP needs at least one active station, got {active_stations}")
    rssi = link.rssi_dbm(distance_m, shadowing_db)
    snr = rssi - link.noise_dbm
    mcs = mcs_for_snr(snr)
    # A second stream needs a few dB more than the single-stream threshold of the same MCS.
    streams = min(link.ap_streams, link.client_streams) if snr >= 12 else 1
    phy = 0.0 if mcs is None else link.phy_rate_mbps(mcs, streams)
    airtime = (1 - channel_busy_by_others) / active_stations
    capacity = phy * link.mac_efficiency * airtime
    # Uplink: the same link budget, the client's lower power (3 dB less) is within one MCS step.
    return WifiStationState(rssi, snr, mcs, streams, phy, airtime, capacity, capacity * 0.8)


def distance_for_capacity(link: WifiLink, capacity_mbps: float, airtime_share: float) -> float:
    """The largest distance (m) at which a station still reaches ``capacity_mbps``."""
    low, high = MIN_DISTANCE_M, 1000.0
    if station_state(link, low, 1 - airtime_share, 1).capacity_dl_mbps < capacity_mbps:
        return low
    for _ in range(60):
        middle = math.sqrt(low * high)
        if station_state(link, middle, 1 - airtime_share, 1).capacity_dl_mbps >= capacity_mbps:
            low = middle
        else:
            high = middle
    return low
