"""Which estimator answers for a CPE: chosen by configuration, overridable per CPE by the operator.

Modes (``MODES``): ``fused`` (KPIs, model and probes-when-needed, combined by uncertainty and
age), ``kpi-only``, ``model-only`` and ``probe-only`` (probes on a routine period, like the
paper). Each CPE's reports feed the estimators its mode reads (fusion feeds all three), so a
fleet on the KPI estimator does not pay for model inference on every path; a CPE switched to
another mode starts that estimator from the reports that follow. The probe estimator asks for
advice only from the estimators of the mode a CPE is in: none in probe-only mode (it then
probes routinely), the KPI and model estimators in fused mode; in the kpi-only and model-only
modes it does not probe at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from core.domain import CapacityEstimate, Direction, KpiSample
from core.slots import Places, Slots, grown, places_of
from xapp.estimators.columns import StepSamples, as_step
from xapp.estimators.fusion import FusedEstimator
from xapp.estimators.kpi import KpiEstimator
from xapp.estimators.model import ModelEstimator
from xapp.estimators.outage import WeightLookup
from xapp.estimators.probe import ProbeEstimator, ProbeSettings
from xapp.estimators.said import EstimateRows, Path
from xapp.estimators.saturation import SaturationLabeller
from xapp.ports import CapacityEstimator, Prober, ProbeRecordStore, SaturatedPeriodStore

MODES = ("fused", "kpi-only", "model-only", "probe-only")

ModeChoice = Callable[[str, Direction], str | None]
# Every standing choice at once: (CPE, direction) → the estimator chosen (a fleet's few).
ModeChoices = Callable[[], Mapping[tuple[str, Direction], str]]


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"unknown estimator mode {mode!r}; expected one of {', '.join(MODES)}")
    return mode


@dataclass(frozen=True)
class EstimatorSettings:
    mode: str = "fused"
    probe: ProbeSettings = field(default_factory=ProbeSettings)
    drift_ratio_per_s: float = 0.02
    max_age_s: float = 30.0
    # Saturated periods kept as training labels: one per path every so often, so many per path
    # (0: none kept).
    label_every_s: float = 600.0
    labels_per_path: int = 5

    def __post_init__(self) -> None:
        check_mode(self.mode)


class EstimatorSelection:
    name = "selection"

    def __init__(
        self,
        prober: Prober,
        settings: EstimatorSettings | None = None,
        *,
        model: ModelEstimator | None = None,
        records: ProbeRecordStore | None = None,
        labels: SaturatedPeriodStore | None = None,
        choice: ModeChoice = lambda cpe_id, direction: None,
        choices: ModeChoices | None = None,
        weights: WeightLookup | None = None,
        probe_directions: Collection[Direction] = tuple(Direction),
    ) -> None:
        """``weights``: the weights in force per CPE and direction (the state store), so that
        silence on a path given no weight is not taken for an outage. ``probe_directions``:
        the directions whose weights are controlled; a probe of another would cost capacity
        for an estimate nobody uses. ``records`` keeps every probe result and ``labels`` the
        periods in which a path was saturated, with their KPIs, for retraining the models."""
        self.settings = settings or EstimatorSettings()
        self.probe_directions = frozenset(probe_directions)
        self.choice = choice
        # ``choice`` of every CPE and direction at once, where the chooser can tell them (the
        # operator's state): a step then asks once, not once per CPE and direction
        self.choices = choices
        # The fleet's paths' places, one for every estimator's tables: fusion and the probe
        # planner read three sources' word on a step's paths, looked up once.
        paths = self.path_slots = Slots[Path]()
        # When each CPE's access last had a report (loop time): the fleet view's freshness.
        self.last_report_s = LastReports(paths)
        self.kpi = KpiEstimator(paths)
        self.model = model if model is not None else ModelEstimator(slots=paths)
        self.probe = ProbeEstimator(
            prober,
            self.settings.probe,
            records=records,
            advisors_for=self._advisors_for,
            weights=weights,
            slots=paths,
            advisors_everywhere=self._advisors_everywhere,
        )
        self.fused = FusedEstimator(
            [self.kpi, self.model, self.probe],
            drift_ratio_per_s=self.settings.drift_ratio_per_s,
            max_age_s=self.settings.max_age_s,
            weights=weights,
            references=[self.kpi, self.probe],
            slots=paths,
        )
        self.labeller = (
            SaturationLabeller(
                labels, self.settings.label_every_s, self.settings.labels_per_path, slots=paths
            )
            if labels is not None and self.settings.labels_per_path > 0
            else None
        )
        self._by_mode: dict[str, CapacityEstimator] = {
            "fused": self.fused,
            "kpi-only": self.kpi,
            "model-only": self.model,
            "probe-only": self.probe,
        }

    def mode_for(self, cpe_id: str, direction: Direction) -> str:
        chosen = self.choice(cpe_id, direction)
        return chosen if chosen in self._by_mode else self.settings.mode

    def _modes(self, paths: Sequence[Path]) -> dict[tuple[str, Direction], str] | str:
        """The mode of each CPE and direction of ``paths`` (each asked once), or the one mode
        they are all in where no choice stands (a fleet's usual, told by ``choices`` with no
        look-up per CPE)."""
        if self.choices is None:
            keys = dict.fromkeys((c, d) for c, _, d in paths)
            modes = {key: self.mode_for(*key) for key in keys}
        else:
            standing = {key: mode for key, mode in self.choices().items() if mode in self._by_mode}
            if not standing:  # (before any per-path work)
                return self.settings.mode
            keys = dict.fromkeys((c, d) for c, _, d in paths)
            modes = {key: standing.get(key, self.settings.mode) for key in keys}
        distinct = set(modes.values())
        return next(iter(distinct)) if len(distinct) == 1 else modes

    def carrier_changed(self, cpe_id: str, access: str, up: bool, now_s: float) -> None:
        """The CPE's agent saw the access's carrier go or come back: no probe asks meanwhile."""
        self.probe.carrier_changed(cpe_id, access, up, now_s)

    def update(self, samples: Sequence[KpiSample], now_s: float) -> None:
        """Each CPE's samples go to the estimator its mode reads (fusion feeds the KPI, model
        and probe estimators itself): a fleet on the KPI estimator does not pay for the model's
        inference on every path. A CPE switched to another estimator (an override) starts it
        from that period's reports."""
        # (each mode's samples carry their columns and paths, made once for its estimators)
        step = as_step(samples)
        paths = step.paths
        self.last_report_s.note(step.places(self.path_slots), now_s)
        modes = self._modes(paths)
        by_mode: dict[str, StepSamples] = {}
        if isinstance(modes, str):  # a fleet's usual: every CPE in one mode
            if samples:
                by_mode[modes] = step
        else:
            split: dict[str, list[KpiSample]] = {}
            for sample in samples:
                split.setdefault(modes[sample.cpe_id, sample.direction], []).append(sample)
            by_mode = {mode: StepSamples(chosen) for mode, chosen in split.items()}
        if "fused" in by_mode:
            self.fused.update(by_mode["fused"], now_s)
        for mode in ("kpi-only", "model-only"):
            if mode in by_mode:
                self._by_mode[mode].update(by_mode[mode], now_s)
        if "probe-only" in by_mode or "fused" not in by_mode:
            # Probe results under way are collected, and probes planned, every step.
            self.probe.update(by_mode.get("probe-only", []), now_s)
        if self.labeller is not None:
            # a fleet on one estimator: its samples are all of them, their columns read already
            every = next(iter(by_mode.values())) if len(by_mode) == 1 else step
            self.labeller.update(every)

    def estimate(
        self, cpe_id: str, access: str, direction: Direction, now_s: float
    ) -> CapacityEstimate | None:
        mode = self.mode_for(cpe_id, direction)
        return self._by_mode[mode].estimate(cpe_id, access, direction, now_s)

    def estimate_many(
        self, paths: Sequence[tuple[str, str, Direction]], now_s: float
    ) -> list[CapacityEstimate | None]:
        """``estimate`` of every path: fusion's paths fused together, the others one by one."""
        return self.estimate_rows(paths, now_s).estimates()

    def estimate_rows(self, asked: Sequence[Path] | Places[Path], now_s: float) -> EstimateRows:
        """``estimate_many`` as columns: fusion's as it gives them, the others' made one by
        one (a fleet on fusion, the default, makes no estimate object here). ``Places``: the
        paths with their places in ``path_slots``, which the caller has."""
        paths = places_of(asked).keys
        # each CPE and direction's mode, asked once (a step asks for its accesses together)
        modes = self._modes(paths)
        if modes == "fused" or (not isinstance(modes, str) and not paths):  # (a fleet's usual)
            return self.fused.estimate_rows(asked, now_s)
        fused: list[int] = []
        others: dict[int, CapacityEstimate | None] = {}
        for index, (cpe_id, access, direction) in enumerate(paths):
            mode = modes if isinstance(modes, str) else modes[cpe_id, direction]
            if mode == "fused":
                fused.append(index)
            else:
                others[index] = self._by_mode[mode].estimate(cpe_id, access, direction, now_s)
        if fused:
            rows = self.fused.estimate_rows([paths[i] for i in fused], now_s)
            others.update((index, rows.estimate(i)) for i, index in enumerate(fused))
        return EstimateRows.of(paths, [others[i] for i in range(len(paths))])

    def _advisors_for(
        self, cpe_id: str, direction: Direction
    ) -> Sequence[CapacityEstimator] | None:
        return self._advisors_in_mode(self.mode_for(cpe_id, direction), direction)

    def _advisors_everywhere(self) -> dict[Direction, Sequence[CapacityEstimator] | None] | None:
        """``_advisors_for`` every CPE, by direction, where no choice stands (``_modes``);
        None where one may."""
        if self.choices is None or any(m in self._by_mode for m in self.choices().values()):
            return None
        return {d: self._advisors_in_mode(self.settings.mode, d) for d in Direction}

    def _advisors_in_mode(
        self, mode: str, direction: Direction
    ) -> Sequence[CapacityEstimator] | None:
        if direction not in self.probe_directions:
            return None
        if mode == "fused":
            return (self.kpi, self.model)
        if mode == "probe-only":
            return ()
        return None


class LastReports:
    """When each CPE's access last had a report (loop time), as the fleet view reads it
    (``get``): kept per path, by its place in the estimators' path slots, a step's written at
    once. (A dictionary by CPE and access took a key made per sample, every step: 60,000 a
    second at 10,000 CPEs, for a view read every few seconds.)"""

    def __init__(self, slots: Slots[Path]) -> None:
        self._slots = slots
        self._at = np.zeros(0)  # per path place: the loop time of its last report, NaN: none

    def note(self, places: npt.NDArray[np.intp], now_s: float) -> None:
        """The paths at ``places`` reported in the step at ``now_s``."""
        if len(self._at) < len(self._slots):
            self._at = grown(self._at, len(self._slots), math.nan)
        self._at[places] = now_s

    def get(self, key: tuple[str, str]) -> float | None:
        """When the CPE's access (either direction) last reported; None: never."""
        cpe_id, access = key
        times = [
            float(self._at[place])
            for direction in Direction
            if (place := self._slots.get((cpe_id, access, direction))) is not None
            and place < len(self._at)
            and not math.isnan(self._at[place])
        ]
        return max(times) if times else None
