"""Feature definitions, shared by training and by the estimator at inference time.

One place decides what a model sees, so training and serving can never drift apart. Inputs
are per-period series of one path (one trace, or one CPE's access), oldest first, in canonical
columns with units in their names; `build_features` turns them into the model's matrix.

What matters (the issue's finding on the real 5G dataset): in a loaded commercial cell the
device's share dominates, so the radio KPIs alone predict nothing across traces; the path's own
recent throughput does. The history features are therefore computed from the throughput of the
periods *before* the one predicted (never the period itself), and the radio KPIs of the period
are added on top.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

GROUP = "group"  # trace or CPE/access: history never crosses it
TIME = "time_s"
THROUGHPUT = "thp_mbps"  # carried throughput in the period (DL unless said otherwise)


@dataclass(frozen=True)
class Feature:
    name: str
    unit: str
    description: str


HISTORY: tuple[Feature, ...] = (
    Feature("thp_last_mbps", "Mbit/s", "throughput of the previous period"),
    Feature("thp_last2_mbps", "Mbit/s", "throughput two periods back"),
    Feature("thp_last3_mbps", "Mbit/s", "throughput three periods back"),
    Feature("thp_mean3_mbps", "Mbit/s", "mean of the previous 3 periods"),
    Feature("thp_mean5_mbps", "Mbit/s", "mean of the previous 5 periods"),
    Feature("thp_mean10_mbps", "Mbit/s", "mean of the previous 10 periods"),
    Feature("thp_max5_mbps", "Mbit/s", "maximum of the previous 5 periods"),
    Feature("thp_min5_mbps", "Mbit/s", "minimum of the previous 5 periods"),
    Feature("thp_std5_mbps", "Mbit/s", "standard deviation of the previous 5 periods"),
    Feature("thp_ewma_mbps", "Mbit/s", "exponentially weighted mean, half-life 3 periods"),
    Feature("thp_trend_mbps", "Mbit/s", "previous period minus the 5-period mean"),
)

RADIO: dict[str, tuple[Feature, ...]] = {
    "nr": (
        Feature("rsrp_dbm", "dBm", "reference signal received power"),
        Feature("rsrq_db", "dB", "reference signal received quality"),
        Feature("snr_db", "dB", "signal to noise (SS-SINR from a gNB)"),
        Feature("cqi", "index", "channel quality indicator 0..15"),
        Feature("rssi_dbm", "dBm", "received signal strength"),
        Feature("speed_kmh", "km/h", "device speed (NaN when unknown)"),
        Feature("snr_delta_db", "dB", "SNR change since the previous period"),
        Feature("rsrp_delta_db", "dB", "RSRP change since the previous period"),
        Feature("handover", "0/1", "serving cell changed since the previous period"),
    ),
    "wifi": (
        Feature("rssi_dbm", "dBm", "station RSSI at the AP"),
        Feature("snr_db", "dB", "station SNR"),
        Feature("mcs", "index", "HE MCS of the last DL frames"),
        Feature("nss", "streams", "spatial streams"),
        Feature("phy_rate_mbps", "Mbit/s", "PHY rate of the last DL frames"),
        Feature("airtime_pct", "%", "share of airtime spent on the station"),
        Feature("channel_util_pct", "%", "channel busy share"),
    ),
    "lifi": (
        Feature("snr_db", "dB", "optical SNR at the station"),
        Feature("phy_rate_mbps", "Mbit/s", "PHY rate of the optical downlink"),
        Feature("link_up", "0/1", "1 while the link is up"),
    ),
}

RAW_RADIO: dict[str, tuple[str, ...]] = {
    "nr": ("rsrp_dbm", "rsrq_db", "snr_db", "cqi", "rssi_dbm", "speed_kmh", "cell_id"),
    "wifi": (
        "rssi_dbm",
        "snr_db",
        "mcs",
        "nss",
        "phy_rate_mbps",
        "airtime_pct",
        "channel_util_pct",
    ),
    "lifi": ("snr_db", "phy_rate_mbps", "link_up"),
}


def feature_list(access: str) -> tuple[Feature, ...]:
    if access not in RADIO:
        raise ValueError(f"no features defined for access {access!r} (nr, wifi, lifi)")
    return HISTORY + RADIO[access]


def feature_names(access: str) -> list[str]:
    return [f.name for f in feature_list(access)]


def build_features(frame: pd.DataFrame, access: str) -> npt.NDArray[np.float32]:
    """The model input for every row of ``frame`` (sorted by group, then time)."""
    data = frame.copy()
    for column in RAW_RADIO[access]:
        if column not in data:
            data[column] = np.nan
    thp = data.groupby(GROUP, sort=False)[THROUGHPUT]
    previous = thp.shift(1)
    data["thp_last_mbps"] = previous
    data["thp_last2_mbps"] = thp.shift(2)
    data["thp_last3_mbps"] = thp.shift(3)
    rolled = previous.groupby(data[GROUP], sort=False)
    data["thp_mean3_mbps"] = rolled.transform(lambda s: s.rolling(3, min_periods=1).mean())
    data["thp_mean5_mbps"] = rolled.transform(lambda s: s.rolling(5, min_periods=1).mean())
    data["thp_mean10_mbps"] = rolled.transform(lambda s: s.rolling(10, min_periods=1).mean())
    data["thp_max5_mbps"] = rolled.transform(lambda s: s.rolling(5, min_periods=1).max())
    data["thp_min5_mbps"] = rolled.transform(lambda s: s.rolling(5, min_periods=1).min())
    data["thp_std5_mbps"] = rolled.transform(lambda s: s.rolling(5, min_periods=2).std())
    data["thp_ewma_mbps"] = rolled.transform(lambda s: s.ewm(halflife=3).mean())
    data["thp_trend_mbps"] = data["thp_last_mbps"] - data["thp_mean5_mbps"]
    if access == "nr":
        grouped = data.groupby(GROUP, sort=False)
        data["snr_delta_db"] = data["snr_db"] - grouped["snr_db"].shift(1)
        data["rsrp_delta_db"] = data["rsrp_dbm"] - grouped["rsrp_dbm"].shift(1)
        previous_cell = grouped["cell_id"].shift(1)
        changed = (data["cell_id"] != previous_cell).astype(float)
        unknown = data["cell_id"].isna() | previous_cell.isna()
        data["handover"] = np.where(unknown, np.nan, changed)
    matrix: npt.NDArray[np.float32] = data[feature_names(access)].to_numpy(dtype=np.float32)
    return matrix
