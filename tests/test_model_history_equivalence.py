"""The ModelEstimator keeps each access's path histories in one array and cuts a fleet's batch
from it; it must predict exactly what the former row-by-row histories predicted.

The reference below is that former code, kept here: each path's periods as a deque of dicts,
the batch's columns built value by value, saturation read from the samples themselves. Both
run the shipped ONNX models on generated fleets whose paths report at different times, miss
periods, lack KPIs, drop their link and carry nothing.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import numpy.typing as npt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.domain import CapacityEstimate, Direction, KpiSample
from models.features import (
    INPUTS_READ,
    SATURATED,
    THROUGHPUT,
    feature_names,
    features_from_columns,
)
from xapp.estimators.kpi import KpiEstimator, reported_cqi, utilisation
from xapp.estimators.model import (
    KPI_COLUMNS,
    LOWER_BOUND_ERROR,
    Z_10_90,
    ModelEstimator,
    _Histories,
)
from xapp.estimators.said import said_of
from xapp.estimators.saturation import (
    HISTORY_PERIODS,
    SATURATED_PERIODS,
    SATURATED_UTILISATION,
    saturated,
)

Key = tuple[str, str, Direction]
DIRECTIONS = [Direction.DOWNLINK, Direction.DOWNLINK, Direction.UPLINK]  # the models: downlink
SHARED = ModelEstimator()  # the shipped models, loaded once


def reference_row(sample: KpiSample) -> dict[str, float]:
    row = {THROUGHPUT: sample.throughput_mbps or 0.0}
    for measurement, column in KPI_COLUMNS[sample.access].items():
        value = sample.measurements.get(measurement)
        row[column] = math.nan if value is None else float(value)
    if sample.access == "nr":
        cqi = reported_cqi(sample.measurements)
        row["cqi"] = math.nan if cqi is None else float(cqi)
    share = utilisation(sample)
    row[SATURATED] = math.nan if share is None else float(share >= SATURATED_UTILISATION)
    return row


class ReferenceModelEstimator:
    """The former histories: a deque of samples and one of dict rows per path."""

    def __init__(self) -> None:
        self.models = SHARED._models
        self.history: dict[Key, deque[KpiSample]] = {}
        self.rows: dict[Key, deque[dict[str, float]]] = {}
        self.latest: dict[Key, CapacityEstimate] = {}

    def update(self, samples: list[KpiSample]) -> None:
        dirty: dict[str, list[Key]] = {}
        for sample in samples:
            if sample.direction != Direction.DOWNLINK or sample.access not in self.models:
                continue
            if sample.throughput_mbps is None:
                continue
            key: Key = (sample.cpe_id, sample.access, sample.direction)
            self.history.setdefault(key, deque(maxlen=HISTORY_PERIODS)).append(sample)
            self.rows.setdefault(key, deque(maxlen=HISTORY_PERIODS)).append(reference_row(sample))
            if key not in dirty.setdefault(key[1], []):
                dirty[key[1]].append(key)
        for access, keys in dirty.items():
            rows: list[dict[str, float]] = []
            groups: list[int] = []
            last_rows = []
            for number, path in enumerate(keys):
                history = self.rows[path]
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
            prediction = self.models[access].predict(features[last_rows])
            column = feature_names(access).index("ref_from_resources")
            from_resources = features[last_rows, column] == 1.0
            for i, path in enumerate(keys):
                latest = self.history[path][-1]
                available = latest.available if latest.available is not None else True
                carried = latest.throughput_mbps or 0.0
                estimate = float(prediction.estimate_mbps[i])
                if not math.isfinite(estimate):
                    estimate, spread, lower_bound = carried, LOWER_BOUND_ERROR * carried, True
                else:
                    spread = float(prediction.upper_mbps[i] - prediction.lower_mbps[i]) / Z_10_90
                    recent = list(self.history[path])[-SATURATED_PERIODS:]
                    lower_bound = not from_resources[i] and not saturated(recent)
                    if lower_bound:
                        estimate = carried
                self.latest[path] = CapacityEstimate(
                    path[0],
                    access,
                    path[2],
                    estimate if available else 0.0,
                    max(spread, 0.0),
                    "model",
                    latest.time_s,
                    available,
                    lower_bound,
                )


def maybe(value: st.SearchStrategy[float]) -> st.SearchStrategy[float | None]:
    return st.one_of(st.none(), value)


def measurements(access: str) -> st.SearchStrategy[dict[str, float | None]]:
    if access == "nr":
        fields = {
            "L1M.SS-SINR": maybe(st.sampled_from([-5.0, 3.5, 12.0, 28.0])),
            "L1M.SS-RSRP": maybe(st.sampled_from([-118.0, -95.5, -70.0])),
            "RRU.PrbUsedDl": maybe(st.sampled_from([0.0, 5.0, 40.0, 120.0, 273.0])),
            "RRU.PrbAvailDl": maybe(st.sampled_from([0.0, 273.0])),
            "RRU.PrbTotDl": maybe(st.sampled_from([0.0, 12.5, 60.0, 100.0])),
            "CARR.AverageLayersDl": maybe(st.sampled_from([1.0, 2.0, 4.0])),
            "CARR.WBCQIDist|distBinX=8": maybe(st.sampled_from([0.0, 3.0])),
            "CARR.WBCQIDist|distBinX=13": maybe(st.sampled_from([0.0, 5.0])),
        }
    elif access == "wifi":
        fields = {
            "WLAN.StaRssi": maybe(st.sampled_from([-88.0, -62.0, -35.0])),
            "WLAN.StaSnr": maybe(st.sampled_from([2.0, 25.0, 55.0])),
            "WLAN.StaMcsDl": maybe(st.sampled_from([3.0, 9.0, 11.0])),
            "WLAN.StaNssDl": maybe(st.sampled_from([1.0, 2.0])),
            "WLAN.StaPhyRateDl": maybe(st.sampled_from([54.0, 600.0, 2401.96])),
            "WLAN.StaAirtime": maybe(st.sampled_from([0.0, 0.1, 4.0, 35.0, 100.0])),
            "WLAN.ChannelUtilization": maybe(st.sampled_from([0.0, 40.0, 100.0])),
        }
    else:
        fields = {
            "LIFI.StaSnr": maybe(st.sampled_from([1.0, 12.0, 28.0])),
            "LIFI.StaPhyRateDl": maybe(st.sampled_from([0.0, 6.0, 12.1, 20.0])),
            "LIFI.LinkState": maybe(st.sampled_from([0.0, 1.0])),
        }
    return st.fixed_dictionaries(fields)


@st.composite
def periods(draw: st.DrawFn) -> list[list[KpiSample]]:
    """A few periods of a small fleet: each path reports in some of them, not all."""
    paths = [(f"cpe-{c}", access) for c in range(draw(st.integers(1, 3))) for access in KPI_COLUMNS]
    out = []
    for tick in range(draw(st.integers(1, 14))):
        batch = []
        for cpe_id, access in paths:
            if not draw(st.booleans()) and tick > 0:
                continue
            values = draw(measurements(access))
            batch.append(
                KpiSample(
                    cpe_id,
                    access,
                    draw(st.sampled_from(DIRECTIONS)),
                    float(tick + 1),
                    1.0,
                    throughput_mbps=draw(maybe(st.sampled_from([0.0, 3.0, 90.0, 400.0]))),
                    available=draw(st.sampled_from([None, None, True, False])),
                    measurements={k: v for k, v in values.items() if v is not None},
                )
            )
        out.append(batch)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(periods())
def test_the_columnar_histories_predict_what_the_row_by_row_ones_did(
    fleet: list[list[KpiSample]],
) -> None:
    estimator = ModelEstimator(SHARED._models)
    reference = ReferenceModelEstimator()
    for tick, batch in enumerate(fleet):
        now_s = float(tick + 1)
        estimator.update(batch, now_s)
        reference.update(batch)
        keys = {(s.cpe_id, s.access, s.direction) for period in fleet for s in period}
        for key in keys:
            assert estimator.estimate(*key, now_s) == reference.latest.get(key), key


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(periods())
def test_estimates_as_numbers_are_the_estimates(fleet: list[list[KpiSample]]) -> None:
    """What the KPI and model estimators keep as numbers for fusion (``said_many``) is their
    estimates, at every period, for paths that reported, did not, or never did; the model's
    numbers asked first (they bring its prediction about themselves)."""
    model = ModelEstimator(SHARED._models)
    kpi = KpiEstimator()
    keys = sorted({(s.cpe_id, s.access, s.direction) for period in fleet for s in period})
    keys.append(("cpe-never", "nr", Direction.DOWNLINK))
    for tick, batch in enumerate(fleet):
        now_s = float(tick + 1)
        for estimator in (kpi, model):
            estimator.update(batch, now_s)
        for estimator in (model, kpi):
            numbers = estimator.said_many(keys)
            assert numbers == [said_of(estimator.estimate(*key, now_s)) for key in keys]


def test_a_batch_of_rows_is_appended_as_one_row_after_another() -> None:
    """``append_many`` gives what appending each row alone gives, a path met twice included."""
    rng = np.random.default_rng(7)
    # paths by their places in the shared slots: 2, 4, 6, 8, 10 (a place with no history
    # between them)
    keys: list[int] = [2 * (1 + i % 5) for i in range(23)]
    width = len(_Histories("wifi").columns)
    rows = [rng.random(width).tolist() for _ in keys]
    said = [rng.random(3).tolist() for _ in keys]
    one_by_one, batched = _Histories("wifi"), _Histories("wifi")
    # batches of five distinct paths, and of six or seven with a path met twice (new paths
    # among them in the first)
    for start, end in ((0, 7), (7, 12), (12, 17), (17, 23)):
        for key, row, newest in zip(keys[start:end], rows[start:end], said[start:end], strict=True):
            one_by_one.append(key, row, newest)
        batched.append_many(np.array(keys[start:end]), rows[start:end], said[start:end])
    assert batched.places() == one_by_one.places() == list(dict.fromkeys(keys))
    for key in dict.fromkeys(keys):
        a, b = one_by_one.recent(np.array([key])), batched.recent(np.array([key]))
        np.testing.assert_array_equal(a.last, b.last)
        np.testing.assert_array_equal(a.reference, b.reference)
        np.testing.assert_array_equal(a.from_resources, b.from_resources)
        # what the features read of the path's whole block, oldest period first
        block = _whole_blocks(batched, np.array([key]))
        width = len(batched.columns)
        np.testing.assert_array_equal(b.last, block[:, -INPUTS_READ:])
        np.testing.assert_array_equal(b.reference, block[:, :, width])
        np.testing.assert_array_equal(b.from_resources, block[:, :, width + 1])
        np.testing.assert_array_equal(a.lengths, b.lengths)
        np.testing.assert_array_equal(a.saturated, b.saturated)
        np.testing.assert_array_equal(a.newest, b.newest)
        # the newest said is the last row's of the path
        last = max(i for i, k in enumerate(keys) if k == key)
        np.testing.assert_array_equal(b.newest[0], said[last])


def _whole_blocks(histories: _Histories, places: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
    """(paths, HISTORY_PERIODS, stored): each path's whole block from its head round, its
    oldest period first (what ``recent`` once handed over)."""
    blocks = histories._block_of[places]
    rounds = (histories._head[blocks][:, None] + np.arange(HISTORY_PERIODS)) % HISTORY_PERIODS
    whole: npt.NDArray[np.float64] = histories._rows[blocks[:, None], rounds]
    return whole
