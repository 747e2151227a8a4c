"""ModelEstimator: the shipped ONNX capacity models, served with onnxruntime.

Per path it keeps the recent KPI samples, turns them into exactly the features the model was
trained on (models/features.py), and predicts the capacity of the next period with a 10–90 %
interval; the interval becomes the estimate's standard deviation, which the uncertainty-aware
policy reads. The features read the rate per resource the path used and the resources free to
it, not what the weights let it carry, so an estimate stands on its own. Only where the node
reports no resource KPIs and the path was held back is the estimate the carried throughput,
flagged `lower_bound`. All paths that received samples since the last prediction are
predicted in one batch per access. The shipped models predict downlink capacity; uplink is
left to the other estimators (fusion).
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Mapping, Sequence

import numpy as np

from core.domain import CapacityEstimate, Direction, KpiSample
from models.features import SATURATED, THROUGHPUT, feature_names, features_from_columns
from models.runtime import ModelError, OnnxCapacityModel
from xapp.estimators.kpi import reported_cqi, utilisation
from xapp.estimators.saturation import (
    HISTORY_PERIODS,
    SATURATED_PERIODS,
    SATURATED_UTILISATION,
    saturated,
)

# The models learnt from saturating transfers; below SATURATED_UTILISATION in the history they
# read a held-back throughput, so their prediction only bounds the capacity from below.
LOWER_BOUND_ERROR = 0.5  # of a carried throughput standing in for the capacity
Z_10_90 = 2 * 1.2816  # width of the 10–90 % interval of a normal distribution, in sigmas

# KPI measurement (catalogue name, canonical units) → the feature input column
KPI_COLUMNS: dict[str, dict[str, str]] = {
    "nr": {
        "L1M.SS-SINR": "snr_db",
        "L1M.SS-RSRP": "rsrp_dbm",
        "RRU.PrbUsedDl": "prb_used",
        "RRU.PrbAvailDl": "prb_avail",
        "RRU.PrbTotDl": "prb_tot_pct",
        "CARR.AverageLayersDl": "layers",
    },
    "wifi": {
        "WLAN.StaRssi": "rssi_dbm",
        "WLAN.StaSnr": "snr_db",
        "WLAN.StaMcsDl": "mcs",
        "WLAN.StaNssDl": "nss",
        "WLAN.StaPhyRateDl": "phy_rate_mbps",
        "WLAN.StaAirtime": "airtime_pct",
        "WLAN.ChannelUtilization": "channel_util_pct",
    },
    "lifi": {
        "LIFI.StaSnr": "snr_db",
        "LIFI.StaPhyRateDl": "phy_rate_mbps",
        "LIFI.LinkState": "link_up",
    },
}

Key = tuple[str, str, Direction]

log = logging.getLogger(__name__)


class ModelEstimator:
    name = "model"

    def __init__(self, models: Mapping[str, OnnxCapacityModel] | None = None) -> None:
        # access → why this estimator cannot serve it (a model missing, corrupt, for another
        # feature set, or producing garbage); fusion then carries on with the other estimators
        self.unavailable: dict[str, str] = {}
        self.inferences = 0  # batched predictions, and the time they took (for metrics)
        self.inference_s = 0.0
        if models is None:
            models = self._load_shipped()
        self._models = dict(models)
        self._history: dict[Key, deque[KpiSample]] = {}
        # the same periods as canonical feature inputs, converted once per sample
        self._rows: dict[Key, deque[dict[str, float]]] = {}
        self._dirty: set[Key] = set()
        self._latest: dict[Key, CapacityEstimate] = {}

    def describe(self) -> list[dict[str, object]]:
        """Which model answers for each access (or why none does)."""
        found: list[dict[str, object]] = []
        for access in KPI_COLUMNS:
            model = self._models.get(access)
            found.append(
                {
                    "access": access,
                    "model": None if model is None else model.name,
                    "version": None if model is None else model.card.get("version"),
                    "card": None if model is None else str(model.card_path),
                    "chosen": None if model is None else model.card.get("chosen"),
                    "unavailable": self.unavailable.get(access),
                }
            )
        return found

    def swap(self, access: str, model: OnnxCapacityModel) -> None:
        """Answer for ``access`` with ``model`` from the next prediction on (a retrained or
        another version); the paths' histories stay, so no warm-up is lost."""
        if model.access != access:
            raise ModelError(f"{model.card_path}: a model for {model.access}, not {access}")
        self._models[access] = model
        self.unavailable.pop(access, None)
        self._dirty.update(key for key in self._history if key[1] == access)

    def _load_shipped(self) -> dict[str, OnnxCapacityModel]:
        loaded = {}
        for access in KPI_COLUMNS:
            try:
                loaded[access] = OnnxCapacityModel.shipped(access)
            except ModelError as error:
                self._disable(access, str(error))
        return loaded

    def _disable(self, access: str, reason: str) -> None:
        if self.unavailable.get(access) != reason:
            log.error("model estimator unavailable for %s: %s", access, reason)
        self.unavailable[access] = reason

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        for sample in samples:
            if sample.direction != Direction.DOWNLINK or sample.access not in self._models:
                continue
            if sample.throughput_mbps is None:
                continue
            key = (sample.cpe_id, sample.access, sample.direction)
            self._history.setdefault(key, deque(maxlen=HISTORY_PERIODS)).append(sample)
            self._rows.setdefault(key, deque(maxlen=HISTORY_PERIODS)).append(_row(sample))
            self._dirty.add(key)

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        if self._dirty:
            self._predict_dirty()
        return self._latest.get((cpe_id, access, direction))

    def _predict_dirty(self) -> None:
        by_access: dict[str, list[Key]] = {}
        for key in self._dirty:
            by_access.setdefault(key[1], []).append(key)
        self._dirty.clear()
        for access, keys in by_access.items():
            # each path's periods, then one row for the period to predict (the features of a
            # row read only the periods before it)
            rows: list[dict[str, float]] = []
            groups: list[int] = []
            last_rows = []
            for number, key in enumerate(keys):
                history = self._rows[key]
                rows += history
                rows.append(dict(history[-1], **{THROUGHPUT: math.nan}))
                groups += [number] * (len(history) + 1)
                last_rows.append(len(rows) - 1)
            names = {name for row in rows for name in row}
            columns = {
                name: np.array([row.get(name, math.nan) for row in rows], dtype=np.float64)
                for name in names
            }
            features = features_from_columns(columns, np.array(groups, dtype=np.int64), access)
            started = time.perf_counter()
            try:
                prediction = self._models[access].predict(features[last_rows])
            except ModelError as error:
                # Garbage out: say so and give no estimate, rather than a wrong one.
                self._disable(access, str(error))
                for key in keys:
                    self._latest.pop(key, None)
                continue
            self.inference_s += time.perf_counter() - started
            self.inferences += 1
            self.unavailable.pop(access, None)
            column = feature_names(access).index("ref_from_resources")
            from_resources = features[last_rows, column] == 1.0
            for i, key in enumerate(keys):
                latest = self._history[key][-1]
                available = latest.available if latest.available is not None else True
                carried = latest.throughput_mbps or 0.0
                estimate = float(prediction.estimate_mbps[i])
                if not math.isfinite(estimate):
                    # Nothing the model could scale (no resource KPIs, no saturated period):
                    # what the path carried is all that is known.
                    estimate, spread, lower_bound = carried, LOWER_BOUND_ERROR * carried, True
                else:
                    spread = float(prediction.upper_mbps[i] - prediction.lower_mbps[i]) / Z_10_90
                    # A reference from throughput alone bounds a held-back path from below only.
                    lower_bound = not from_resources[i] and not self._saturated(key)
                    if lower_bound:
                        estimate = carried
                self._latest[key] = CapacityEstimate(
                    cpe_id=key[0],
                    access=access,
                    direction=key[2],
                    capacity_mbps=estimate if available else 0.0,
                    stddev_mbps=max(spread, 0.0),
                    source=self.name,
                    measured_at_s=latest.time_s,
                    available=available,
                    lower_bound=lower_bound,
                )

    def _saturated(self, key: Key) -> bool:
        """Did the path carry what it could over the recent history (as far as KPIs tell)?"""
        return saturated(list(self._history[key])[-SATURATED_PERIODS:])


def _row(sample: KpiSample) -> dict[str, float]:
    """One period of a path as the canonical feature inputs (models/features.py)."""
    row = {THROUGHPUT: sample.throughput_mbps or 0.0}
    for measurement, column in KPI_COLUMNS[sample.access].items():
        value = sample.measurements.get(measurement)
        row[column] = math.nan if value is None else float(value)
    if sample.access == "nr":
        row["cqi"] = _cqi(sample.measurements)
    share = utilisation(sample)
    row[SATURATED] = math.nan if share is None else float(share >= SATURATED_UTILISATION)
    return row


def _cqi(measurements: Mapping[str, float]) -> float:
    cqi = reported_cqi(measurements)
    return math.nan if cqi is None else float(cqi)
