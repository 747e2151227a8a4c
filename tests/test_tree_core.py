"""The tree core (models/_tree_core.c through models/tree_scorer.py) against onnxruntime, its
reference: the same float32 bits for every row of every ensemble it accepts, and every other
ensemble refused with its reason (onnxruntime then scores it, as before)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from skl2onnx import to_onnx
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.tree import DecisionTreeRegressor

from models import tree_scorer
from models.runtime import SHIPPED, OnnxCapacityModel, _one_thread
from models.tree_scorer import CompiledTrees, NotScorableError, compiled_trees
from tests.helpers import assert_core_built

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_FILES = sorted(SHIPPED.glob("*.onnx"))
Rows = npt.NDArray[np.float32]


def _needs_core() -> None:
    assert_core_built(tree_scorer.core, "models._tree_core", ROOT / "models" / "_tree_core.c")


def test_the_core_is_built_from_its_source() -> None:
    _needs_core()


def _reference(model: bytes | str) -> Callable[[Rows], Rows]:
    session = onnxruntime.InferenceSession(model, _one_thread(), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda rows: np.asarray(session.run(None, {name: rows})[0], dtype=np.float32).ravel()


def _thresholds(model: Any) -> dict[int, npt.NDArray[np.float32]]:
    """Each feature's test thresholds in the ensemble, as float32."""
    (node,) = model.graph.node
    at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    tests = [m == b"BRANCH_LEQ" for m in at["nodes_modes"]]
    features = np.asarray(at["nodes_featureids"])[tests]
    values = np.asarray(at["nodes_values"], dtype=np.float32)[tests]
    return {int(f): np.unique(values[features == f]) for f in np.unique(features)}


def _rows_at_the_edges(
    thresholds: dict[int, npt.NDArray[np.float32]], width: int, rows: int, seed: int
) -> Rows:
    """Rows whose values sit on the thresholds, a float32 step either side, or are NaN,
    infinite, zero of either sign, or anywhere: where a test's side could be misread."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 3, size=(rows, width)).astype(np.float32)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45], dtype=np.float32)
    for f in range(width):
        own = thresholds.get(f, np.zeros(1, dtype=np.float32))
        picked = rng.choice(own, size=rows)
        steps = rng.integers(-1, 2, size=rows)
        edge = np.where(
            steps < 0,
            np.nextafter(picked, np.float32(-np.inf)),
            np.where(steps > 0, np.nextafter(picked, np.float32(np.inf)), picked),
        )
        kind = rng.integers(0, 10, size=rows)
        column = np.where(kind < 6, edge, x[:, f])
        column = np.where(kind == 9, rng.choice(special, size=rows), column)
        x[:, f] = column
    return x


def _lane_widths() -> list[int]:
    """The core's lane widths this CPU runs: eight, and sixteen where it has AVX-512."""
    if tree_scorer.core is None:
        return [0]
    return sorted({8, tree_scorer.core.widest_lanes()})


@pytest.mark.parametrize("lanes", _lane_widths())
@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda p: p.name)
def test_every_shipped_ensemble_gives_onnxruntimes_bits(path: Path, lanes: int) -> None:
    _needs_core()
    model = onnx.load(str(path))
    trees = CompiledTrees.from_model(model)
    reference = _reference(str(path))
    x = _rows_at_the_edges(_thresholds(model), trees.features, 4001, seed=len(path.name))
    # every row count through the lanes of eight or sixteen, and a fleet's batch
    for rows in (0, 1, 7, 8, 9, 15, 16, 17, 33, 4001):
        got, expected = trees.predict(x[:rows], lanes), reference(x[:rows])
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_lane_widths_the_cpu_lacks_are_refused() -> None:
    _needs_core()
    trees = CompiledTrees.from_model(_shipped_model())
    x = np.zeros((3, trees.features), dtype=np.float32)
    with pytest.raises(ValueError, match="12 lanes"):
        trees.predict(x, 12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_shipped_rows_drawn_anywhere_give_onnxruntimes_bits(data: st.DataObject) -> None:
    _needs_core()
    path = data.draw(st.sampled_from(SHIPPED_FILES))
    trees = CompiledTrees.from_onnx(path)
    reference = _reference(str(path))
    value = st.floats(width=32, allow_nan=True, allow_infinity=True)
    rows = data.draw(st.integers(1, 20))
    x = np.array(
        data.draw(st.lists(value, min_size=rows * trees.features, max_size=rows * trees.features)),
        dtype=np.float32,
    ).reshape(rows, trees.features)
    np.testing.assert_array_equal(trees.predict(x).view(np.uint32), reference(x).view(np.uint32))


def _training_rows(seed: int, missing: float) -> tuple[Rows, npt.NDArray[np.float64]]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(600, 5)).astype(np.float32)
    y = np.sin(x[:, 0]) + x[:, 1] * x[:, 2] - (x[:, 3] > 0.5) + 0.1 * rng.normal(size=600)
    x[rng.random(x.shape) < missing] = np.nan  # missing values to learn a side for
    return x, y


def _onnx_of(estimator: Any, x: Rows) -> Any:
    return to_onnx(estimator, x[:1], target_opset=17)


@pytest.mark.parametrize(
    ("leaves", "missing", "loss"),
    [
        (31, 0.1, "squared_error"),
        (32, 0.3, "quantile"),
        (2, 0.0, "absolute_error"),
        (8, 0.5, "quantile"),
    ],
)
def test_gradient_boosting_as_trained_here_gives_onnxruntimes_bits(
    leaves: int, missing: float, loss: str
) -> None:
    """Ensembles as `atsss train` makes them (HistGradientBoostingRegressor, skl2onnx), of up
    to the core's 32 leaves a tree, with missing values going either way."""
    _needs_core()
    x, y = _training_rows(leaves, missing)
    extra = {"quantile": 0.1} if loss == "quantile" else {}
    fitted = HistGradientBoostingRegressor(
        max_iter=25, max_leaf_nodes=leaves, min_samples_leaf=2, loss=loss, random_state=0, **extra
    ).fit(x, y)
    model = _onnx_of(fitted, x)
    trees = CompiledTrees.from_model(model)
    # (the trees as large as asked: 32 leaves fill every bit of the core's leaf masks)
    tree_ids = np.asarray(_attribute(model, "nodes_treeids").ints)
    is_leaf = np.asarray(_attribute(model, "nodes_modes").strings) == b"LEAF"
    assert np.bincount(tree_ids[is_leaf]).max() == leaves
    probe = _rows_at_the_edges(_thresholds(model), 5, 3000, seed=leaves)
    expected = _reference(model.SerializeToString())(probe)
    np.testing.assert_array_equal(trees.predict(probe).view(np.uint32), expected.view(np.uint32))
    # and the two agree with scikit-learn to float32's precision (the core is no new model)
    np.testing.assert_allclose(
        trees.predict(x), fitted.predict(x).astype(np.float32), rtol=1e-4, atol=1e-4
    )


def test_a_single_decision_tree_gives_onnxruntimes_bits() -> None:
    _needs_core()
    x, y = _training_rows(3, 0.0)
    model = _onnx_of(DecisionTreeRegressor(max_leaf_nodes=20, random_state=0).fit(x, y), x)
    trees = CompiledTrees.from_model(model)
    probe = _rows_at_the_edges(_thresholds(model), 5, 500, seed=3)
    expected = _reference(model.SerializeToString())(probe)
    np.testing.assert_array_equal(trees.predict(probe).view(np.uint32), expected.view(np.uint32))


def _shipped_model() -> Any:
    return onnx.load(str(SHIPPED / "wifi.estimate.onnx"))


def _attribute(model: Any, name: str) -> Any:
    (node,) = model.graph.node
    return next(a for a in node.attribute if a.name == name)


def _set_ints(model: Any, name: str, change: Callable[[list[int]], None]) -> Any:
    attribute = _attribute(model, name)
    values = list(attribute.ints)
    change(values)
    del attribute.ints[:]
    attribute.ints.extend(values)
    return model


def _first_test(model: Any) -> int:
    return list(_attribute(model, "nodes_modes").strings).index(b"BRANCH_LEQ")


def _with_transform(model: Any) -> Any:
    _attribute(model, "post_transform").s = b"LOGISTIC"
    return model


def _with_a_lt_test(model: Any) -> Any:
    _attribute(model, "nodes_modes").strings[_first_test(model)] = b"BRANCH_LT"
    return model


def _with_two_targets(model: Any) -> Any:
    _attribute(model, "n_targets").i = 2
    return model


def _with_a_loop(model: Any) -> Any:
    node = _first_test(model)

    def loop(values: list[int]) -> None:
        values[node] = list(_attribute(model, "nodes_nodeids").ints)[node]

    return _set_ints(model, "nodes_truenodeids", loop)


def _with_a_feature_beyond(model: Any) -> Any:
    def beyond(values: list[int]) -> None:
        values[_first_test(model)] = 10_000

    return _set_ints(model, "nodes_featureids", beyond)


def _with_a_second_weight(model: Any) -> Any:
    for name in ("target_treeids", "target_nodeids", "target_ids"):
        _set_ints(model, name, lambda values: values.append(values[0]))
    _attribute(model, "target_weights").floats.append(1.0)
    return model


def _with_trees_out_of_order(model: Any) -> Any:
    return _set_ints(model, "nodes_treeids", lambda values: values.__setitem__(0, 10_000))


def _with_another_operator(model: Any) -> Any:
    extra = onnx.helper.make_node("Identity", ["variable"], ["again"])
    model.graph.node.append(extra)
    return model


def _with_double_input(model: Any) -> Any:
    model.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    return model


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_with_transform, "post_transform"),
        (_with_a_lt_test, "node modes"),
        (_with_two_targets, "2 targets"),
        (_with_a_loop, "reaches a node twice"),
        (_with_a_feature_beyond, "a test of feature 10000"),
        (_with_a_second_weight, "not one weight"),
        (_with_trees_out_of_order, "not in order"),
        (_with_another_operator, "2 operators"),
        (_with_double_input, "not float32"),
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_any_other_shape_is_refused_with_its_reason(
    change: Callable[[Any], Any], reason: str
) -> None:
    with pytest.raises(NotScorableError, match=reason):
        CompiledTrees.from_model(change(_shipped_model()))


def test_trees_of_more_leaves_are_left_to_onnxruntime(tmp_path: Path) -> None:
    x, y = _training_rows(7, 0.0)
    wide = HistGradientBoostingRegressor(
        max_iter=5, max_leaf_nodes=40, min_samples_leaf=2, random_state=0
    ).fit(x, y)
    path = tmp_path / "model.onnx"
    path.write_bytes(_onnx_of(wide, x).SerializeToString())
    trees, why = compiled_trees(path)
    assert trees is None
    assert "more than 32 leaves" in why


def test_a_small_forest_gives_onnxruntimes_bits() -> None:
    """skl2onnx writes a forest as a sum of its trees' values over their count: the core's
    shape too, when its trees are small enough."""
    _needs_core()
    x, y = _training_rows(5, 0.0)
    forest = RandomForestRegressor(n_estimators=7, max_depth=4, random_state=0).fit(x, y)
    model = _onnx_of(forest, x)
    trees = CompiledTrees.from_model(model)
    probe = _rows_at_the_edges(_thresholds(model), 5, 800, seed=5)
    expected = _reference(model.SerializeToString())(probe)
    np.testing.assert_array_equal(trees.predict(probe).view(np.uint32), expected.view(np.uint32))


def test_an_attribute_of_another_type_is_refused_not_raised(tmp_path: Path) -> None:
    """A model loaded at run time whose node ids are one integer rather than a list (no
    exporter writes that) leaves the model to onnxruntime with a reason, not a traceback in
    the thread that makes the tables."""
    _needs_core()
    model = _shipped_model()
    (node,) = model.graph.node
    for i, attribute in enumerate(node.attribute):
        if attribute.name == "nodes_featureids":
            node.attribute[i].CopyFrom(onnx.helper.make_attribute("nodes_featureids", 3))
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    trees, why = compiled_trees(path)
    assert trees is None
    assert "could not be read (TypeError" in why


def test_a_file_that_is_no_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x08\x07 not protobuf at all")
    trees, why = compiled_trees(path)
    assert trees is None
    assert why


def test_the_core_refuses_tables_that_index_out_of_themselves() -> None:
    _needs_core()
    trees = CompiledTrees.from_model(_shipped_model())
    x = np.zeros((3, trees.features), dtype=np.float32)
    out = np.empty(3, dtype=np.float32)

    def score(**changed: Any) -> None:
        tables = {
            name: getattr(trees, name)
            for name in (
                "thresholds",
                "trees",
                "keeps",
                "starts",
                "nan_trees",
                "nan_keeps",
                "nan_starts",
                "leaf_values",
            )
        }
        tables.update(changed)
        tree_scorer.core.score(
            *tables.values(), x, out, 3, trees.features, trees.tree_count, float(trees.base)
        )

    score()  # as laid out: scored
    beyond = trees.trees.copy()
    beyond[5] = trees.tree_count
    with pytest.raises(ValueError, match="index out of themselves"):
        score(trees=beyond)
    short = trees.starts.copy()
    short[-1] -= 1
    with pytest.raises(ValueError, match="index out of themselves"):
        score(starts=short)
    with pytest.raises(ValueError, match="leaf_values holds"):
        score(leaf_values=trees.leaf_values[:-1])


@pytest.mark.parametrize("access", ["nr", "wifi", "lifi"])
def test_the_service_scores_the_shipped_models_with_the_core_alike(access: str) -> None:
    """What the estimator reads (``OnnxCapacityModel.predict``) is the same whether the core or
    onnxruntime scores the ensembles."""
    _needs_core()
    with_core = OnnxCapacityModel.shipped(access)
    assert with_core.tables_made(timeout=120)
    assert set(with_core.scored_by.values()) == {"tree core"}
    alone = OnnxCapacityModel.shipped(access)
    assert alone.tables_made(timeout=120)
    alone.trees.clear()
    model = onnx.load(str(SHIPPED / f"{access}.estimate.onnx"))
    x = _rows_at_the_edges(_thresholds(model), len(with_core.card["features"]), 2000, seed=1)
    x[:, with_core._reference] = np.abs(x[:, with_core._reference])  # (references to scale)
    got, expected = with_core.predict(x), alone.predict(x)
    for field in ("estimate_mbps", "lower_mbps", "upper_mbps"):
        np.testing.assert_array_equal(getattr(got, field), getattr(expected, field))
    assert got.refused_rows == expected.refused_rows


def test_bench_trees_prints_both_and_the_same_bits() -> None:
    """`atsss bench trees` times onnxruntime and the core on the same rows of every shipped
    ensemble and says they gave the same values."""
    _needs_core()
    result = subprocess.run(
        [sys.executable, "-m", "atsss", "bench", "trees", "--rows", "50", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(" yes ") == len(SHIPPED_FILES)
    assert "onnxruntime ms" in result.stdout
    assert "all nine" in result.stdout
