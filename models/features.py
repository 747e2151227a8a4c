"""Feature definitions, shared by training and by the estimator at inference time.

One place decides what a model sees, so training and serving can never drift apart. Inputs
are per-period series of one path (one trace, or one CPE's access), oldest first, in canonical
columns with units in their names; `build_features` turns them into the model's matrix.

Everything a row's features hold happened *before* the period it predicts: at inference the
model is asked about the next period, and only what was reported so far exists.

**Why not simply the throughput history.** Once weights are in force a path carries what its
weight lets it carry, so a model that learnt "capacity ≈ recent throughput" locks an
under-weighted path out for ever. The features therefore read what does not depend on the
weights:

- the radio (CQI, SINR, RSRP, MCS, PHY rate, layers);
- the rate per resource the path actually used, carried over to the resources free to it
  (NR: throughput per PRB share × the PRB share the other stations leave; Wi-Fi: throughput
  per airtime share × the airtime the others leave): the *reference* capacity of a period;
- where the path used no resource, the rate its radio allows on the free resources (NR: the
  CQI's TS 38.214 efficiency at the carrier's TS 38.306 rate; Wi-Fi: the PHY rate);
- the throughput itself only from periods in which the path was saturated (a bulk download
  of the real traces, a utilisation of its resources ≥ 0.8 in the xApp).

The model predicts the next period's capacity *relative to* the last reference
(`log((target + 1) / (ref_last + 1))`, see `TARGET_TRANSFORM`), so that what it learns holds on
paths faster or slower than any it was trained on; the history enters as ratios for the same
reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from core.standards import nr as nr_standard

GROUP = "group"  # trace or CPE/access: history never crosses it
TIME = "time_s"
THROUGHPUT = "thp_mbps"  # carried throughput in the period (DL unless said otherwise)
# 1 where the throughput was what the path could carry (saturated), 0 where it was held back;
# missing counts as saturated (a bulk download's trace, a node reporting no resource KPIs).
SATURATED = "saturated"
REFERENCE = "ref_last_mbps"
OFFSET_MBPS = 1.0  # keeps the log ratio finite on paths near 0
# How the model's output becomes Mbit/s; recorded in the card and applied by the runtime.
TARGET_TRANSFORM = {"kind": "log_ratio", "reference": REFERENCE, "offset_mbps": OFFSET_MBPS}

# Below these shares of its resources a path carried too little for its rate per resource to
# be more than quantisation noise (a PRB of 133, 0.1 % airtime).
MIN_PRB_SHARE = 0.02
MIN_AIRTIME_SHARE = 0.01
WIFI_NOMINAL_MAC_EFFICIENCY = 0.5  # goodput per PHY rate when nothing was carried; learnt on


@dataclass(frozen=True)
class Feature:
    name: str
    unit: str
    description: str


HISTORY: tuple[Feature, ...] = (
    Feature(REFERENCE, "Mbit/s", "reference capacity of the previous period (see module doc)"),
    Feature("ref_last2_ratio", "ratio", "reference two periods back over the last one"),
    Feature("ref_mean3_ratio", "ratio", "mean reference of the previous 3 periods over the last"),
    Feature("ref_mean10_ratio", "ratio", "mean reference of the previous 10 periods over the last"),
    Feature("ref_min5_ratio", "ratio", "minimum reference of the previous 5 over the last"),
    Feature("ref_max5_ratio", "ratio", "maximum reference of the previous 5 over the last"),
    Feature("ref_std5_ratio", "ratio", "standard deviation of the previous 5 over the last"),
    Feature("ref_from_resources", "0/1", "1: the reference came from resource KPIs, not thp"),
)

RADIO: dict[str, tuple[Feature, ...]] = {
    "nr": (
        Feature("rsrp_dbm", "dBm", "reference signal received power"),
        Feature("rsrq_db", "dB", "reference signal received quality"),
        Feature("snr_db", "dB", "signal to noise (SS-SINR from a gNB)"),
        Feature("cqi", "index", "channel quality indicator 0..15"),
        Feature("rssi_dbm", "dBm", "received signal strength"),
        Feature("speed_kmh", "km/h", "device speed (NaN when unknown)"),
        Feature("snr_delta_db", "dB", "SNR change over the previous period"),
        Feature("rsrp_delta_db", "dB", "RSRP change over the previous period"),
        Feature("handover", "0/1", "serving cell changed in the previous period"),
        Feature("layers", "layers", "average DL MIMO layers"),
        Feature("cqi_rate_mbps", "Mbit/s", "rate of the CQI and layers over the whole carrier"),
        Feature("free_prb_share", "ratio", "PRB share the other stations left to the UE"),
    ),
    "wifi": (
        Feature("rssi_dbm", "dBm", "station RSSI at the AP"),
        Feature("snr_db", "dB", "station SNR"),
        Feature("mcs", "index", "HE MCS of the last DL frames"),
        Feature("nss", "streams", "spatial streams"),
        Feature("phy_rate_mbps", "Mbit/s", "PHY rate of the last DL frames"),
        Feature("free_airtime_share", "ratio", "airtime the other stations left to this one"),
        Feature("others_airtime_pct", "%", "channel busy share not spent on this station"),
    ),
    "lifi": (
        Feature("snr_db", "dB", "optical SNR at the station"),
        Feature("phy_rate_mbps", "Mbit/s", "PHY rate of the optical downlink"),
        Feature("link_up", "0/1", "1 while the link is up"),
    ),
}

# Canonical per-period input columns (missing ones are taken as unknown)
RAW_COLUMNS: dict[str, tuple[str, ...]] = {
    "nr": (
        "rsrp_dbm",
        "rsrq_db",
        "snr_db",
        "cqi",
        "rssi_dbm",
        "speed_kmh",
        "cell_id",
        "layers",
        "prb_used",
        "prb_avail",
        "prb_tot_pct",
    ),
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

_NR_CARRIER = nr_standard.NrCarrier()
_CQI_EFFICIENCY = np.array([row[2] for row in nr_standard.CQI_TABLE_256QAM])
_RATE_PER_LAYER_MBPS = _NR_CARRIER.rate_mbps(1.0, 1, True)  # rate_mbps is linear in both


def feature_list(access: str) -> tuple[Feature, ...]:
    if access not in RADIO:
        raise ValueError(f"no features defined for access {access!r} (nr, wifi, lifi)")
    return HISTORY + RADIO[access]


def feature_names(access: str) -> list[str]:
    return [f.name for f in feature_list(access)]


def reference_mbps(data: pd.DataFrame, access: str) -> tuple[pd.Series, pd.Series]:
    """Each period's reference capacity and whether it came from resource KPIs.

    ``data`` holds the canonical columns (and the derived ones `_derive` adds)."""
    thp = data[THROUGHPUT]
    saturated = data[SATURATED].fillna(1.0) >= 0.5
    from_thp = thp.where(saturated & (thp > 0))
    resources = pd.Series(np.nan, index=data.index)
    if access == "nr":
        share_used = data["prb_used"] / data["prb_avail"]
        carried = thp / share_used * data["free_prb_share"]
        radio = data["cqi_rate_mbps"] * data["free_prb_share"]
        resources = carried.where((share_used >= MIN_PRB_SHARE) & (thp > 0), radio)
    elif access == "wifi":
        share_used = data["airtime_pct"] / 100.0
        carried = thp / share_used * data["free_airtime_share"]
        radio = data["phy_rate_mbps"] * WIFI_NOMINAL_MAC_EFFICIENCY * data["free_airtime_share"]
        resources = carried.where((share_used >= MIN_AIRTIME_SHARE) & (thp > 0), radio)
    elif access == "lifi":
        up = data["link_up"].fillna(1.0) >= 0.5
        resources = data["phy_rate_mbps"].where(up & (data["phy_rate_mbps"] > 0))
    resources = resources.where(np.isfinite(resources))
    return resources.fillna(from_thp), resources.notna().astype(float)


def _derive(data: pd.DataFrame, access: str) -> None:
    """Per-period quantities computed from the raw KPIs of the same period."""
    if access == "nr":
        cqi = data["cqi"].round().clip(0, len(_CQI_EFFICIENCY) - 1)
        efficiency = pd.Series(
            np.where(cqi.notna(), _CQI_EFFICIENCY[cqi.fillna(0).astype(int)], np.nan),
            index=data.index,
        )
        layers = data["layers"].round().clip(lower=1).fillna(1.0)
        data["cqi_rate_mbps"] = (efficiency * layers * _RATE_PER_LAYER_MBPS).where(cqi >= 1)
        used = data["prb_used"].fillna(0.0)
        others = (data["prb_tot_pct"] / 100 * data["prb_avail"] - used).clip(lower=0)
        free = np.maximum(used, data["prb_avail"] - others.fillna(0.0))
        data["free_prb_share"] = (free / data["prb_avail"]).clip(0, 1)
    elif access == "wifi":
        own = data["airtime_pct"].fillna(0.0)
        others = (data["channel_util_pct"] - own).clip(lower=0)
        data["others_airtime_pct"] = others
        data["free_airtime_share"] = ((100.0 - others) / 100.0).clip(0, 1)


def build_features(frame: pd.DataFrame, access: str) -> npt.NDArray[np.float32]:
    """The model input for every row of ``frame`` (sorted by group, then time)."""
    data = frame.copy()
    for column in (*RAW_COLUMNS[access], SATURATED):
        if column not in data:
            data[column] = np.nan
    for column in RAW_COLUMNS[access]:
        if column != "cell_id":
            data[column] = pd.to_numeric(data[column], errors="coerce")
    _derive(data, access)
    data["_ref"], data["_ref_resources"] = reference_mbps(data, access)
    group = data[GROUP]
    earlier = data.groupby(group, sort=False).shift(1)  # each row sees the period before it
    ref = earlier["_ref"]
    data[REFERENCE] = ref
    by_group = ref.groupby(group, sort=False)
    scale = ref.where(ref > 0)
    data["ref_last2_ratio"] = by_group.shift(1) / scale
    data["ref_mean3_ratio"] = (
        by_group.transform(lambda s: s.rolling(3, min_periods=1).mean()) / scale
    )
    data["ref_mean10_ratio"] = (
        by_group.transform(lambda s: s.rolling(10, min_periods=1).mean()) / scale
    )
    data["ref_min5_ratio"] = by_group.transform(lambda s: s.rolling(5, min_periods=1).min()) / scale
    data["ref_max5_ratio"] = by_group.transform(lambda s: s.rolling(5, min_periods=1).max()) / scale
    data["ref_std5_ratio"] = by_group.transform(lambda s: s.rolling(5, min_periods=2).std()) / scale
    data["ref_from_resources"] = earlier["_ref_resources"]
    for feature in RADIO[access]:
        if feature.name in earlier:
            data[feature.name] = earlier[feature.name]
    if access == "nr":
        before = data.groupby(group, sort=False).shift(2)
        data["snr_delta_db"] = earlier["snr_db"] - before["snr_db"]
        data["rsrp_delta_db"] = earlier["rsrp_dbm"] - before["rsrp_dbm"]
        changed = (earlier["cell_id"] != before["cell_id"]).astype(float)
        unknown = earlier["cell_id"].isna() | before["cell_id"].isna()
        data["handover"] = np.where(unknown, np.nan, changed)
    matrix: npt.NDArray[np.float32] = data[feature_names(access)].to_numpy(dtype=np.float32)
    return matrix


def to_log_ratio(
    target_mbps: npt.NDArray[np.float64], reference: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """The training target: the capacity relative to the reference."""
    return np.asarray(np.log((target_mbps + OFFSET_MBPS) / (reference + OFFSET_MBPS)))


def from_log_ratio(
    log_ratio: npt.NDArray[np.floating], reference: npt.NDArray[np.floating]
) -> npt.NDArray[np.float64]:
    """The model's output in Mbit/s (NaN where there is no reference)."""
    value = (np.asarray(reference, dtype=np.float64) + OFFSET_MBPS) * np.exp(
        np.clip(np.asarray(log_ratio, dtype=np.float64), -20, 20)
    ) - OFFSET_MBPS
    return np.asarray(np.maximum(value, 0.0))
