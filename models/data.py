"""Load training data into the canonical per-period frame that `features.py` reads.

Two sources, told apart by their columns:

- **the real 5G dataset** (`../shared/datasets/raca5g-download`, G-NetTrack Pro CSVs): one trace
  per file, one group per trace. Rules, each counted in the load report: only rows with
  NetworkMode 5G and State D (downloading) are used; `-` placeholders are missing values; of
  rows with the same Timestamp the last is kept; values outside the physical range of their
  column (RSRP −156…−31 dBm, RSRQ −43…20 dB, SNR −30…60 dB, CQI 0…15, RSSI −130…0 dBm, DL_bitrate
  0…10 Gbit/s) become missing; a row without DL_bitrate is dropped. The target is the period's
  DL bit rate: during a bulk download it approximates the capacity the network offered.
- **simulator datasets** (`atsss e2sim dataset`, CSV or Parquet): one group per CPE and access;
  the target is the true capacity, the throughput history is the reported throughput.

Missing radio values stay missing (the gradient-boosted models route them; the linear baseline
imputes the median).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from models.features import GROUP, SATURATED, THROUGHPUT, TIME

TARGET = "target_mbps"
SATURATED_SHARE = 0.8  # of the capacity carried, as the xApp's ModelEstimator counts it
SOURCE = "source"  # "real" (measured traces) or "simulated": the card scores each apart

RACA_REQUIRED = (
    "Timestamp",
    "NetworkMode",
    "State",
    "DL_bitrate",
    "RSRP",
    "RSRQ",
    "SNR",
    "CQI",
    "RSSI",
)
RACA_RANGES = {
    "RSRP": (-156.0, -31.0),
    "RSRQ": (-43.0, 20.0),
    "SNR": (-30.0, 60.0),
    "CQI": (0.0, 15.0),
    "RSSI": (-130.0, 0.0),
    "DL_bitrate": (0.0, 10_000_000.0),
    "Speed": (0.0, 500.0),
}
SIM_COLUMNS = {
    "nr": {
        "DRB.UEThpDl": ("thp", 0.001),
        "L1M.SS-SINR": ("snr_db", 1),
        "L1M.SS-RSRP": ("rsrp_dbm", 1),
        "RRU.PrbUsedDl": ("prb_used", 1),
        "RRU.PrbAvailDl": ("prb_avail", 1),
        "RRU.PrbTotDl": ("prb_tot_pct", 1),
        "CARR.AverageLayersDl": ("layers", 1),
    },
    "wifi": {
        "WLAN.StaThpDl": ("thp", 0.001),
        "WLAN.StaRssi": ("rssi_dbm", 1),
        "WLAN.StaSnr": ("snr_db", 1),
        "WLAN.StaMcsDl": ("mcs", 1),
        "WLAN.StaNssDl": ("nss", 1),
        "WLAN.StaPhyRateDl": ("phy_rate_mbps", 1),
        "WLAN.StaAirtime": ("airtime_pct", 1),
        "WLAN.ChannelUtilization": ("channel_util_pct", 1),
    },
    "lifi": {
        "LIFI.StaThpDl": ("thp", 0.001),
        "LIFI.StaSnr": ("snr_db", 1),
        "LIFI.StaPhyRateDl": ("phy_rate_mbps", 1),
        "LIFI.LinkState": ("link_up", 1),
    },
}


class DataError(ValueError):
    """A file that cannot be used; the message names the file and the column."""


@dataclass
class LoadReport:
    files: list[str] = field(default_factory=list)
    rows_read: int = 0
    rows_used: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def count(self, rule: str, n: int) -> None:
        if n:
            self.counts[rule] = self.counts.get(rule, 0) + int(n)


def load(paths: Sequence[Path], access: str) -> tuple[pd.DataFrame, LoadReport]:
    report = LoadReport()
    frames = []
    for path in _expand(paths):
        frames.append(_load_file(path, access, report))
        report.files.append(str(path))
    if not frames:
        raise DataError("no data files given (CSV or Parquet, or folders holding them)")
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.sort_values([GROUP, TIME], kind="stable").reset_index(drop=True)
    report.rows_used = len(frame)
    return frame, report


def _expand(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix.lower() in (".csv", ".parquet"))
        elif path.exists():
            files.append(path)
        else:
            raise DataError(f"{path}: no such file or folder")
    return files


def _read(path: Path) -> pd.DataFrame:
    try:
        if path.suffix.lower() == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, na_values=["-"], keep_default_na=True, low_memory=False)
    except (OSError, ValueError) as error:
        raise DataError(f"{path}: cannot read: {error}") from error


def _load_file(path: Path, access: str, report: LoadReport) -> pd.DataFrame:
    raw = _read(path)
    report.rows_read += len(raw)
    if "DL_bitrate" in raw.columns or "Timestamp" in raw.columns:
        if access != "nr":
            raise DataError(f"{path}: the real 5G traces train nr models, not {access}")
        return _load_raca(path, raw, report)
    if "capacity_dl_mbps" in raw.columns:
        return _load_simulated(path, raw, access, report)
    raise DataError(
        f"{path}: neither a G-NetTrack trace (Timestamp, DL_bitrate, …) nor a simulator dataset "
        "(capacity_dl_mbps, …)"
    )


def _load_raca(path: Path, raw: pd.DataFrame, report: LoadReport) -> pd.DataFrame:
    missing = [c for c in RACA_REQUIRED if c not in raw.columns]
    if missing:
        raise DataError(
            f"{path}: column {missing[0]} is missing (needed: {', '.join(RACA_REQUIRED)})"
        )
    placeholders = int(raw[list(RACA_REQUIRED)].isna().sum().sum())
    report.count("placeholder '-' or empty → missing", placeholders)
    times = pd.to_datetime(raw["Timestamp"], format="%Y.%m.%d_%H.%M.%S", errors="coerce")
    bad_times = int(times.isna().sum())
    if bad_times == len(raw):
        raise DataError(f"{path}: column Timestamp: no value in the yyyy.mm.dd_HH.MM.SS format")
    frame = raw.assign(_time=times).dropna(subset=["_time"])
    report.count("unreadable Timestamp → row dropped", bad_times)
    duplicates = int(frame["_time"].duplicated(keep="last").sum())
    if duplicates:
        report.warnings.append(
            f"{path}: column Timestamp: {duplicates} repeated seconds, the last row of each kept"
        )
    report.count("repeated Timestamp → last row kept", duplicates)
    frame = frame.drop_duplicates("_time", keep="last")
    for column, (low, high) in RACA_RANGES.items():
        if column not in frame:
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        outside = values.notna() & ((values < low) | (values > high))
        if outside.any():
            report.warnings.append(
                f"{path}: column {column}: {int(outside.sum())} values outside "
                f"{low:g}..{high:g} → missing"
            )
        report.count(f"{column} out of range → missing", int(outside.sum()))
        frame[column] = values.where(~outside)
    selected = frame[(frame["NetworkMode"] == "5G") & (frame["State"] == "D")]
    report.count("not 5G or not downloading → row dropped", len(frame) - len(selected))
    no_target = int(selected["DL_bitrate"].isna().sum())
    report.count("no DL_bitrate → row dropped", no_target)
    selected = selected.dropna(subset=["DL_bitrate"])
    start = selected["_time"].min()
    out = pd.DataFrame(
        {
            GROUP: path.stem,
            TIME: (selected["_time"] - start).dt.total_seconds(),
            THROUGHPUT: selected["DL_bitrate"] / 1000.0,
            TARGET: selected["DL_bitrate"] / 1000.0,
            "rsrp_dbm": selected["RSRP"],
            "rsrq_db": selected["RSRQ"],
            "snr_db": selected["SNR"],
            "cqi": selected["CQI"],
            "rssi_dbm": selected["RSSI"],
            "speed_kmh": selected.get("Speed", np.nan),
            "cell_id": selected.get("CellID", np.nan),
            # a bulk download: what the device got is what the network offered it
            SATURATED: 1.0,
            SOURCE: "real",
        }
    )
    return out.reset_index(drop=True)


def _load_simulated(path: Path, raw: pd.DataFrame, access: str, report: LoadReport) -> pd.DataFrame:
    for column in ("time_s", "cpe_id", "access", "capacity_dl_mbps"):
        if column not in raw.columns:
            raise DataError(f"{path}: column {column} is missing")
    rows = raw[raw["access"] == access]
    report.count(f"other accesses than {access} → row dropped", len(raw) - len(rows))
    if rows.empty:
        raise DataError(f"{path}: column access: no rows for {access}")
    mapping = SIM_COLUMNS[access]
    missing = [c for c in mapping if c not in rows.columns]
    if missing:
        raise DataError(f"{path}: column {missing[0]} is missing for {access}")
    out = pd.DataFrame(
        {
            GROUP: f"{path.stem}/" + rows["cpe_id"].astype(str),
            TIME: rows["time_s"],
            TARGET: rows["capacity_dl_mbps"],
            SOURCE: "simulated",
        }
    )
    for column, (name, scale) in mapping.items():
        out[THROUGHPUT if name == "thp" else name] = (
            pd.to_numeric(rows[column], errors="coerce") * scale
        )
    # A dataset written with --utilisation below 1 holds back every station; the xApp tells
    # saturation from the KPIs, the loader from the truth it has.
    out[SATURATED] = (out[THROUGHPUT] >= SATURATED_SHARE * out[TARGET]).astype(float)
    if "available" in rows:
        down = ~rows["available"].astype(bool)
        # availability is the link state's business; a period the path was down teaches
        # nothing about its capacity
        out.loc[down.to_numpy(), TARGET] = np.nan
        report.count("path down → no target", int(down.sum()))
    if access == "nr" and "CARR.WBCQIDist.bin" in rows:
        out["cqi"] = rows["CARR.WBCQIDist.bin"] - 1
    duplicates = int(out.duplicated([GROUP, TIME]).sum())
    if duplicates:
        report.warnings.append(
            f"{path}: columns cpe_id/time_s: {duplicates} repeated periods, the last kept"
        )
        report.count("repeated period → last kept", duplicates)
        out = out.drop_duplicates([GROUP, TIME], keep="last")
    return out.reset_index(drop=True)
