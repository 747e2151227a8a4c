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

from collections.abc import Callable
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

FloatArray = npt.NDArray[np.float64]
_NR_CARRIER = nr_standard.NrCarrier()
_CQI_EFFICIENCY = np.array([row[2] for row in nr_standard.CQI_TABLE_256QAM])
_RATE_PER_LAYER_MBPS = _NR_CARRIER.rate_mbps(1.0, 1, True)  # rate_mbps is linear in both


def feature_list(access: str) -> tuple[Feature, ...]:
    if access not in RADIO:
        raise ValueError(f"no features defined for access {access!r} (nr, wifi, lifi)")
    return HISTORY + RADIO[access]


def feature_names(access: str) -> list[str]:
    return [f.name for f in feature_list(access)]


Columns = dict[str, npt.NDArray[np.float64]]


def _nan_where(condition: npt.NDArray[np.bool_], values: npt.NDArray[np.float64]) -> FloatArray:
    return np.where(condition, values, np.nan)


def reference_mbps(columns: Columns, access: str) -> tuple[FloatArray, FloatArray]:
    """Each period's reference capacity and whether (1/0) it came from resource KPIs.

    ``columns`` hold the canonical per-period values and the derived ones `_derive` adds."""
    thp = columns[THROUGHPUT]
    saturated = np.nan_to_num(columns[SATURATED], nan=1.0) >= 0.5
    with np.errstate(divide="ignore", invalid="ignore"):
        from_thp = _nan_where(saturated & (thp > 0), thp)
        resources = np.full(len(thp), np.nan)
        if access == "nr":
            share_used = columns["prb_used"] / columns["prb_avail"]
            carried = thp / share_used * columns["free_prb_share"]
            radio = columns["cqi_rate_mbps"] * columns["free_prb_share"]
            resources = np.where((share_used >= MIN_PRB_SHARE) & (thp > 0), carried, radio)
        elif access == "wifi":
            share_used = columns["airtime_pct"] / 100.0
            carried = thp / share_used * columns["free_airtime_share"]
            radio = (
                columns["phy_rate_mbps"]
                * WIFI_NOMINAL_MAC_EFFICIENCY
                * columns["free_airtime_share"]
            )
            resources = np.where((share_used >= MIN_AIRTIME_SHARE) & (thp > 0), carried, radio)
        elif access == "lifi":
            up = np.nan_to_num(columns["link_up"], nan=1.0) >= 0.5
            phy = columns["phy_rate_mbps"]
            resources = _nan_where(up & (phy > 0), phy)
    resources = _nan_where(np.isfinite(resources), resources)
    known = np.isfinite(resources)
    return np.where(known, resources, from_thp), known.astype(np.float64)


def _derive(columns: Columns, access: str) -> None:
    """Per-period quantities computed from the raw KPIs of the same period."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if access == "nr":
            cqi = np.clip(np.round(columns["cqi"]), 0, len(_CQI_EFFICIENCY) - 1)
            efficiency = _nan_where(
                np.isfinite(cqi), _CQI_EFFICIENCY[np.nan_to_num(cqi, nan=0).astype(int)]
            )
            layers = np.nan_to_num(np.maximum(np.round(columns["layers"]), 1), nan=1.0)
            columns["cqi_rate_mbps"] = _nan_where(
                cqi >= 1, efficiency * layers * _RATE_PER_LAYER_MBPS
            )
            used = np.nan_to_num(columns["prb_used"], nan=0.0)
            others = np.maximum(columns["prb_tot_pct"] / 100 * columns["prb_avail"] - used, 0)
            free = np.maximum(used, columns["prb_avail"] - np.nan_to_num(others, nan=0.0))
            columns["free_prb_share"] = np.clip(free / columns["prb_avail"], 0, 1)
        elif access == "wifi":
            own = np.nan_to_num(columns["airtime_pct"], nan=0.0)
            others = np.maximum(columns["channel_util_pct"] - own, 0)
            columns["others_airtime_pct"] = others
            columns["free_airtime_share"] = np.clip((100.0 - others) / 100.0, 0, 1)


def _earlier(
    values: FloatArray, position: npt.NDArray[np.int64], at: npt.NDArray[np.int64], k: int
) -> FloatArray:
    """For the rows ``at``: ``values`` k periods back in the same group (NaN before the
    group's start); rows of a group are consecutive, ``position`` numbers them from 0."""
    back = at - k
    return _nan_where(position[at] >= k, values[np.maximum(back, 0)])


WINDOW = 10  # the longest history a feature reads (ref_mean10_ratio)


def _features_of_rows(
    earlier: Callable[[FloatArray, int], FloatArray],
    window: FloatArray,
    data: Columns,
    from_resources: FloatArray,
    access: str,
) -> Columns:
    """Each feature of the rows asked for, by name: ``earlier(values, k)`` reads a per-period
    column k periods before each of them (NaN where the path has no such period), and
    ``window`` holds the reference 1 to WINDOW periods before each (column k - 1)."""
    out: Columns = {}
    last = window[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = _nan_where(last > 0, last)
        out[REFERENCE] = last
        out["ref_last2_ratio"] = window[:, 1] / scale
        # (all-NaN windows give NaN, as meant)
        out["ref_mean3_ratio"] = _nan_mean(window[:, :3]) / scale
        out["ref_mean10_ratio"] = _nan_mean(window) / scale
        five = window[:, :5]
        out["ref_min5_ratio"] = np.fmin.reduce(five, axis=1) / scale
        out["ref_max5_ratio"] = np.fmax.reduce(five, axis=1) / scale
        counted = np.sum(np.isfinite(five), axis=1)
        std = _nan_where(counted >= 2, _nan_std(five))
        out["ref_std5_ratio"] = std / scale
    out["ref_from_resources"] = earlier(from_resources, 1)
    for feature in RADIO[access]:
        if feature.name in data:
            out[feature.name] = earlier(data[feature.name], 1)
    if access == "nr":
        for name, raw in (("snr_delta_db", "snr_db"), ("rsrp_delta_db", "rsrp_dbm")):
            out[name] = earlier(data[raw], 1) - earlier(data[raw], 2)
        cell, before = earlier(data["cell_id"], 1), earlier(data["cell_id"], 2)
        out["handover"] = _nan_where(
            np.isfinite(cell) & np.isfinite(before), (cell != before).astype(np.float64)
        )
    return out


# np.nanmean and np.nanstd along rows, with the same numpy operations in the same order as
# numpy's own (numpy/lib/_nanfunctions_impl.py: the NaN put to 0 in a copy, the counts and
# sums over the rows, the division in place), so the same bits, without their checks and
# warnings, which cost more than the sums on a step's few thousand rows of five or ten
# (tests/test_models.py holds them to numpy's functions). np.nanmin and np.nanmax are
# np.fmin and np.fmax reduced, which is what numpy runs for them.


def _nan_mean(values: FloatArray) -> FloatArray:
    missing = np.isnan(values)
    filled = np.where(missing, 0.0, values)
    count = np.sum(~missing, axis=1, dtype=np.intp)
    total = np.sum(filled, axis=1)
    return np.asarray(np.divide(total, count, out=total, casting="unsafe"))


def _nan_std(values: FloatArray) -> FloatArray:
    """np.nanstd(values, axis=1, ddof=1): NaN where fewer than two values are known."""
    missing = np.isnan(values)
    filled = np.where(missing, 0.0, values)
    count = np.asarray(np.sum(~missing, axis=1, dtype=np.intp, keepdims=True))
    mean = np.sum(filled, axis=1, keepdims=True)
    np.divide(mean, count, out=mean, casting="unsafe")
    np.subtract(filled, mean, out=filled, casting="unsafe")
    np.copyto(filled, 0.0, where=missing)
    np.multiply(filled, filled, out=filled)
    variance = np.sum(filled, axis=1)
    freedom = count[:, 0] - 1
    np.divide(variance, freedom, out=variance, casting="unsafe")
    variance[freedom <= 0] = np.nan
    return np.asarray(np.sqrt(variance, out=variance))


def features_from_columns(
    columns: Columns,
    groups: npt.NDArray[np.int64],
    access: str,
    rows: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.float32]:
    """The model input for every row; ``groups`` numbers each row's path, rows of one path in
    time order (they need not be adjacent). The numpy core of `build_features`, which the
    estimator calls directly on each period. ``rows``: the input for these rows only, in this
    order (each still read with its path's earlier rows): a running estimator predicts each
    path's newest period only, and the windows over the ten before it cost most."""
    n = len(groups)
    data: Columns = {
        name: np.asarray(columns.get(name, np.full(n, np.nan)), dtype=np.float64)
        for name in (*RAW_COLUMNS[access], SATURATED, THROUGHPUT)
    }
    order = np.argsort(groups, kind="stable")
    data = {name: values[order] for name, values in data.items()}
    sorted_groups = groups[order]
    starts = np.r_[True, sorted_groups[1:] != sorted_groups[:-1]] if n else np.zeros(0, bool)
    start_index = np.maximum.accumulate(np.where(starts, np.arange(n), 0)) if n else starts
    position = np.arange(n) - start_index
    _derive(data, access)
    reference, from_resources = reference_mbps(data, access)
    # where the features are wanted, as places in the sorted rows
    if rows is None:
        at = np.arange(n)
    else:
        sorted_place = np.empty(n, dtype=np.int64)
        sorted_place[order] = np.arange(n)
        at = sorted_place[rows]

    def earlier(values: FloatArray, k: int) -> FloatArray:
        return _earlier(values, position, at, k)

    window = np.stack([earlier(reference, k) for k in range(1, WINDOW + 1)], axis=1)
    out = _features_of_rows(earlier, window, data, from_resources, access)
    matrix = np.empty((len(at), len(feature_list(access))), dtype=np.float32)
    for i, name in enumerate(feature_names(access)):
        if rows is None:
            matrix[order, i] = out[name]
        else:
            matrix[:, i] = out[name]
    return matrix


# What a running estimator may keep with each period's inputs (``references_of_rows``), so that
# a step derives the reference of its newest period only rather than of its whole window.
STORED_REFERENCE = "period_reference_mbps"
STORED_FROM_RESOURCES = "period_from_resources"


def references_of_rows(
    rows: npt.NDArray[np.float64], names: tuple[str, ...], access: str
) -> npt.NDArray[np.float64]:
    """(rows, 2): each period's reference and whether it came from resource KPIs, for rows of
    per-period inputs named ``names`` (inputs they lack count as unknown): what
    ``features_from_blocks`` reads back as STORED_REFERENCE and STORED_FROM_RESOURCES. Every
    operation is of one period's values alone, so a row gives the same bits alone or among
    others."""
    table = np.asarray(rows, dtype=np.float64).reshape(-1, len(names))
    data = _inputs_of(table, names, access)
    _derive(data, access)
    reference, from_resources = reference_mbps(data, access)
    return np.column_stack([reference, from_resources])


def _inputs_of(table: npt.NDArray[np.float64], names: tuple[str, ...], access: str) -> Columns:
    """The canonical per-period inputs as columns of ``table`` (rows × ``names``), NaN where
    ``names`` lacks one."""
    return {
        name: (
            np.ascontiguousarray(table[:, names.index(name)])
            if name in names
            else np.full(len(table), np.nan)
        )
        for name in (*RAW_COLUMNS[access], SATURATED, THROUGHPUT)
    }


def features_from_blocks(
    blocks: npt.NDArray[np.float64],
    names: tuple[str, ...],
    count: npt.NDArray[np.int64],
    access: str,
) -> npt.NDArray[np.float32]:
    """The model input for the period after each path's last: ``features_from_columns`` of
    that one row per path, from the paths' recent periods kept as blocks (paths, periods,
    inputs named ``names``; a path's ``count`` real periods end its block, newest last). A
    running estimator keeps its histories so (xapp/estimators/model.py): read in place, they
    need neither flattening into rows nor sorting by path, and the row predicted reads only
    the periods before it. Where ``names`` hold STORED_REFERENCE and STORED_FROM_RESOURCES
    (``references_of_rows`` of each period, kept as it came), the window reads them, and only
    the last two periods' inputs are derived again (``features_from_kept``). The same IEEE
    operations on the same values in the same order as ``features_from_columns``:
    tests/test_models.py holds the two equal bit for bit."""
    paths, periods, _ = blocks.shape
    if periods < WINDOW:
        raise ValueError(f"blocks of {periods} periods: the features read {WINDOW} back")
    if STORED_REFERENCE in names and STORED_FROM_RESOURCES in names:
        return features_from_kept(
            blocks[:, periods - INPUTS_READ :, :],
            names,
            count,
            blocks[:, :, names.index(STORED_REFERENCE)],
            blocks[:, :, names.index(STORED_FROM_RESOURCES)],
            access,
        )
    # Without the references kept: every period's inputs derived, and its reference.
    data = _inputs_of(blocks.reshape(paths * periods, len(names)), names, access)
    _derive(data, access)
    flat_reference, flat_from = reference_mbps(data, access)
    return _features_of_recent(
        data,
        periods,
        flat_reference.reshape(paths, periods),
        flat_from.reshape(paths, periods),
        count,
        access,
    )


# The periods whose inputs the features derive again where the references are kept: the radio
# one back, and its change two back.
INPUTS_READ = 2


def features_from_kept(
    last: npt.NDArray[np.float64],
    names: tuple[str, ...],
    count: npt.NDArray[np.int64],
    reference: npt.NDArray[np.float64],
    from_resources: npt.NDArray[np.float64],
    access: str,
) -> npt.NDArray[np.float32]:
    """``features_from_blocks`` of blocks with the references kept, given as only what it
    reads of them: the last INPUTS_READ periods' inputs (paths, INPUTS_READ, ``names``), and
    every period's STORED_REFERENCE and STORED_FROM_RESOURCES (paths, periods). A fleet's
    histories hand over these parts rather than whole blocks: a fifth of the bytes."""
    paths, read, _ = last.shape
    periods = reference.shape[1]
    if periods < WINDOW or read != INPUTS_READ:
        raise ValueError(
            f"{read} periods of inputs and {periods} of references: the features read "
            f"{INPUTS_READ} and {WINDOW} back"
        )
    data = _inputs_of(last.reshape(paths * read, len(names)), names, access)
    _derive(data, access)
    return _features_of_recent(data, read, reference, from_resources, count, access)


def _features_of_recent(
    data: Columns,
    read: int,
    reference: npt.NDArray[np.float64],
    from_resources: npt.NDArray[np.float64],
    count: npt.NDArray[np.int64],
    access: str,
) -> npt.NDArray[np.float32]:
    """The features from the last ``read`` periods' derived inputs (``data``, path after
    path) and every period's reference (paths, periods; a path's ``count`` real periods at
    the end, newest last)."""
    paths, periods = reference.shape
    # a period k back from the one predicted: the block's k-th row from its end, where real
    real = np.arange(periods)[None, :] >= (periods - count)[:, None]

    def earlier(values: FloatArray, k: int) -> FloatArray:
        if values.ndim == 1:  # (one of ``data``: the periods read)
            values = values.reshape(paths, read)
        return _nan_where(real[:, periods - k], values[:, values.shape[1] - k])

    back = periods - np.arange(1, WINDOW + 1)  # the window's periods, 1 to WINDOW back
    window = np.where(real[:, back], reference[:, back], np.nan)
    out = _features_of_rows(earlier, window, data, from_resources, access)
    matrix = np.empty((paths, len(feature_list(access))), dtype=np.float32)
    for i, name in enumerate(feature_names(access)):
        matrix[:, i] = out[name]
    return matrix


def build_features(frame: pd.DataFrame, access: str) -> npt.NDArray[np.float32]:
    """The model input for every row of ``frame`` (the rows of each group in time order)."""
    columns: Columns = {}
    for name in (*RAW_COLUMNS[access], SATURATED, THROUGHPUT):
        if name not in frame:
            continue
        values = frame[name]
        if name == "cell_id":
            # a cell identity is a label: equal or not is all the features ask of it
            codes, _ = pd.factorize(values)
            columns[name] = np.where(codes >= 0, codes, np.nan).astype(np.float64)
        else:
            columns[name] = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    groups, _ = pd.factorize(frame[GROUP])
    return features_from_columns(columns, groups.astype(np.int64), access)


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
