"""How fast the shipped capacity models are scored: onnxruntime against the tree core
(models/_tree_core.c), on the same rows, with whether they gave the same bits."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import numpy.typing as npt
import onnx

from models.runtime import SHIPPED, _one_thread
from models.tree_scorer import CompiledTrees, core

PARTS = ("estimate", "lower", "upper")


@dataclass(frozen=True)
class TreeBenchRow:
    model: str  # access.part
    trees: int
    rows: int
    onnxruntime_ms: float
    core_ms: dict[int, float]  # by lanes: 8, and 16 where the CPU has AVX-512
    same_bits: bool


def rows_at_thresholds(model: onnx.ModelProto, rows: int, seed: int) -> npt.NDArray[np.float32]:
    """Rows whose every feature is one of the ensemble's own thresholds for it, a little
    above or below (the trees split where their training data was dense, so the values
    spread as that data did), 2 % of them missing: no fleet's data ships with the code."""
    (node,) = model.graph.node
    at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    tests = np.array([m == b"BRANCH_LEQ" for m in at["nodes_modes"]])
    features = np.asarray(at["nodes_featureids"])[tests]
    values = np.asarray(at["nodes_values"], dtype=np.float32)[tests]
    width = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    rng = np.random.default_rng(seed)
    x = np.empty((rows, width), dtype=np.float32)
    for f in range(width):
        own = values[features == f]
        picked = rng.choice(own, size=rows) if len(own) else np.zeros(rows, dtype=np.float32)
        scale = np.where(np.isfinite(picked), np.maximum(np.abs(picked), 1e-3), 0.0)
        x[:, f] = picked + (rng.normal(0.0, 0.01, size=rows) * scale).astype(np.float32)
    x[rng.random(x.shape) < 0.02] = np.nan
    return x


def run_tree_bench(rows: int, repeats: int = 3) -> list[TreeBenchRow]:
    """Each shipped ensemble over ``rows`` rows at its thresholds; the best of ``repeats``."""
    import onnxruntime

    if core is None:
        raise RuntimeError("the tree core is not built here (or ATSSS_PURE_PYTHON=1)")
    widths = sorted({8, core.widest_lanes()})
    results: list[TreeBenchRow] = []
    for card in sorted(SHIPPED.glob("*.card.json")):
        access = card.name.removesuffix(".card.json")
        for part in PARTS:
            path = SHIPPED / f"{access}.{part}.onnx"
            model = onnx.load(str(path))
            trees = CompiledTrees.from_model(model)
            session = onnxruntime.InferenceSession(
                str(path), _one_thread(), providers=["CPUExecutionProvider"]
            )
            name = session.get_inputs()[0].name
            x = rows_at_thresholds(model, rows, seed=len(results))
            reference = np.asarray(session.run(None, {name: x})[0], dtype=np.float32).ravel()
            same = all(
                np.array_equal(trees.predict(x, lanes).view(np.uint32), reference.view(np.uint32))
                for lanes in widths
            )
            ort_s = _best(partial(session.run, None, {name: x}), repeats)
            core_ms = {
                lanes: 1000 * _best(partial(trees.predict, x, lanes), repeats) for lanes in widths
            }
            results.append(
                TreeBenchRow(
                    f"{access}.{part}", trees.tree_count, rows, 1000 * ort_s, core_ms, same
                )
            )
    return results


def _best(run: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best
