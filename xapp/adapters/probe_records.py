"""Training records as JSON (for SDL) and as a training dataset (for `atsss train`): probe
results, and periods in which a path was saturated.

The dataset has the simulator dataset's layout (e2sim/dataset.py), which `models.data` loads:
one row per KPI period with time, CPE, access, the labels ``available``/``capacity_*_mbps``
and the KPIs in the catalogue's reported units. Each record becomes its own little trace (its
CPE id gets a ``#probe<n>`` or ``#saturated<n>`` suffix, so no history feature crosses two
records): the periods before it with no label, then the period it labels, with the probed
capacity or the saturated period's own throughput.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from core.domain import (
    Direction,
    KpiSample,
    ProbeOutcome,
    ProbeRecord,
    ProbeRequest,
    SaturatedPeriod,
)
from kpm.catalogue import Catalogue, load_catalogue

BASE_COLUMNS = ("time_s", "cpe_id", "access", "available", "capacity_dl_mbps", "capacity_ul_mbps")


def record_to_json(record: ProbeRecord) -> dict[str, Any]:
    o = record.outcome
    return {
        "request": {
            "cpe_id": o.request.cpe_id,
            "access": o.request.access,
            "direction": o.request.direction.value,
            "duration_s": o.request.duration_s,
            "parallel_flows": o.request.parallel_flows,
            "reason": o.request.reason,
        },
        "started_at_s": o.started_at_s,
        "finished_at_s": o.finished_at_s,
        "capacity_mbps": o.capacity_mbps,
        "probe_mbit": o.probe_mbit,
        "path_down": o.path_down,
        "error": o.error,
        "history": [_sample_to_json(s) for s in record.history],
    }


def record_from_json(raw: Mapping[str, Any]) -> ProbeRecord:
    r = raw["request"]
    request = ProbeRequest(
        cpe_id=r["cpe_id"],
        access=r["access"],
        direction=Direction(r["direction"]),
        duration_s=float(r["duration_s"]),
        parallel_flows=int(r["parallel_flows"]),
        reason=r.get("reason", ""),
    )
    outcome = ProbeOutcome(
        request,
        float(raw["started_at_s"]),
        float(raw["finished_at_s"]),
        None if raw["capacity_mbps"] is None else float(raw["capacity_mbps"]),
        float(raw["probe_mbit"]),
        bool(raw.get("path_down", False)),
        str(raw.get("error", "")),
    )
    return ProbeRecord(outcome, tuple(_sample_from_json(s) for s in raw["history"]))


def saturated_to_json(period: SaturatedPeriod) -> dict[str, Any]:
    return {"history": [_sample_to_json(s) for s in period.history]}


def saturated_from_json(raw: Mapping[str, Any]) -> SaturatedPeriod:
    return SaturatedPeriod(tuple(_sample_from_json(s) for s in raw["history"]))


def _sample_to_json(s: KpiSample) -> dict[str, Any]:
    return {
        "cpe_id": s.cpe_id,
        "access": s.access,
        "direction": s.direction.value,
        "time_s": s.time_s,
        "period_s": s.period_s,
        "throughput_mbps": s.throughput_mbps,
        "rtt_ms": s.rtt_ms,
        "loss_rate_permille": s.loss_rate_permille,
        "available": s.available,
        "measurements": dict(s.measurements),
    }


def _sample_from_json(raw: Mapping[str, Any]) -> KpiSample:
    return KpiSample(**{**raw, "direction": Direction(raw["direction"])})


def dataset_rows(
    records: Iterable[ProbeRecord], saturated: Iterable[SaturatedPeriod] = ()
) -> list[dict[str, Any]]:
    catalogue = load_catalogue()
    rows: list[dict[str, Any]] = []
    for n, record in enumerate(records):
        o = record.outcome
        if not record.history or (o.capacity_mbps is None and not o.path_down):
            continue  # a failed probe says nothing about the path
        label = 0.0 if o.path_down else float(o.capacity_mbps or 0.0)
        rows += _trace_rows(
            record.history, f"#probe{n}", o.request.direction, label, not o.path_down, catalogue
        )
    for n, period in enumerate(saturated):
        if period.history and period.capacity_mbps > 0:
            direction = period.history[-1].direction
            rows += _trace_rows(
                period.history, f"#saturated{n}", direction, period.capacity_mbps, True, catalogue
            )
    return rows


def _trace_rows(
    history: Sequence[KpiSample],
    suffix: str,
    direction: Direction,
    label_mbps: float,
    available: bool,
    catalogue: Catalogue,
) -> list[dict[str, Any]]:
    """One record's periods as dataset rows, the last one labelled."""
    label_column = "capacity_dl_mbps" if direction == Direction.DOWNLINK else "capacity_ul_mbps"
    rows = []
    for i, sample in enumerate(history):
        last = i == len(history) - 1
        row: dict[str, Any] = {
            "time_s": round(sample.time_s, 6),
            "cpe_id": f"{sample.cpe_id}{suffix}",
            "access": sample.access,
            "available": available if last else sample.available is not False,
            "capacity_dl_mbps": "",
            "capacity_ul_mbps": "",
        }
        if last:
            row[label_column] = round(label_mbps, 4)
        for key, value in sample.measurements.items():
            name, _, labels = key.partition("|")
            entry = catalogue.get(name)
            if entry is None:
                continue
            if labels:
                if labels.startswith("distBinX="):
                    row[f"{name}.bin"] = int(labels.split("=", 1)[1])
                continue
            row[name] = value / entry.scale_to if entry.scale_to else value
        rows.append(row)
    return rows


def write_dataset(
    records: Sequence[ProbeRecord], out: Path, saturated: Sequence[SaturatedPeriod] = ()
) -> int:
    """Write the records as CSV (or Parquet by extension); returns the number of labelled rows."""
    rows = dataset_rows(records, saturated)
    header = list(BASE_COLUMNS) + sorted({k for row in rows for k in row} - set(BASE_COLUMNS))
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() == ".parquet":
        import pandas as pd

        pd.DataFrame(rows, columns=header).replace("", None).to_parquet(out, index=False)
    else:
        with out.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=header, restval="")
            writer.writeheader()
            writer.writerows(rows)
    return sum(1 for row in rows if row["capacity_dl_mbps"] != "" or row["capacity_ul_mbps"] != "")
