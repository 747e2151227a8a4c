"""Evaluate a shipped or trained model on any data; a short Markdown page with PNG plots."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import itertools

import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt
import pandas as pd

from models.data import DataError
from models.runtime import ModelError, OnnxCapacityModel
from models.train import Metrics, metrics, usable_rows


@dataclass(frozen=True)
class Evaluation:
    metrics: Metrics
    coverage: float
    by_range: list[tuple[str, Metrics]]
    measured: npt.NDArray[np.float64]
    predicted: npt.NDArray[np.float64]
    groups: npt.NDArray[np.str_]

    def as_dict(self) -> dict[str, object]:
        return {
            **self.metrics.as_dict(),
            "interval_coverage": round(self.coverage, 4),
            "by_range": {label: m.as_dict() for label, m in self.by_range},
        }


def evaluate(model: OnnxCapacityModel, frame: pd.DataFrame) -> Evaluation:
    features, y, groups, _ = usable_rows(frame, model.access)
    if len(y) == 0:
        raise DataError(
            f"no usable rows for {model.access}: every row lacks a finite capacity target or "
            "a feature the model needs"
        )
    prediction = model.predict(features)
    if prediction.crossed_share > 0.5:
        raise ModelError(
            f"{model.card_path}: the lower model is above the upper one on "
            f"{prediction.crossed_share:.0%} of the rows; the card's lower and upper files look "
            "swapped"
        )
    estimate = prediction.estimate_mbps.astype(np.float64)
    inside = (prediction.lower_mbps <= y) & (y <= prediction.upper_mbps)
    edges = np.quantile(y, [0, 1 / 3, 2 / 3, 1]) if len(y) else np.zeros(4)
    by_range = []
    for low, high in itertools.pairwise(edges):
        rows = (y >= low) & (y <= high)
        if rows.sum() >= 2:
            by_range.append((f"{low:.0f}–{high:.0f} Mbit/s", metrics(y[rows], estimate[rows])))
    return Evaluation(
        metrics(y, estimate), float(inside.mean()), by_range, y, estimate, groups.astype(str)
    )


def write_report(evaluation: Evaluation, model_name: str, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    figure, axis = plt.subplots(figsize=(5, 5))
    axis.scatter(evaluation.measured, evaluation.predicted, s=3, alpha=0.3)
    top = float(max(evaluation.measured.max(initial=1), evaluation.predicted.max(initial=1)))
    axis.plot([0, top], [0, top], color="black", linewidth=0.8)
    axis.set_xlabel("measured (Mbit/s)")
    axis.set_ylabel("predicted (Mbit/s)")
    figure.tight_layout()
    figure.savefig(out / "predicted_vs_measured.png", dpi=100)
    plt.close(figure)

    figure, axis = plt.subplots(figsize=(6, 3))
    labels = [label for label, _ in evaluation.by_range]
    axis.bar(labels, [m.mae_mbps for _, m in evaluation.by_range])
    axis.set_ylabel("MAE (Mbit/s)")
    axis.set_title("error by range of the measured value")
    figure.tight_layout()
    figure.savefig(out / "error_by_range.png", dpi=100)
    plt.close(figure)

    first = evaluation.groups[0] if len(evaluation.groups) else ""
    rows = evaluation.groups == first
    figure, axis = plt.subplots(figsize=(8, 3))
    axis.plot(evaluation.measured[rows], label="measured", linewidth=0.8)
    axis.plot(evaluation.predicted[rows], label="predicted", linewidth=0.8)
    axis.set_xlabel("period")
    axis.set_ylabel("Mbit/s")
    axis.set_title(f"over time: {first}")
    axis.legend()
    figure.tight_layout()
    figure.savefig(out / "over_time.png", dpi=100)
    plt.close(figure)

    m = evaluation.metrics
    lines = [
        f"# Evaluation of {model_name}",
        "",
        f"- rows: {m.rows}, R² {m.r2:.3f}, MAE {m.mae_mbps:.2f} Mbit/s, MAPE {m.mape:.1%}",
        f"- 10–90 % interval coverage: {evaluation.coverage:.1%}",
        "",
        "| measured range | rows | R² | MAE (Mbit/s) | MAPE |",
        "|---|---|---|---|---|",
        *[
            f"| {label} | {r.rows} | {r.r2:.3f} | {r.mae_mbps:.2f} | {r.mape:.1%} |"
            for label, r in evaluation.by_range
        ],
        "",
        "![predicted vs measured](predicted_vs_measured.png)",
        "![error by range](error_by_range.png)",
        "![over time](over_time.png)",
        "",
    ]
    page = out / "report.md"
    page.write_text("\n".join(lines))
    return page
