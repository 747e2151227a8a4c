"""An indication's records become samples (xapp/e2/indications.py, `_samples`) exactly as the
plain reading does: each record checked and kept with what it stands for, then gathered per CPE,
period and direction, cell-level values after a CPE's own. That reading is kept here as the
reference; hypothesis draws records (known and unknown names, labels, values in and out of
range, UEs of CPEs and of none, cell values, several periods) and both must give the same
samples, in the same order, and count the same rejections."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from core.domain import AccessIdentity, Cpe, Direction, KpiSample
from kpm import e2ap
from kpm.catalogue import Scope
from kpm.reports import MeasurementRecord
from xapp.e2.config import E2NodeConfig
from xapp.e2.indications import IndicationProcessor, NodeContext, _Use

NODE = "gnb"
FLEET = 1000
INDICATION = e2ap.Indication(e2ap.RicRequestId(1, 1), 2, 1, b"h", b"m")


Report = Literal["per-ue", "cell"]


def fleet(report: Report = "per-ue", size: int = FLEET) -> tuple[IndicationProcessor, NodeContext]:
    cpes = [
        Cpe(f"cpe-{i:04d}", {"nr": AccessIdentity("nr", e2_node_id=NODE, ue_id=f"gnb-du:{i}")})
        for i in range(size)
    ]
    processor = IndicationProcessor(cpes)
    config = E2NodeConfig(node=NODE, access="nr", measurements=("DRB.UEThpDl",), report=report)
    processor.set_node(config, None)
    return processor, NodeContext(config, None)


def reference_samples(
    processor: IndicationProcessor,
    context: NodeContext,
    start_s: float,
    period_s: float,
    records: list[MeasurementRecord],
    received_s: float | None,
) -> list[KpiSample]:
    """The plain reading, one record at a time (the xApp's until the fleet made it a cost)."""
    node = context.config.node
    per_ue: dict[tuple[str, int], list[tuple[_Use, float]]] = defaultdict(list)
    per_cell: dict[int, list[tuple[_Use, float]]] = defaultdict(list)
    for record in records:
        entry = processor._catalogue.get(record.name)
        if entry is None:
            processor.reject(node, "unknown-measurement", f"unknown measName {record.name!r}")
            continue
        if record.value is None:
            continue
        if not entry.min <= record.value <= entry.max:
            processor.reject(node, "out-of-range", entry.check(record.value) or "")
            continue
        use = _Use.of(entry, record.name, record.labels)
        if record.ue_keys:
            cpe_id = processor._cpe_for(node, record.ue_keys)
            if cpe_id is None:
                processor.reject(node, "unknown-ue", "no CPE")
                continue
            per_ue[(cpe_id, record.period_index)].append((use, record.value))
        elif entry.scope == Scope.CELL or context.config.report == "cell":
            per_cell[record.period_index].append((use, record.value))
    samples = []
    for period in sorted({p for _, p in per_ue} | set(per_cell)):
        cell = per_cell.get(period, [])
        cpe_ids = {c for c, p in per_ue if p == period}
        if cell:
            cpe_ids |= set(processor._cpes_by_node.get(node, []))
        for cpe_id in sorted(cpe_ids):
            items = per_ue.get((cpe_id, period), []) + cell
            for direction in (Direction.DOWNLINK, Direction.UPLINK):
                downlink = direction == Direction.DOWNLINK
                measurements: dict[str, float] = {}
                throughput: float | None = None
                available: bool | None = None
                for use, reported in items:
                    if not (use.downlink if downlink else use.uplink):
                        continue
                    value = reported * use.scale
                    measurements[use.key] = value
                    if use.role == "throughput":
                        throughput = value
                    elif use.role == "link_state":
                        available = value >= 0.5
                if measurements:
                    samples.append(
                        KpiSample(
                            cpe_id,
                            context.config.access,
                            direction,
                            start_s + (period + 1) * period_s,
                            period_s,
                            throughput_mbps=throughput,
                            available=available,
                            measurements=measurements,
                            received_s=received_s,
                        )
                    )
    return samples


NAMES = [
    "DRB.UEThpDl",
    "DRB.UEThpUl",
    "RRU.PrbUsedDl",
    "RRU.PrbAvailDl",  # cell scope
    "L1M.SS-SINR",  # -23..40
    "LIFI.LinkState",  # both directions, link state
    "CARR.WBCQIDist",  # labelled bins
    "Not.AMeasurement",
]
# shared between records, as the readers share them between a UE's records
KEYS = [(f"gnb-du:{i}",) for i in (0, 1, 2, 9)] + [("gnb-du:5000",), ()]
SMALL = 10  # CPEs of the drawn reports' node (a cell value reaches every one)
LABELS: list[dict[str, Any]] = [{}, {"distBinX": 3}, {"distBinX": 7}]


@st.composite
def records(draw: st.DrawFn) -> list[MeasurementRecord]:
    """A message's records: UEs one after the other, each its measurements, some cell values."""
    out = []
    for _ in range(draw(st.integers(0, 12))):
        keys = draw(st.sampled_from(KEYS))
        period = draw(st.integers(0, 2))
        for _ in range(draw(st.integers(1, 5))):
            value = draw(
                st.one_of(
                    st.none(),
                    st.floats(-50, 5000, allow_nan=False),
                    st.just(float("nan")),
                    st.sampled_from([0.0, 0.5, 1.0, -23.0, 40.0]),  # at the edges
                    st.integers(0, 10**6).map(float),
                )
            )
            out.append(
                MeasurementRecord(
                    draw(st.sampled_from(NAMES)),
                    value,
                    period,
                    keys,
                    draw(st.sampled_from(LABELS)),
                )
            )
    return out


def rejections(processor: IndicationProcessor) -> dict[str, float]:
    return {
        cause: processor.rejected_count(cause)
        for cause in ("unknown-measurement", "out-of-range", "unknown-ue")
    }


@settings(max_examples=300, deadline=None)
@given(records(), st.sampled_from(["per-ue", "cell"]), st.sampled_from([None, 12.5]))
def test_samples_are_those_of_the_plain_reading(
    drawn: list[MeasurementRecord], report: Report, received_s: float | None
) -> None:
    fast, context = fleet(report, SMALL)
    plain, _ = fleet(report, SMALL)
    got = fast._samples(context, 1000.0, 1.0, drawn, INDICATION, received_s)
    assert got == reference_samples(plain, context, 1000.0, 1.0, drawn, received_s)
    assert rejections(fast) == rejections(plain)


def test_a_fleets_report_reads_alike() -> None:
    """1,000 UEs of four measurements each, the UE keys shared by a UE's records."""
    fast, context = fleet()
    plain, _ = fleet()
    drawn = [
        MeasurementRecord(name, value, 0, (f"gnb-du:{ue}",), {})
        for ue in range(FLEET)
        for name, value in (
            ("DRB.UEThpDl", 1000.0 + ue),
            ("DRB.UEThpUl", 500.0),
            ("RRU.PrbUsedDl", 40.0),
            ("L1M.SS-SINR", 12.5),
        )
    ]
    shared = [
        MeasurementRecord(r.name, r.value, 0, drawn[i - i % 4].ue_keys, r.labels)
        for i, r in enumerate(drawn)
    ]
    got = fast._samples(context, 0.0, 1.0, shared, INDICATION, None)
    assert len(got) == 2 * FLEET
    assert got == reference_samples(plain, context, 0.0, 1.0, shared, None)
