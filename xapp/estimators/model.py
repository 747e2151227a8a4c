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
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from core.domain import MAX_CAPACITY_MBPS, CapacityEstimate, Direction, KpiSample
from core.rowwise import row_all, row_any
from core.slots import Places, Slots, grown
from models.features import (
    INPUTS_READ,
    SATURATED,
    STORED_FROM_RESOURCES,
    STORED_REFERENCE,
    THROUGHPUT,
    feature_names,
    features_from_kept,
    references_of_rows,
)
from models.runtime import ModelError, OnnxCapacityModel, Prediction
from xapp.estimators.columns import Group, columns_of, places_of_paths
from xapp.estimators.kpi import reported_cqi, reported_cqis_of, utilisation, utilisation_of
from xapp.estimators.said import ESTIMATE, LOWER_BOUND, KeptEstimates
from xapp.estimators.saturation import (
    HISTORY_PERIODS,
    SATURATED_PERIODS,
    SATURATED_UTILISATION,
)
from xapp.ports import Said

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
FloatRows = npt.NDArray[np.float64]  # (rows, feature inputs)

log = logging.getLogger(__name__)


class ModelEstimator:
    name = "model"

    def __init__(
        self,
        models: Mapping[str, OnnxCapacityModel] | None = None,
        slots: Slots[Key] | None = None,
    ) -> None:
        """``slots``: the fleet's paths' places, shared with the other estimators."""
        # access → why this estimator cannot serve it (a model missing, corrupt, for another
        # feature set, or producing garbage); fusion then carries on with the other estimators
        self.unavailable: dict[str, str] = {}
        # access → the paths whose forecast the last prediction refused as garbage, and why
        self.refused: dict[str, str] = {}
        self.inferences = 0  # batched predictions, and the time they took (for metrics)
        self.inference_s = 0.0
        if models is None:
            models = self._load_shipped()
        self._models = dict(models)
        # Each path's recent periods as canonical feature inputs, converted once per sample,
        # one table per access: a fleet's batch is then cut from arrays, not built row by row.
        self._histories = {access: _Histories(access) for access in KPI_COLUMNS}
        # Per access, the places of the paths with a period not yet predicted from (a
        # dictionary as an ordered set).
        self._dirty: dict[str, dict[int, None]] = {access: {} for access in KPI_COLUMNS}
        self._kept = KeptEstimates(self.name, slots)  # each path's newest estimate
        # the paths' places, for the histories too (a step's are looked up once for all)
        self._slots = self._kept.slots

    def describe(self) -> list[dict[str, object]]:
        """Which model answers for each access (or why none does, or for which paths not)."""
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
                    # the paths whose forecasts the last prediction refused, and why
                    "refused": self.refused.get(access),
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
        self._dirty[access].update(dict.fromkeys(self._histories[access].places()))

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

    def _note_refused(
        self, access: str, places: npt.NDArray[np.intp], prediction: Prediction
    ) -> None:
        """Say once when forecasts start being refused for some paths (their estimate is then
        what they carried), and when none are any more."""
        if prediction.refused_rows:
            count = len(prediction.refused_rows)
            if access not in self.refused:
                first = self._slots.keys_at(places[list(prediction.refused_rows[:3])].tolist())
                some = ", ".join(key[0] for key in first)
                log.warning(
                    "model forecasts refused for %d %s path(s) (CPEs %s%s): %s",
                    count,
                    access,
                    some,
                    ", ..." if count > 3 else "",
                    prediction.refused_reason,
                )
            self.refused[access] = f"{count} path(s): {prediction.refused_reason}"
        elif self.refused.pop(access, None) is not None:
            log.info("model forecasts for %s taken for every path again", access)

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        # Each access's downlink samples that carried a throughput, read from the step's
        # columns (``_rows`` of them all at once; ``_row`` is the one-sample reference).
        columns = columns_of(samples)
        step_places: npt.NDArray[np.intp] | None = None
        for (access, direction), group in columns.groups.items():
            if direction != Direction.DOWNLINK or access not in self._models:
                continue
            # a throughput beyond any access is a wrong report, not a period to learn from
            throughput = group.throughput
            carried = ~np.isnan(throughput) & ~(throughput > MAX_CAPACITY_MBPS)
            if not carried.any():
                continue
            if step_places is None:
                step_places = places_of_paths(samples, self._slots)
            chosen = np.flatnonzero(carried)
            places = step_places[columns.places[(access, direction)][chosen]]
            self._dirty[access].update(dict.fromkeys(places.tolist()))
            # what the newest period said: the node's link state, what it carried (as
            # ``throughput or 0.0``: -0.0 too) and when
            said = throughput[chosen]
            newest = np.column_stack(
                [group.down[chosen], np.where(said == 0, 0.0, said), group.time_s[chosen]]
            )
            self._histories[access].append_many(places, _rows(group, carried), newest)

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        if any(self._dirty.values()):
            self._predict_dirty()
        return self._kept.estimate((cpe_id, access, direction))

    def said_many(self, paths: Sequence[Key]) -> list[Said]:
        if any(self._dirty.values()):
            self._predict_dirty()
        return self._kept.said_many(paths)

    def said_rows(self, paths: Sequence[Key] | Places[Key]) -> npt.NDArray[np.float64]:
        if any(self._dirty.values()):
            self._predict_dirty()
        return self._kept.said_rows(paths)

    def _predict_dirty(self) -> None:
        for access, dirty in self._dirty.items():
            if not dirty:
                continue
            places = np.fromiter(dirty, np.intp, len(dirty))
            dirty.clear()
            # each path's periods, then one row for the period to predict (the features of a
            # row read only the periods before it)
            histories = self._histories[access]
            recent = histories.recent(places)
            # the input of the period to predict, read from the periods before it
            features = features_from_kept(
                recent.last,
                histories.stored,
                recent.lengths,
                recent.reference,
                recent.from_resources,
                access,
            )
            started = time.perf_counter()
            try:
                prediction = self._models[access].predict(features)
            except ModelError as error:
                # Garbage out: say so and give no estimate, rather than a wrong one.
                self._disable(access, str(error))
                for key in self._slots.keys_at(places.tolist()):
                    self._kept.drop(key)
                continue
            self.inference_s += time.perf_counter() - started
            self.inferences += 1
            self.unavailable.pop(access, None)
            self._note_refused(access, places, prediction)
            column = feature_names(access).index("ref_from_resources")
            available = recent.newest[:, NEWEST_DOWN] == 0
            carried = recent.newest[:, NEWEST_CARRIED]
            estimate = prediction.estimate_mbps.astype(np.float64)
            # the interval's width in the model's own precision
            spread = (prediction.upper_mbps - prediction.lower_mbps).astype(np.float64) / Z_10_90
            # A reference from throughput alone bounds a held-back path from below only.
            lower_bound = ~(features[:, column] == 1.0) & ~recent.saturated
            scaled = np.isfinite(estimate)
            # Nothing the model could scale (no resource KPIs, no saturated period): what the
            # path carried is all that is known.
            lower_bound = np.where(scaled, lower_bound, True)
            estimate = np.where(lower_bound, carried, estimate)
            spread = np.where(scaled, spread, LOWER_BOUND_ERROR * carried)
            self._kept.put_rows(
                places,
                np.column_stack(
                    [
                        np.where(lower_bound, LOWER_BOUND, ESTIMATE),
                        np.where(available, estimate, 0.0),
                        np.where(spread < 0.0, 0.0, spread),  # max(spread, 0.0)
                        recent.newest[:, NEWEST_AT],
                        available.astype(np.float64),
                    ]
                ),
            )


def row_columns(access: str) -> tuple[str, ...]:
    """The canonical feature inputs a period of the access gives, in the order ``_row`` lists
    them: the throughput first, whether the period was saturated last."""
    extra = ("cqi",) if access == "nr" else ()
    return (THROUGHPUT, *KPI_COLUMNS[access].values(), *extra, SATURATED)


def _row(sample: KpiSample) -> list[float]:
    """One period of a path as the canonical feature inputs (models/features.py), in the
    order of ``row_columns``."""
    measurements = sample.measurements
    row = [sample.throughput_mbps or 0.0]
    for measurement in KPI_COLUMNS[sample.access]:
        value = measurements.get(measurement)
        row.append(math.nan if value is None else float(value))
    if sample.access == "nr":
        row.append(_cqi(measurements))
    share = utilisation(sample)
    row.append(math.nan if share is None else float(share >= SATURATED_UTILISATION))
    return row


def _rows(group: Group, chosen: npt.NDArray[np.bool_]) -> FloatRows:
    """``_row`` of the chosen samples of a group (one access, downlink), as one array."""
    access = group.access
    throughput = group.throughput[chosen]
    columns = [np.where(throughput == 0, 0.0, throughput)]  # (as ``or 0.0``: -0.0 too)
    columns += [group.column(name)[chosen] for name in KPI_COLUMNS[access]]
    if access == "nr":
        columns.append(reported_cqis_of(group)[chosen])
    share = utilisation_of(group)[chosen]
    columns.append(np.where(np.isnan(share), math.nan, share >= SATURATED_UTILISATION))
    return np.column_stack(columns)


# The columns of what a path's newest period said (``_Histories.append_many``): 1 where the
# node said the path is down, what it carried (Mbit/s) and the period's time.
NEWEST_DOWN, NEWEST_CARRIED, NEWEST_AT = range(3)


class _Recent(NamedTuple):
    """Paths' recent periods, cut from an access's histories (``_Histories.recent``): what the
    features read of them (``features_from_kept``; real periods at the end, newest last)."""

    last: npt.NDArray[np.float64]  # (paths, INPUTS_READ, stored): the last periods' rows
    reference: npt.NDArray[np.float64]  # (paths, HISTORY_PERIODS): each period's reference
    from_resources: npt.NDArray[np.float64]  # (paths, HISTORY_PERIODS): from resource KPIs
    lengths: npt.NDArray[np.int64]  # per path: its real rows
    saturated: npt.NDArray[np.bool_]  # per path: carried all it could of late
    newest: npt.NDArray[np.float64]  # (paths, 3): what its newest period said (NEWEST_*)


class _Histories:
    """The last HISTORY_PERIODS rows of every path of one access, in one array of
    (paths, HISTORY_PERIODS, feature inputs), each path's block a ring: a row is written at
    the block's ``head``, which then moves on, so a period writes one row a path rather than
    shifting every block (``recent`` reads a block from its head round: the oldest first,
    the NaN rows of a path with fewer than HISTORY_PERIODS before its real ones). Paths are
    named by their places in the estimators' shared slots; a block is given to a place the
    first time it has a row (the slots hold every access's paths, both directions). Each row
    keeps, after its inputs (``columns``), its period's reference as the features derive it
    (``stored``: models.features.references_of_rows), worked out once as the row comes."""

    def __init__(self, access: str) -> None:
        self.access = access
        self.columns = row_columns(access)
        self.stored = (*self.columns, STORED_REFERENCE, STORED_FROM_RESOURCES)
        self._throughput = self.columns.index(THROUGHPUT)
        self._saturated = self.columns.index(SATURATED)
        self._block_of = np.zeros(0, dtype=np.intp)  # per place: its block, -1 none yet
        self._blocks = 0
        self._rows = np.full((16, HISTORY_PERIODS, len(self.stored)), math.nan)
        self._count = np.zeros(16, dtype=np.int64)
        self._head = np.zeros(16, dtype=np.int64)  # per block: where its next row goes
        self._newest = np.full((16, 3), math.nan)

    def places(self) -> list[int]:
        """The places of the paths with a history, in the order they were first given one."""
        known = np.flatnonzero(self._block_of >= 0)
        ordered: list[int] = known[np.argsort(self._block_of[known], kind="stable")].tolist()
        return ordered

    def append(self, place: int, row: list[float], newest: Sequence[float]) -> None:
        self.append_many(np.array([place], dtype=np.intp), [row], [newest])

    def append_many(
        self,
        places: npt.NDArray[np.intp],
        rows: list[list[float]] | FloatRows,
        newest: Sequence[Sequence[float]] | FloatRows,
    ) -> None:
        """Each place's row as its path's newest, in order (a path's rows one after the other
        where it comes more than once); ``newest``: what each row's period said (NEWEST_*
        columns), kept for the path's newest."""
        blocks = self._blocks_of(places).tolist()
        inputs = np.asarray(rows, dtype=np.float64).reshape(len(blocks), len(self.columns))
        rows = np.column_stack([inputs, references_of_rows(inputs, self.columns, self.access)])
        if len(set(blocks)) < len(blocks):
            for block, row, said in zip(blocks, rows, newest, strict=True):
                self._put([block], [row], [said])
        elif blocks:
            self._put(blocks, rows, newest)

    def _blocks_of(self, places: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
        """Each place's block, given now (in order) to those without one."""
        self._block_of = grown(self._block_of, int(places.max(initial=-1)) + 1, -1)
        found = self._block_of[places]
        if found.min(initial=0) < 0:
            for i in np.flatnonzero(found < 0).tolist():
                place = places[i]
                block = self._block_of[place]
                if block < 0:  # (a place met twice gets its block once)
                    block = self._block_of[place] = self._blocks
                    self._blocks += 1
                    if block == len(self._count):
                        self._grow()
                found[i] = block
        return found

    def _put(
        self,
        slots: list[int],
        rows: list[list[float]] | FloatRows,
        newest: Sequence[Sequence[float]] | FloatRows,
    ) -> None:
        """The rows as their (distinct) slots' newest, each written over its block's oldest."""
        at = np.array(slots, dtype=np.intp)
        head = self._head[at]
        self._rows[at, head] = rows
        self._head[at] = (head + 1) % HISTORY_PERIODS
        self._count[at] = np.minimum(self._count[at] + 1, HISTORY_PERIODS)
        self._newest[at] = newest

    def _grow(self) -> None:
        size = 2 * len(self._count)
        rows = np.full((size, HISTORY_PERIODS, len(self.stored)), math.nan)
        rows[: len(self._count)] = self._rows
        count = np.zeros(size, dtype=np.int64)
        count[: len(self._count)] = self._count
        newest = np.full((size, 3), math.nan)
        newest[: len(self._count)] = self._newest
        head = np.zeros(size, dtype=np.int64)
        head[: len(self._count)] = self._head
        self._rows, self._count, self._newest, self._head = rows, count, newest, head

    def recent(self, places: npt.NDArray[np.intp]) -> _Recent:
        """For the paths at these places (each with a history), in their order: what the
        features read of each one's block of recent periods (``features_from_kept``)."""
        slots = self._block_of[places]
        # each block from its head round: its oldest row first, its newest last
        rounds = (self._head[slots][:, None] + np.arange(HISTORY_PERIODS)) % HISTORY_PERIODS
        at = slots[:, None] * HISTORY_PERIODS + rounds  # (every row of every block in turn)
        # The last periods' rows whole (a take along one axis copies each row whole, four
        # times as fast as indexing by block and round), and of the others only what is read:
        # the references kept, whether each of the last was saturated. A whole block is five
        # times those bytes, and a fleet's were most of a step's model time.
        every_row = self._rows.reshape(-1, self._rows.shape[2])
        last = np.take(every_row, at[:, -INPUTS_READ:].ravel(), axis=0)
        reference = every_row[at, len(self.columns)]
        from_resources = every_row[at, len(self.columns) + 1]
        count = self._count[slots]
        # saturation.saturated() of each path's last periods: it carried something in the
        # newest, and each of them whose utilisation is known (one at least) was at the limit.
        recent = every_row[at[:, -SATURATED_PERIODS:], self._saturated]
        in_history = np.arange(SATURATED_PERIODS)[None, :] >= (SATURATED_PERIODS - count)[:, None]
        known = in_history & ~np.isnan(recent)
        at_limit = row_all(np.where(known, recent == 1.0, True))
        carried = every_row[at[:, -1], self._throughput] > 0
        return _Recent(
            last.reshape(len(slots), INPUTS_READ, -1),
            reference,
            from_resources,
            count,
            carried & row_any(known) & at_limit,
            self._newest[slots],
        )


def _cqi(measurements: Mapping[str, float]) -> float:
    cqi = reported_cqi(measurements)
    return math.nan if cqi is None else float(cqi)
