"""Offline datasets: every period's KPIs with the true capacity, for training.

One row per period, CPE and access: time, ids, the true capacities and availability (the
labels), and the KPIs that access's node would report (other accesses' columns stay empty).
CSV or Parquet, by the output's extension.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.scenario.e2_identities import OFFERED
from e2sim.world import SimWorld

BASE_COLUMNS = ("time_s", "cpe_id", "access", "available", "capacity_dl_mbps", "capacity_ul_mbps")


def dataset_rows(
    world: SimWorld, progress: Callable[[int, int], None] = lambda done, total: None
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for tick in range(world.ticks):
        for access in world.accesses:
            truth = world.truth(tick, access)
            report = world.report(truth, tick)
            for i, cpe_id in enumerate(truth.cpe_ids):
                row: dict[str, Any] = {
                    "time_s": round(truth.time_s, 6),
                    "cpe_id": cpe_id,
                    "access": access,
                    "available": bool(truth.available[i]),
                    "capacity_dl_mbps": round(float(truth.capacity_dl_mbps[i]), 4),
                    "capacity_ul_mbps": round(float(truth.capacity_ul_mbps[i]), 4),
                }
                for name, values in report.values.items():
                    row[name] = float(values[i])
                for name, labels in report.labels.items():
                    row[f"{name}.bin"] = int(labels[i])
                rows.append(row)
        progress(tick + 1, world.ticks)
    return rows


def columns(world: SimWorld) -> list[str]:
    names: list[str] = list(BASE_COLUMNS)
    for access in world.accesses:
        names += OFFERED.get(access, ())
        if access == "nr":
            names += ["CARR.WBCQIDist.bin", "CARR.PDSCHMCSDist.bin"]
    return names


def write_dataset(
    world: SimWorld, out: Path, progress: Callable[[int, int], None] = lambda d, t: None
) -> int:
    rows = dataset_rows(world, progress)
    header = columns(world)
    suffix = out.suffix.lower()
    if suffix == ".csv":
        with out.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=header, restval="")
            writer.writeheader()
            writer.writerows(rows)
    elif suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist(rows, schema=_schema(header))
        pq.write_table(table, out)
    else:
        raise ValueError(
            f"{out}: the dataset is written as .csv or .parquet, not {suffix or 'no extension'}"
        )
    return len(rows)


def _schema(header: list[str]) -> Any:
    import pyarrow as pa

    types = {"cpe_id": pa.string(), "access": pa.string(), "available": pa.bool_()}
    return pa.schema(
        [
            (name, types.get(name, pa.int64() if name.endswith(".bin") else pa.float64()))
            for name in header
        ]
    )
