"""A capacity model's tree ensemble (shipped, trained here or loaded at run time) scored by our
C core (``models/_tree_core.c``) instead of onnxruntime, where the ONNX file has the one shape
the core is written for.

That shape is what skl2onnx writes for scikit-learn's gradient boosting: a graph of a single
``TreeEnsembleRegressor`` from the float features to one value, whose nodes are "x <= t" tests
or leaves, whose trees have at most 32 leaves each, one leaf value each, summed with a base
value and no transform. Anything else (another operator, a transform, ``<`` tests, thresholds
in double, a tree of 40 leaves, a node reached twice) is refused with the reason, and
onnxruntime scores that model as before. onnxruntime is also the reference: for the shape
accepted the core gives its bits (tests/test_tree_core.py), and ``ATSSS_PURE_PYTHON=1`` or a
machine without a compiler leaves every model to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from core.compiled import compiled_core

core: Any = compiled_core("models._tree_core")

MAX_LEAVES = 32  # the core holds a tree's leaves as the bits of one uint32
ALL_LEAVES = 0xFFFFFFFF
ONNX_ML = "ai.onnx.ml"
# What a TreeEnsembleRegressor may carry here; nodes_hitrates only guide onnxruntime's layout.
_KNOWN_ATTRIBUTES = {
    "base_values",
    "n_targets",
    "nodes_falsenodeids",
    "nodes_featureids",
    "nodes_hitrates",
    "nodes_missing_value_tracks_true",
    "nodes_modes",
    "nodes_nodeids",
    "nodes_treeids",
    "nodes_truenodeids",
    "nodes_values",
    "post_transform",
    "aggregate_function",  # (SUM only)
    "target_ids",
    "target_nodeids",
    "target_treeids",
    "target_weights",
}


class NotScorableError(ValueError):
    """The model is not of the shape the core is written for; onnxruntime scores it."""


class CompiledTrees:
    """One tree ensemble laid out for the core: per feature, its nodes sorted by threshold,
    with the tree each is in and the leaves a false test keeps (tree_core.c says why)."""

    def __init__(
        self,
        features: int,
        base: float,
        leaf_values: npt.NDArray[np.float32],
        nodes: list[tuple[int, float, int, int, bool]],
    ) -> None:
        """``nodes``: (feature, threshold, tree, leaves kept when false, missing goes true)."""
        self.features = features
        self.tree_count = len(leaf_values)
        self.base = np.float32(base)
        self.leaf_values = np.ascontiguousarray(leaf_values, dtype=np.float32)
        ordered = sorted(nodes, key=lambda node: (node[0], node[1]))
        self.thresholds = np.array([n[1] for n in ordered], dtype=np.float32)
        self.trees = np.array([n[2] for n in ordered], dtype=np.int32)
        self.keeps = np.array([n[3] for n in ordered], dtype=np.uint32)
        self.starts = _starts([n[0] for n in ordered], features)
        to_false = [n for n in ordered if not n[4]]
        self.nan_trees = np.array([n[2] for n in to_false], dtype=np.int32)
        self.nan_keeps = np.array([n[3] for n in to_false], dtype=np.uint32)
        self.nan_starts = _starts([n[0] for n in to_false], features)

    @classmethod
    def from_onnx(cls, path: Path) -> CompiledTrees:
        """The ensemble in the ONNX file at ``path``; NotScorableError says why not."""
        import onnx

        try:
            model = onnx.load(str(path))
        except Exception as error:  # onnx raises its own types for bad files
            raise NotScorableError(f"{path}: not an ONNX model: {error}") from None
        return cls.from_model(model)

    @classmethod
    def from_model(cls, model: Any) -> CompiledTrees:
        import onnx

        graph = model.graph
        if len(graph.node) != 1:
            raise NotScorableError(f"{len(graph.node)} operators, not one TreeEnsembleRegressor")
        node = graph.node[0]
        if node.op_type != "TreeEnsembleRegressor" or node.domain != ONNX_ML:
            raise NotScorableError(f"the operator is {node.domain}.{node.op_type}")
        inputs = [i for i in graph.input if i.name not in {t.name for t in graph.initializer}]
        if len(inputs) != 1 or list(node.input) != [inputs[0].name]:
            raise NotScorableError("the ensemble does not read the graph's one input")
        if len(graph.output) != 1 or list(node.output) != [graph.output[0].name]:
            raise NotScorableError("the ensemble's output is not the graph's one output")
        tensor = inputs[0].type.tensor_type
        if tensor.elem_type != onnx.TensorProto.FLOAT:
            raise NotScorableError("the input is not float32")
        dims = tensor.shape.dim
        if len(dims) != 2 or not dims[1].HasField("dim_value"):
            raise NotScorableError("the input is not rows of a fixed number of features")
        features = int(dims[1].dim_value)
        if not 1 <= features <= (core.MAX_FEATURES if core is not None else 256):
            raise NotScorableError(f"{features} features")
        at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        unknown = set(at) - _KNOWN_ATTRIBUTES
        if unknown:
            raise NotScorableError(f"attributes the core does not follow: {sorted(unknown)}")
        if at.get("n_targets", 1) != 1:
            raise NotScorableError(f"{at['n_targets']} targets")
        if at.get("post_transform", b"NONE") != b"NONE":
            raise NotScorableError(f"post_transform {at['post_transform']!r}")
        if at.get("aggregate_function", b"SUM") != b"SUM":
            raise NotScorableError(f"aggregate_function {at['aggregate_function']!r}")
        base_values = list(at.get("base_values", []))
        if len(base_values) > 1:
            raise NotScorableError(f"{len(base_values)} base values")
        return cls._from_arrays(at, features, base_values[0] if base_values else 0.0)

    @classmethod
    def _from_arrays(cls, at: dict[str, Any], features: int, base: float) -> CompiledTrees:
        tree_ids = list(at.get("nodes_treeids", []))
        count = len(tree_ids)
        node_ids = list(at.get("nodes_nodeids", []))
        columns = {
            name: list(at.get(name, [0] * count))
            for name in (
                "nodes_featureids",
                "nodes_values",
                "nodes_modes",
                "nodes_truenodeids",
                "nodes_falsenodeids",
                "nodes_missing_value_tracks_true",
            )
        }
        if any(len(column) != count for column in columns.values()) or len(node_ids) != count:
            raise NotScorableError("the node arrays differ in length")
        if set(columns["nodes_modes"]) - {b"BRANCH_LEQ", b"LEAF"}:
            raise NotScorableError(f"node modes {sorted(set(columns['nodes_modes']))}")
        # Trees in ascending order (onnxruntime's order of summing), each one's nodes together,
        # its root first.
        order: list[int] = []
        firsts: list[int] = []  # where each tree's nodes start: its root
        place: dict[tuple[int, int], int] = {}
        for i, (tree, node) in enumerate(zip(tree_ids, node_ids, strict=True)):
            if not order or order[-1] != tree:
                if order and tree < order[-1]:
                    raise NotScorableError(f"tree {tree}'s nodes are not in order")
                order.append(tree)
                firsts.append(i)
            if (tree, node) in place:
                raise NotScorableError(f"tree {tree} lists node {node} twice")
            place[(tree, node)] = i
        weights: dict[int, float] = {}
        targets = zip(
            at.get("target_treeids", []),
            at.get("target_nodeids", []),
            at.get("target_ids", []),
            at.get("target_weights", []),
            strict=True,
        )
        for tree, node, target, weight in targets:
            where = place.get((tree, node))
            if where is None or target != 0 or where in weights:
                raise NotScorableError(f"tree {tree} node {node}: not one weight of a listed leaf")
            weights[where] = weight
        leaf_values = np.zeros((len(order), MAX_LEAVES), dtype=np.float32)
        nodes: list[tuple[int, float, int, int, bool]] = []
        thresholds = np.asarray(columns["nodes_values"], dtype=np.float32)
        ends = [*firsts[1:], count]
        for t, (tree, first, end) in enumerate(zip(order, firsts, ends, strict=True)):
            walk = _Walk(tree, t, place, weights, columns, thresholds, features)
            walk.leaves_under(first)
            if len(walk.seen) != end - first:
                raise NotScorableError(f"tree {tree} lists nodes its root does not reach")
            leaf_values[t, : len(walk.leaf_values)] = walk.leaf_values
            nodes += walk.nodes
        return cls(features, base, leaf_values, nodes)

    def predict(self, x: npt.NDArray[np.float32], lanes: int = 0) -> npt.NDArray[np.float32]:
        """The ensemble's value for each row of (rows × features) float32 ``x``, as
        onnxruntime's run gives it (flat). ``lanes``: rows scored at once, 8 or 16 (AVX-512
        only); 0, the widest this CPU has (the same values either way)."""
        rows = np.ascontiguousarray(x, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[1] != self.features:
            raise ValueError(f"expected rows of {self.features} features, got {rows.shape}")
        out = np.empty(len(rows), dtype=np.float32)
        core.score(
            self.thresholds,
            self.trees,
            self.keeps,
            self.starts,
            self.nan_trees,
            self.nan_keeps,
            self.nan_starts,
            self.leaf_values,
            rows,
            out,
            len(rows),
            self.features,
            self.tree_count,
            float(self.base),
            lanes,
        )
        return out


class _Walk:
    """One tree walked from its root, true side first: its leaves numbered left to right and
    each test node's entry (feature, threshold, tree, leaves kept when false, missing true)."""

    def __init__(
        self,
        tree: int,
        index: int,
        place: dict[tuple[int, int], int],
        weights: dict[int, float],
        columns: dict[str, list[Any]],
        thresholds: npt.NDArray[np.float32],
        features: int,
    ) -> None:
        self.tree, self.index, self.place, self.weights = tree, index, place, weights
        self.columns, self.thresholds, self.features = columns, thresholds, features
        self.seen: set[int] = set()
        self.leaf_values: list[float] = []
        self.nodes: list[tuple[int, float, int, int, bool]] = []

    def leaves_under(self, node: int) -> None:
        """Number the leaves under ``node`` (a place in the node arrays) from the next one on.
        Recursion as deep as the tree: at most MAX_LEAVES - 1 tests on the way to a leaf, as
        the count of leaves stops the walk first."""
        tree, columns = self.tree, self.columns
        if node in self.seen:
            raise NotScorableError(f"tree {tree} reaches a node twice")
        self.seen.add(node)
        if columns["nodes_modes"][node] == b"LEAF":
            if node not in self.weights:
                raise NotScorableError(f"tree {tree}: a leaf without a value")
            if len(self.leaf_values) == MAX_LEAVES:
                raise NotScorableError(f"tree {tree} has more than {MAX_LEAVES} leaves")
            self.leaf_values.append(self.weights[node])
            return
        if node in self.weights:
            raise NotScorableError(f"tree {tree}: a value on a test node")
        true_side = self.place.get((tree, columns["nodes_truenodeids"][node]))
        false_side = self.place.get((tree, columns["nodes_falsenodeids"][node]))
        if true_side is None or false_side is None:
            raise NotScorableError(f"tree {tree}: a child that is not listed")
        feature, threshold = int(columns["nodes_featureids"][node]), self.thresholds[node]
        if not 0 <= feature < self.features or np.isnan(threshold):
            raise NotScorableError(f"tree {tree}: a test of feature {feature} at {threshold}")
        first = len(self.leaf_values)
        self.leaves_under(true_side)
        true_leaves = ((1 << len(self.leaf_values)) - 1) & ~((1 << first) - 1)
        missing_true = bool(columns["nodes_missing_value_tracks_true"][node])
        self.nodes.append(
            (feature, float(threshold), self.index, ALL_LEAVES & ~true_leaves, missing_true)
        )
        self.leaves_under(false_side)


def _starts(features_of: list[int], features: int) -> npt.NDArray[np.int32]:
    """Where each feature's entries start in a list sorted by feature, and the list's end."""
    return np.searchsorted(np.asarray(features_of, dtype=np.int64), np.arange(features + 1)).astype(
        np.int32
    )


def compiled_trees(path: Path) -> tuple[CompiledTrees | None, str]:
    """The ensemble at ``path`` for the core, or None and why onnxruntime scores it."""
    if core is None:
        return None, "the tree core is not built here (or ATSSS_PURE_PYTHON=1)"
    try:
        return CompiledTrees.from_onnx(path), ""
    except NotScorableError as error:
        return None, str(error)
    except Exception as error:  # an attribute of a type no exporter writes, and the like
        return None, f"its trees could not be read ({type(error).__name__}: {error})"
