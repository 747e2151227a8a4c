"""Time series read from a measurement file, for scenarios driven by real traces.

Anywhere a scenario takes a time series it may instead say where to read one:

```yaml
downlink_mbps:
  measured:
    file: raca5g-download/static/B_2020.02.13_13.57.29.csv
    column: DL_bitrate
    unit: kbit/s
    time_column: Timestamp            # default; G-NetTrack's yyyy.mm.dd_HH.MM.SS by default
    where: {NetworkMode: 5G, State: D}  # only rows with these values
    start_s: 0                        # the scenario's t = 0 is this far into the trace
```

Before the scenario is validated, each such mapping becomes ``points`` (one per measured row,
step interpolation unless the mapping says otherwise), so the rest of the code sees an
ordinary series. A relative ``file`` is looked up next to the scenario, then in each folder of
``ATSSS_DATASETS`` (separated by ``:``), then in the checkout's sibling ``shared/datasets``
folder. Datasets are never bundled (the real 5G traces are GPL-3.0): a file not found gets one
line naming the trace, the dataset it belongs to and where to get it.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

GNETTRACK_TIME_FORMAT = "%Y.%m.%d_%H.%M.%S"
UNITS = {"kbit/s": 0.001, "Mbit/s": 1.0, "bit/s": 1e-6, "Gbit/s": 1000.0, "as-is": 1.0}
MAX_MEASURED_ROWS = 200_000
# the repository's sibling `shared/datasets` (the workplace's data), for files named relatively
SHARED_DATASETS = Path(__file__).resolve().parents[3] / "shared" / "datasets"


@dataclass(frozen=True)
class KnownDataset:
    """A public dataset that shipped scenarios read, by the folder its files are named under."""

    name: str
    licence: str
    source: str


KNOWN_DATASETS = {
    "raca5g-download": KnownDataset(
        "the Raca et al. 5G dataset's Download traces (ACM MMSys 2020), as driving/ and static/",
        "GPL-3.0",
        "https://github.com/uccmisl/5Gdataset",
    ),
}


def missing_trace_message(file: str, folders: list[Path]) -> str:
    """One line: the trace, its dataset and source when known, where it was looked for."""
    tried = ", ".join(str(folder) for folder in folders)
    known = KNOWN_DATASETS.get(Path(file).parts[0]) if Path(file).parts else None
    if known is None:
        return f"trace {file} not found (looked in {tried}; set ATSSS_DATASETS)"
    return (
        f"trace {file} not found: it is part of {known.name}, {known.licence}, from"
        f" {known.source}; put its folder {Path(file).parts[0]}/ in a folder named by"
        f" ATSSS_DATASETS (looked in {tried})"
    )


class MeasuredSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str = Field(min_length=1)
    column: str = Field(min_length=1)
    unit: Literal["kbit/s", "Mbit/s", "bit/s", "Gbit/s", "as-is"] = "as-is"
    time_column: str = "Timestamp"
    time_format: str = GNETTRACK_TIME_FORMAT
    where: dict[str, str] = {}
    start_s: float = Field(default=0.0, ge=0)


def dataset_folders(base: Path | None) -> list[Path]:
    folders = [base] if base is not None else []
    folders += [Path(p) for p in os.environ.get("ATSSS_DATASETS", "").split(":") if p]
    folders.append(SHARED_DATASETS)
    return folders


def resolve_measured(
    data: Any,
    base: Path | None,
    fail: Callable[[str], Exception],
    key: str = "",
    missing: Callable[[str], Exception] | None = None,
) -> Any:
    """``data`` with every ``measured:`` series replaced by its points; a bad spec raises
    ``fail(message)``, a measurement file not found ``missing(message)`` (default: fail)."""
    if isinstance(data, list):
        return [
            resolve_measured(item, base, fail, f"{key}[{i}]", missing)
            for i, item in enumerate(data)
        ]
    if not isinstance(data, dict):
        return data
    if "measured" in data:
        rest = {k: v for k, v in data.items() if k != "measured"}
        if "points" in rest or "value" in rest:
            raise fail(f"{key}: expected 'measured' instead of 'points' or 'value', not both")
        where = f"{key}.measured"
        try:
            spec = MeasuredSpec.model_validate(data["measured"])
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(part) for part in first["loc"])
            raise fail(f"{where}.{field}: {first['msg']}") from None
        points = _points(spec, base, fail, missing or fail, where)
        return {**rest, "points": points, **_step(rest)}
    return {
        k: resolve_measured(v, base, fail, f"{key}.{k}" if key else str(k), missing)
        for k, v in data.items()
    }


def _step(rest: dict[str, Any]) -> dict[str, str]:
    # a measured row is the mean over its period: hold it, do not ramp between rows
    return {} if "interpolation" in rest else {"interpolation": "step"}


def _points(
    spec: MeasuredSpec,
    base: Path | None,
    fail: Callable[[str], Exception],
    missing: Callable[[str], Exception],
    where: str,
) -> list[list[float]]:
    path = _find(spec.file, base)
    if path is None:
        raise missing(f"{where}.file: {missing_trace_message(spec.file, dataset_folders(base))}")
    rows = _read_rows(path, fail, where)
    header = rows[0] if rows else []
    index = {name: i for i, name in enumerate(header)}
    for column in (spec.column, spec.time_column, *spec.where):
        if column not in index:
            raise fail(f"{where}: {path} has no column {column!r}")
    times = [_time(row, index[spec.time_column], spec.time_format) for row in rows[1:]]
    known = [t for t in times if t is not None]
    if not known:
        raise fail(
            f"{where}.time_column: no value of {spec.time_column!r} in {path} reads as "
            f"{spec.time_format!r}"
        )
    origin = min(known)
    # G-NetTrack repeats a second now and then; the last row of a second stands
    by_second: dict[float, float] = {}
    for row, time in zip(rows[1:], times, strict=True):
        if time is None:
            continue
        t = (time - origin).total_seconds() - spec.start_s
        if t < 0 or any(_cell(row, index[c]) != v for c, v in spec.where.items()):
            continue
        value = _number(_cell(row, index[spec.column]))
        if value is not None:
            by_second[t] = value * UNITS[spec.unit]
    if not by_second:
        raise fail(f"{where}: no row of {path} passes the filters after start_s={spec.start_s:g}")
    points = [[t, by_second[t]] for t in sorted(by_second)]
    if not all(math.isfinite(v) for _, v in points):
        raise fail(f"{where}.column: {spec.column!r} has non-finite values")
    return points


def _read_rows(path: Path, fail: Callable[[str], Exception], where: str) -> list[list[str]]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows: list[list[str]] = []
            for row in csv.reader(handle):
                rows.append(row)
                if len(rows) > MAX_MEASURED_ROWS + 1:
                    raise fail(f"{where}.file: {path}: more than {MAX_MEASURED_ROWS} rows")
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise fail(f"{where}.file: {path}: cannot read as CSV: {error}") from None
    return rows


def _cell(row: list[str], column: int) -> str:
    return row[column].strip() if column < len(row) else ""


def _time(row: list[str], column: int, time_format: str) -> datetime | None:
    try:
        return datetime.strptime(_cell(row, column), time_format)
    except ValueError:
        return None


def _number(text: str) -> float | None:
    # G-NetTrack writes "-" where it has no value
    try:
        return float(text)
    except ValueError:
        return None


def _find(name: str, base: Path | None) -> Path | None:
    given = Path(name)
    if given.is_absolute():
        return given if given.is_file() else None
    for folder in dataset_folders(base):
        candidate = folder / given
        if candidate.is_file():
            return candidate
    return None
