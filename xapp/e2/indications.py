"""Turn RIC indications into KPI samples, and bad ones into a metric and one log line per cause.

The processor knows, per E2 node, what was subscribed (version, measurement names) and which
CPE each UE is. Nothing that arrives can stop it: bytes that do not decode, the other KPM
version's bytes, unknown measurements and impossible values are counted, logged once per cause
with the node and a hex excerpt, and skipped.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import methodcaller
from typing import Any, cast

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram

from core.domain import Cpe, Direction, KpiSample
from kpm import dialects, e2ap
from kpm.catalogue import Catalogue, Measurement, MeasurementDirection, Scope, load_catalogue
from kpm.codec import KpmPdu
from kpm.errors import CodecError, hex_excerpt
from kpm.fast_message import read_columns
from kpm.reports import (
    IndicationColumns,
    IndicationReport,
    MeasurementRecord,
    decode_header,
    decode_message,
)
from kpm.versions import KpmVersion
from xapp.e2.config import E2NodeConfig
from xapp.e2.sample_rows import DirectionRows, samples_of_rows

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeContext:
    """What the processor needs to read one node's indications."""

    config: E2NodeConfig
    version: KpmVersion | None  # from the RAN function OID, or configured; None: detect


MAX_LOGGED_CAUSES = 1024


class IndicationProcessor:
    def __init__(
        self,
        cpes: Sequence[Cpe],
        catalogue: Catalogue | None = None,
        registry: CollectorRegistry | None = None,
        *,
        fast_reader: bool = True,
    ) -> None:
        """``fast_reader``: read indications (the E2AP PDU and its E2SM-KPM message) with the
        strict fast readers first (the generic readers take what they do not); False: the
        generic readers only (benchmarks)."""
        self._catalogue = catalogue or load_catalogue()
        self._fast_reader = fast_reader
        self._nodes: dict[str, NodeContext] = {}
        self._cpe_by_key: dict[tuple[str, str], str] = {}
        # A UE's whole key tuple → its CPE, remembered across indications (a node reports the
        # same UEs every period); emptied when the CPEs change, and when it grows past bounds.
        self._cpe_by_keys: dict[str, dict[tuple[str, ...], str | None]] = {}
        self._cpes_by_node: dict[str, list[str]] = defaultdict(list)
        self.set_cpes(cpes)
        self.registry = registry or CollectorRegistry()
        self.rejected = Counter(
            "atsss_e2_rejected",
            "E2 payloads or values skipped, by cause",
            ["cause"],
            registry=self.registry,
        )
        self.accepted = Counter(
            "atsss_e2_indications", "RIC indications decoded", ["version"], registry=self.registry
        )
        self.superseded = Counter(
            "atsss_e2_superseded",
            "RIC indications never decoded: a newer period of the same subscription came before "
            "the control loop could read them (the loop is short of CPU)",
            registry=self.registry,
        )
        self.decode_seconds = Histogram(
            "atsss_e2_decode_seconds",
            "Time to decode one RIC indication into KPI samples",
            buckets=(0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0),
            registry=self.registry,
        )
        # (node, cause) pairs already logged: once each, then counted only. Node names come off
        # the wire, so the set is capped; past the cap every problem is counted only.
        self._logged_causes: set[tuple[str, str]] = set()
        self.last_indication_s: dict[str, float] = {}  # per node, when its latest came (health)

    def set_cpes(self, cpes: Sequence[Cpe]) -> None:
        """Which CPE each (node, UE identity) is; replaces the previous set (config reload)."""
        by_key: dict[tuple[str, str], str] = {}
        by_node: dict[str, list[str]] = defaultdict(list)
        for cpe in cpes:
            for access in cpe.accesses.values():
                if access.e2_node_id is None:
                    continue
                by_node[access.e2_node_id].append(cpe.cpe_id)
                for key in _identity_keys(access.ue_id, access.station_mac):
                    by_key[(access.e2_node_id, key)] = cpe.cpe_id
        # Swapped whole: a transport thread reading them sees the old or the new set.
        self._cpe_by_key, self._cpes_by_node = by_key, by_node
        self._cpe_by_keys = {}

    def set_node(self, config: E2NodeConfig, version: KpmVersion | None) -> None:
        self._nodes[config.node] = NodeContext(config, version or config.kpm_version)

    def node_version(self, node: str) -> KpmVersion | None:
        context = self._nodes.get(node)
        return context.version if context else None

    def handle_payload(self, node: str, payload: bytes) -> Sequence[KpiSample]:
        """An E2AP RIC indication PDU as it arrives over RMR or the standalone stream."""
        indication = self.read_payload(node, payload)
        return [] if indication is None else self.handle_indication(node, indication)

    def read_payload(self, node: str, payload: bytes) -> e2ap.Indication | None:
        """The E2AP RIC indication in a PDU (its KPM contents not yet read), or None when the
        PDU is not one (counted and logged)."""
        try:
            message = e2ap.decode(payload, fast=self._fast_reader)
        except CodecError as error:
            self.reject(node, error.cause, str(error))
            return None
        if not isinstance(message, e2ap.Indication):
            self.reject(
                node, "unexpected-message", f"{type(message).__name__} is not an indication"
            )
            return None
        return message

    def decoding_into(
        self, on_samples: Callable[[Sequence[KpiSample]], None]
    ) -> Callable[[str, e2ap.Indication], None]:
        """Where a transport hands indications to be decoded at once, in its own thread, the
        samples going to ``on_samples`` (without a control loop that decodes them itself)."""

        def decode_now(node: str, indication: e2ap.Indication) -> None:
            samples = self.handle_indication(node, indication)
            if samples:
                on_samples(samples)

        return decode_now

    def heard_from(self, node: str) -> None:
        """An indication from the node arrived (decoded now or later): the node is alive."""
        if node in self._nodes:  # configured nodes only: bounded
            self.last_indication_s[node] = time.time()

    def handle_indication(
        self, node: str, indication: e2ap.Indication, received_s: float | None = None
    ) -> Sequence[KpiSample]:
        """The indication's samples; ``received_s``: when it arrived (monotonic), if it
        waited before being decoded (the control delay of what it leads to starts then)."""
        with self.decode_seconds.time():
            return self._handle_indication(node, indication, received_s)

    def _handle_indication(
        self, node: str, indication: e2ap.Indication, received_s: float | None
    ) -> Sequence[KpiSample]:
        if received_s is None:
            received_s = time.monotonic()
        context = self._nodes.get(node)
        if context is None:
            self.reject(node, "unknown-node", "indication from an E2 node we did not subscribe to")
            return []
        self.heard_from(node)
        try:
            detection = decode_header(indication.header, context.version)
        except CodecError as error:
            self.reject(node, error.cause, str(error))
            return []
        if detection.mismatch:
            self.reject(node, "version-mismatch", detection.describe())
        elif detection.ambiguous:
            self.reject(node, "header-ambiguous", detection.describe(), data=indication.header)
        version = detection.header.version
        if self._fast_reader:
            try:
                columns = read_columns(indication.message, version, context.config.measurements)
            except Exception:  # (memory): the records' reading below says what is wrong
                columns = None
            if columns is not None:
                samples = self._samples_of_columns(
                    context, detection.header.collect_start_unix_s, columns, received_s
                )
                if samples is not None:
                    self.accepted.labels(version=version.value).inc()
                    return samples
        try:
            report = decode_message(
                indication.message, version, context.config.measurements, fast=self._fast_reader
            )
        except CodecError as error:
            settled = self._settle_layout(node, context, version, indication.message)
            if settled is None:
                self.reject(node, error.cause, str(error))
                return []
            version, report = settled
        except Exception as error:  # a decoded value of a shape no reader foresaw
            self.reject(
                node,
                "malformed",
                f"unreadable indication message: {error!r}",
                data=indication.message,
            )
            return []
        for problem in report.problems:
            self.reject(node, problem.cause, problem.message, data=indication.message)
        self.accepted.labels(version=version.value).inc()
        period_s = (report.granularity_ms or context.config.granularity) / 1000.0
        return self._samples(
            context,
            detection.header.collect_start_unix_s,
            period_s,
            report.records,
            indication,
            received_s,
        )

    def _settle_layout(
        self, node: str, context: NodeContext, tried: KpmVersion, message: bytes
    ) -> tuple[KpmVersion, IndicationReport] | None:
        """A message that does not read in the node's layout but in exactly one other layout of
        its OID's family settles which one the node speaks (FlexRIC and standard nodes announce
        the same OID). Two or more would be a guess: the message is rejected instead."""
        others = [v for v in dialects.family(tried) if v != tried]
        fitting = dialects.clean_layouts(KpmPdu.MESSAGE, message, others)
        if len(fitting) != 1:
            return None
        found = fitting[0]
        try:
            report = decode_message(message, found, context.config.measurements)
        except CodecError:  # it reads, but as a format no reader handles: no evidence
            return None
        self.reject(
            node,
            "version-mismatch",
            f"indication messages are E2SM-KPM {found}, not {tried}; reading this node as {found}",
        )
        self._nodes[node] = NodeContext(context.config, found)
        return found, report

    def reject(
        self,
        node: str,
        cause: str,
        message: str,
        data: bytes | None = None,
        count_only: bool = False,
    ) -> None:
        self.rejected.labels(cause=cause).inc()
        key = (node, cause)
        if count_only or key in self._logged_causes:
            return
        if len(self._logged_causes) >= MAX_LOGGED_CAUSES:
            return
        self._logged_causes.add(key)
        excerpt = (
            f"; bytes: {hex_excerpt(data)}" if data is not None and "bytes:" not in message else ""
        )
        log.warning(
            "E2 node %s: %s%s (further %r problems are counted only)", node, message, excerpt, cause
        )

    def rejected_count(self, cause: str) -> float:
        value = self.registry.get_sample_value("atsss_e2_rejected_total", {"cause": cause})
        return value or 0.0

    def _samples(
        self,
        context: NodeContext,
        start_s: float,
        period_s: float,
        records: Iterable[MeasurementRecord],
        indication: e2ap.Indication,
        received_s: float | None = None,
    ) -> list[KpiSample]:
        """The records as samples, per CPE, direction and period (in that order; a cell-level
        value goes to every CPE of the node, after its own values). A Format 3 message repeats
        the same names, labels and UE keys for each of its thousand UEs: what each stands for
        (its catalogue entry, its CPE, its key in the sample) is looked up once per indication
        (by identity, for the tuples and dicts the readers share between a UE's records), and
        a UE's records, which come one after the other, go straight into its samples' values.
        tests/test_indication_samples.py holds this to the plain one-record-at-a-time reading."""
        node = context.config.node
        per_ue: dict[tuple[str, int], _Collected] = {}
        per_cell: dict[int, list[tuple[_Use, float]]] = {}
        plain: dict[str, _Plan | None] = {}  # by name, records without labels
        labelled: dict[tuple[str, int], _Plan | None] = {}  # by id(labels): alive as records is
        by_content: dict[tuple[str, tuple[tuple[str, Any], ...]], _Plan | None] = {}
        cpe_of_keys: dict[int, str | None] = {}  # id(ue_keys): alive while records is
        cell_report = context.config.report == "cell"
        # the UE the last record was of, and where its values go (None: a UE of no CPE)
        last_keys: tuple[str, ...] | None = None
        last_period = -1
        collected: _Collected | None = None
        downlink_values: dict[str, float] = {}
        uplink_values: dict[str, float] = {}
        # (a named tuple: unpacked at once rather than read field by field)
        for name, value, period_index, keys, labels in records:
            if labels:
                plan = labelled.get((name, id(labels)), _UNSEEN)
                if plan is _UNSEEN:
                    # each UE has label objects of its own: the plan is shared by content
                    plan = labelled[(name, id(labels))] = self._plan_by_content(
                        by_content, name, labels
                    )
            else:
                plan = plain.get(name, _UNSEEN)
                if plan is _UNSEEN:
                    plan = plain[name] = self._plan_of(name, labels)
            if plan is None:
                self.reject(
                    node,
                    "unknown-measurement",
                    f"unknown measName {name!r}",
                    data=indication.message,
                )
                continue
            low, high, key, scale, downlink, uplink, field_role, entry, use = plan
            if value is None:
                continue  # noValue: the node had nothing to report for this period
            if not low <= value <= high:  # NaN too: Measurement.check words it
                self.reject(node, "out-of-range", entry.check(value) or "", data=indication.message)
                continue
            if keys:
                if keys is not last_keys or period_index != last_period:
                    last_keys, last_period = keys, period_index
                    cpe_id = cpe_of_keys.get(id(keys), _UNSEEN)
                    if cpe_id is _UNSEEN:
                        cpe_id = cpe_of_keys[id(keys)] = self._cpe_of_ue(node, keys)
                    collected = None
                    if cpe_id is not None:
                        slot = (cpe_id, last_period)
                        collected = per_ue.get(slot)
                        if collected is None:
                            collected = per_ue[slot] = _Collected()
                        downlink_values = collected.downlink.measurements
                        uplink_values = collected.uplink.measurements
                if collected is None:
                    self.reject(node, "unknown-ue", f"no CPE configured for UE {keys[0]}")
                    continue
                # _Collected.add, written out: a 1,000-UE Format 3 period adds some 10,000
                scaled = value * scale
                if downlink:
                    downlink_values[key] = scaled
                    if field_role is not None:
                        collected.downlink.set_field(field_role, scaled)
                if uplink:
                    uplink_values[key] = scaled
                    if field_role is not None:
                        collected.uplink.set_field(field_role, scaled)
            elif entry.scope == Scope.CELL or cell_report:
                per_cell.setdefault(period_index, []).append((use, value))
        samples: list[KpiSample] = []
        access = context.config.access
        for period in sorted({p for _, p in per_ue} | set(per_cell)):
            cell = per_cell.get(period, [])
            cpe_ids = {c for c, p in per_ue if p == period} | (
                set(self._cpes_by_node.get(node, [])) if cell else set()
            )
            time_s = start_s + (period + 1) * period_s
            for cpe_id in sorted(cpe_ids):
                values = per_ue.get((cpe_id, period))
                if values is None:
                    values = _Collected()
                for use, value in cell:
                    values.add(use, value)
                for direction, one in (
                    (Direction.DOWNLINK, values.downlink),
                    (Direction.UPLINK, values.uplink),
                ):
                    if one.measurements:
                        samples.append(
                            KpiSample.made(
                                cpe_id,
                                access,
                                direction,
                                time_s,
                                period_s,
                                one.throughput,
                                None,
                                None,
                                one.available,
                                one.measurements,
                                received_s,
                            )
                        )
        return samples

    def _samples_of_columns(
        self,
        context: NodeContext,
        start_s: float,
        columns: IndicationColumns,
        received_s: float | None,
    ) -> Sequence[KpiSample] | None:
        """``_samples`` of a message read as columns, in a fleet's usual case: every
        measurement known, every value in its range (or none), every UE of a CPE of its own.
        None otherwise: the message is then read as records, and ``_samples`` words what is
        wrong, value by value. The same samples as ``_samples`` gives for the records the
        columns stand for (tests/test_indication_columns.py): each value scaled by the same
        multiplication, each sample's measurements in the records' order."""
        node = context.config.node
        plans = [
            self._plan_of(name, labels)
            for name, labels in zip(columns.names, columns.labels, strict=True)
        ]
        known: list[_Plan] = [plan for plan in plans if plan is not None]
        if len(known) < len(plans):
            return None  # an unknown measurement
        # a measurement whose labels vary (a UE's CQI bin): its key per UE, all else alike
        keys_of: dict[int, list[str]] = {}
        by_content: dict[tuple[str, tuple[tuple[str, Any], ...]], _Plan | None] = {}
        for m, each in columns.varying.items():
            name, first = columns.names[m], known[m]
            found = []
            # each distinct labels' key, or None where its plan is not the first's but for
            # the key (NR's UEs each name their CQI bin: a thousand labels, a dozen distinct)
            # (each UE's labels' content made and looked up in C; a Python step only for each
            # distinct one)
            contents: list[tuple[tuple[str, Any], ...]] = list(map(tuple, map(_ITEMS, each)))
            key_of: dict[tuple[tuple[str, Any], ...], str | None] = {}
            for content, labels in dict(zip(contents, each, strict=True)).items():
                plan = self._plan_by_content(by_content, name, labels)
                alike = plan is not None and _alike_but_key(plan, first)
                key_of[content] = plan[2] if plan is not None and alike else None
            found = list(map(key_of.__getitem__, contents))
            if None in found:
                return None
            keys_of[m] = cast(list[str], found)  # (none is None)
        values = columns.values
        low = np.array([plan[0] for plan in known])
        high = np.array([plan[1] for plan in known])
        given = ~np.isnan(values)
        if (given & ~((low <= values) & (values <= high))).any():
            return None
        found_cpes = self._cpes_of_ues(node, columns.ue_keys)
        cpe_ids = [cpe_id for cpe_id in found_cpes if cpe_id is not None]
        if len(set(cpe_ids)) < len(found_cpes):
            return None  # a UE of no CPE, or two of one
        # value * scale, as _Collected.add multiplies (the same IEEE product); UEs by CPE, as
        # _samples orders them
        order = sorted(range(len(cpe_ids)), key=cpe_ids.__getitem__)
        scaled = (values * np.array([plan[3] for plan in known]))[order]
        period_s = (columns.granularity_ms or context.config.granularity) / 1000.0
        time_s = start_s + period_s  # (the message's one period: index 0)
        access = context.config.access
        ordered_ids = [cpe_ids[ue] for ue in order]
        # Per direction, column by column: its measurements' values and keys per UE, and the
        # fields they set (throughput, link state), as _field_set reads them in order.
        directions: list[DirectionRows] = []
        for direction, goes in ((Direction.DOWNLINK, 4), (Direction.UPLINK, 5)):
            measured = [m for m, plan in enumerate(known) if plan[goes]]
            if not measured:
                continue
            shared_keys = [known[m][2] for m in measured]
            keys = [shared_keys] * len(order)
            for i, m in enumerate(measured):
                if m in keys_of:  # (its key differs by UE: the UE's own at its place)
                    keys = _keys_with(keys, i, [keys_of[m][ue] for ue in order])
            throughput = np.full(len(order), np.nan)
            link = np.full(len(order), -1, dtype=np.int8)  # -1: not said, 0: down, 1: up
            for m in measured:
                role = known[m][6]
                column = scaled[:, m]
                said = ~np.isnan(column)
                if role == "throughput":
                    throughput = np.where(said, column, throughput)
                elif role == "link_state":
                    link = np.where(said, column >= 0.5, link).astype(np.int8)
            directions.append(DirectionRows(direction, scaled[:, measured], keys, throughput, link))
        # (a row with every value given keeps them all; one with some absent, those given)
        samples = samples_of_rows(ordered_ids, access, time_s, period_s, received_s, directions)
        return samples

    def _plan_by_content(
        self,
        by_content: dict[tuple[str, tuple[tuple[str, Any], ...]], _Plan | None],
        name: str,
        labels: Mapping[str, Any],
    ) -> _Plan | None:
        """``_plan_of``, made once per name and labels' content in ``by_content``."""
        content = (name, tuple(labels.items()))
        plan = by_content.get(content, _UNSEEN)
        if plan is _UNSEEN:
            plan = by_content[content] = self._plan_of(name, labels)
        return plan  # type: ignore[no-any-return]

    def _plan_of(self, name: str, labels: Mapping[str, Any]) -> _Plan | None:
        """What ``_samples`` does with a measurement's values (None: the catalogue does not
        know the name)."""
        entry = self._catalogue.get(name)
        if entry is None:
            return None
        use = _Use.of(entry, name, labels)
        return (
            entry.min,
            entry.max,
            use.key,
            use.scale,
            use.downlink,
            use.uplink,
            use.role if use.sets_field else None,
            entry,
            use,
        )

    def _cpe_of_ue(self, node: str, keys: tuple[str, ...]) -> str | None:
        """``_cpe_for``, remembered."""
        return self._cpes_of_ues(node, [keys])[0]

    def _cpes_of_ues(self, node: str, ue_keys: Sequence[tuple[str, ...]]) -> list[str | None]:
        """``_cpe_of_ue`` of each UE, looked up together (a fleet's message names a thousand
        UEs, each known from the messages before)."""
        remembered = self._cpe_by_keys.get(node)
        if remembered is None:
            remembered = self._cpe_by_keys[node] = {}
        found: list[Any] = list(map(remembered.get, ue_keys, repeat(_UNSEEN)))
        for i in [i for i, cpe_id in enumerate(found) if cpe_id is _UNSEEN]:
            keys = ue_keys[i]
            if len(remembered) > MAX_REMEMBERED_UES:
                remembered.clear()  # UEs come and go: start again rather than grow
            found[i] = remembered[keys] = self._cpe_for(node, keys)
        return found

    def _cpe_for(self, node: str, keys: Sequence[str]) -> str | None:
        for key in keys:
            cpe_id = self._cpe_by_key.get((node, key))
            if cpe_id is not None:
                return cpe_id
        return None


def _keys_with(keys: list[list[str]], at: int, own: list[str]) -> list[list[str]]:
    """Each UE's keys with its ``own`` key at place ``at``: one list for the UEs whose keys
    are alike (NR's UEs name a dozen CQI bins between them). The samples' batch keeps the
    lists: one per UE was a thousand more objects a step for the collector to walk."""
    alike: dict[tuple[str, ...], list[str]] = {}
    out = []
    for k, key in zip(keys, own, strict=True):
        content = (*k[:at], key, *k[at + 1 :])
        found = alike.get(content)
        if found is None:
            found = alike[content] = list(content)
        out.append(found)
    return out


_UNSEEN: Any = object()
_ITEMS = methodcaller("items")
MAX_REMEMBERED_UES = 200_000  # UE keys per node: a few tens of MB at most


@dataclass(frozen=True, slots=True)
class _Use:
    """What a measurement (a name with its labels) stands for in a sample."""

    key: str  # its key in the sample's measurements
    downlink: bool  # it belongs in the downlink sample
    uplink: bool
    role: str
    scale: float  # reported unit → canonical unit
    # whether the sample's own fields read it too (throughput, link state): most do not
    sets_field: bool

    @staticmethod
    def of(entry: Measurement, name: str, labels: Mapping[str, Any]) -> _Use:
        both = entry.direction == MeasurementDirection.BOTH
        return _Use(
            _measurement_key(name, labels),
            both or entry.direction == MeasurementDirection.DOWNLINK,
            both or entry.direction == MeasurementDirection.UPLINK,
            entry.role,
            entry.scale_to,
            entry.role in _FIELD_ROLES,
        )


# What _samples does with a measurement's values, unpacked once per record: its range (low,
# high), its key in the samples, its scale, the directions it goes to, the field it sets
# (None: none), its catalogue entry and its use.
_Plan = tuple[float, float, str, float, bool, bool, str | None, Measurement, _Use]


def _alike_but_key(plan: _Plan, other: _Plan) -> bool:
    """The two plans do the same with a value (range, scale, directions, field) under
    whatever keys: one measurement's plans for labels that differ only in what they key."""
    return plan[:2] + plan[3:7] == other[:2] + other[3:7]


# A link state read as a column (-1: not said) as the sample's field holds it.
# The roles a sample's own fields are read from (_Values.set_field).
_FIELD_ROLES = frozenset({"throughput", "link_state"})


class _Values:
    """One direction's values of a CPE's period, as its sample will hold them."""

    __slots__ = ("available", "measurements", "throughput")

    def __init__(self) -> None:
        self.measurements: dict[str, float] = {}
        self.throughput: float | None = None
        self.available: bool | None = None

    def set_field(self, role: str, value: float) -> None:
        """A value (canonical units) a field of the sample is read from, by its role."""
        self.throughput, self.available = _field_set(role, value, self.throughput, self.available)


def _field_set(
    role: str, value: float, throughput: float | None, available: bool | None
) -> tuple[float | None, bool | None]:
    """A sample's throughput and link state once a value of ``role`` (canonical units) is read
    into them."""
    if role == "throughput":
        return value, available
    if role == "link_state":
        return throughput, value >= 0.5
    return throughput, available


class _Collected:
    """One CPE's values of one period, for its downlink and uplink samples."""

    __slots__ = ("downlink", "uplink")

    def __init__(self) -> None:
        self.downlink = _Values()
        self.uplink = _Values()

    def add(self, use: _Use, reported: float) -> None:
        """A value in the reported unit, to the directions it belongs to; a later one of the
        same key replaces an earlier. (A Format 3 period of 1,000 UEs adds some 10,000: the
        measurements written here, the rare field through a call.)"""
        value = reported * use.scale
        if use.downlink:
            self.downlink.measurements[use.key] = value
            if use.sets_field:
                self.downlink.set_field(use.role, value)
        if use.uplink:
            self.uplink.measurements[use.key] = value
            if use.sets_field:
                self.uplink.set_field(use.role, value)


def _measurement_key(name: str, labels: Mapping[str, Any]) -> str:
    """``name`` alone, or ``name|label=value,…`` for labelled values such as distribution bins."""
    if not labels:
        return name
    parts = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return f"{name}|{parts}"


def _identity_keys(ue_id: str | None, station_mac: str | None) -> list[str]:
    keys = []
    if ue_id:
        keys.append(ue_id)
    if station_mac:
        keys.append("mac:" + station_mac.lower())
    return keys
