"""Serve a shipped model with onnxruntime: batched, with its prediction interval.

The model card names the features in order; the runtime refuses a model whose card does not
match this code's feature definitions, so training and serving cannot drift apart silently.
"""

from __future__ import annotations

import contextlib
import json
import re
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from core.domain import MAX_CAPACITY_MBPS
from models.features import REFERENCE, TARGET_TRANSFORM, feature_names, from_log_ratio
from models.tree_scorer import CompiledTrees, compiled_trees

SHIPPED = Path(__file__).with_name("shipped")


# Nor is a log ratio past this (e^12 ≈ 160,000×; 0 to 10 Gbit/s is e^9.2 with the offset).
MAX_LOG_RATIO = 12.0


class ModelError(ValueError):
    pass


# The threads making loaded models' tree tables (``OnnxCapacityModel``), for a benchmark to
# wait for them before it times anything (``every_table_made``).
_MAKING_TABLES: list[threading.Thread] = []


def every_table_made(timeout: float | None = None) -> bool:
    """Whether every model loaded so far has its scorers settled, waiting at most ``timeout``
    seconds for each (a thread leaves the list as it ends)."""
    for thread in list(_MAKING_TABLES):
        thread.join(timeout)
    return not any(thread.is_alive() for thread in list(_MAKING_TABLES))


# What a model loaded at run time may weigh: a card is a few kB, each ONNX file under a MB (the
# shipped ones are tens of kB); far above that is not a model.
MAX_CARD_BYTES = 1 << 20
MAX_ONNX_BYTES = 64 << 20
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def find_model_card(folder: Path, name: str, access: str) -> Path:
    """The card of the model ``name`` for ``access`` in ``folder`` (``<folder>/<name>/<access>
    .card.json``, what ``atsss train --out <folder>/<name>`` writes). Raises ModelError, with
    the cause for the log, when the name is not a plain name or the card is not a regular file
    of a sane size inside the folder."""
    if not MODEL_NAME.fullmatch(name) or ".." in name:
        raise ModelError(f"{name!r} is not a model name (letters, digits, . _ -)")
    return checked_model_file(folder, folder / name / f"{access}.card.json", MAX_CARD_BYTES)


def checked_model_file(folder: Path, path: Path, max_bytes: int) -> Path:
    """``path`` if it is a regular file of at most ``max_bytes`` inside ``folder`` once links
    are followed; ModelError (for the log) otherwise."""
    try:
        real = path.resolve(strict=True)
        inside = real.is_relative_to(folder.resolve(strict=True))
        status = real.stat()
    except (OSError, RuntimeError) as error:
        raise ModelError(f"{path}: {error}") from None
    if not inside:
        raise ModelError(f"{path} leads out of the models folder {folder}")
    if not stat.S_ISREG(status.st_mode):
        raise ModelError(f"{path} is not a regular file")
    if status.st_size > max_bytes:
        raise ModelError(f"{path} has {status.st_size} bytes, more than {max_bytes}")
    return real


@dataclass(frozen=True)
class Prediction:
    estimate_mbps: npt.NDArray[np.float32]
    lower_mbps: npt.NDArray[np.float32]
    upper_mbps: npt.NDArray[np.float32]
    # Rows where the lower model said more than the upper one (before the two were put around
    # the estimate): most of them means the card swapped the two files.
    crossed_share: float = 0.0
    # Rows whose forecast was garbage (NaN in every part, as rows without a reference), and
    # what was wrong with the first: one node's absurd counters, or a model going bad.
    refused_rows: tuple[int, ...] = ()
    refused_reason: str = ""


class OnnxCapacityModel:
    def __init__(self, card_path: Path, within: Path | None = None) -> None:
        """``within``: a models folder every file the card names must be a regular file of a
        sane size inside (a model loaded at run time); None for the shipped and trained ones."""
        import onnxruntime

        try:
            self.card = json.loads(card_path.read_text())
        except (OSError, ValueError) as error:
            raise ModelError(f"{card_path}: cannot read the model card: {error}") from error
        try:
            self.access = str(self.card["access"])
            names = [f["name"] for f in self.card["features"]]
        except (KeyError, TypeError) as error:
            raise ModelError(
                f"{card_path}: not a model card (it needs access, features[].name and onnx; "
                f"missing or malformed: {error})"
            ) from None
        if names != feature_names(self.access):
            raise ModelError(
                f"{card_path}: the card's features differ from models/features.py; retrain"
            )
        if self.card.get("target_transform") != TARGET_TRANSFORM:
            raise ModelError(
                f"{card_path}: the card's target_transform is not {TARGET_TRANSFORM}; retrain"
            )
        self._reference = names.index(REFERENCE)
        self.name = card_path.name.removesuffix(".card.json")
        self.card_path = card_path
        self.sessions = {}
        # Each part's ensemble as our tree core scores it, where the file has the shape the
        # core is written for (models/tree_scorer.py); onnxruntime scores the others, and is
        # the reference the core is held to.
        self.trees: dict[str, CompiledTrees] = {}
        self.scored_by: dict[str, str] = {}
        paths: dict[str, Path] = {}
        for part in ("estimate", "lower", "upper"):
            try:
                path = card_path.parent / self.card["onnx"][part]["file"]
                if within is not None:
                    path = checked_model_file(within, path, MAX_ONNX_BYTES)
                session = onnxruntime.InferenceSession(
                    str(path), _one_thread(), providers=["CPUExecutionProvider"]
                )
            except (KeyError, TypeError) as error:
                raise ModelError(f"{card_path}: the card names no {part} model") from error
            except Exception as error:  # onnxruntime raises its own types for bad files
                raise ModelError(f"{path}: cannot load the ONNX model: {error}") from error
            width = session.get_inputs()[0].shape[-1]
            if isinstance(width, int) and width != len(names):
                raise ModelError(
                    f"{path}: the model takes {width} features, the card lists {len(names)} "
                    "(wrong feature set)"
                )
            self.sessions[part] = session
            paths[part] = path
            self.scored_by[part] = "onnxruntime (the tree core's tables are being made)"
        # Reading a file's trees takes onnx's pure-Python protobuf about 0.2 s a file, 1.8 s
        # for the three accesses' nine: done beside the service's start rather than before
        # it (the simulator's E2 setup waited on it under a busy test suite). Until a part's
        # tables are made, onnxruntime scores it: the same values, bit for bit.
        self._tables_made = threading.Thread(
            target=self._make_tables,
            args=(paths, len(names)),
            name=f"model-trees-{self.name}",
            # Not a daemon: a process ending while the thread is in onnx's C++ (its import)
            # aborted ("terminate called without an active exception", `atsss xapp run`
            # refusing its arguments); the exit waits for the thread instead, a second or two.
            daemon=False,
        )
        _MAKING_TABLES.append(self._tables_made)  # (before it starts: it removes itself)
        self._tables_made.start()

    def _make_tables(self, paths: dict[str, Path], features: int) -> None:
        try:
            for part, path in paths.items():
                trees, why_not = compiled_trees(path)
                if trees is not None and trees.features == features:
                    self.trees[part] = trees
                    self.scored_by[part] = "tree core"
                else:
                    self.scored_by[part] = f"onnxruntime ({why_not or 'another feature count'})"
        finally:
            # (each model reloaded adds one: ended ones are not kept)
            with contextlib.suppress(ValueError):
                _MAKING_TABLES.remove(threading.current_thread())

    def tables_made(self, timeout: float | None = None) -> bool:
        """Whether every part's scorer is settled (the tree core's tables made, or onnxruntime
        kept), waiting at most ``timeout`` seconds (None: until it is)."""
        self._tables_made.join(timeout)
        return not self._tables_made.is_alive()

    @classmethod
    def shipped(cls, access: str) -> OnnxCapacityModel:
        return cls(SHIPPED / f"{access}.card.json")

    def predict(self, features: npt.NDArray[np.float32]) -> Prediction:
        if features.ndim != 2 or features.shape[1] != len(self.card["features"]):
            raise ModelError(
                f"expected rows of {len(self.card['features'])} features, "
                f"got shape {features.shape}"
            )
        batch = features.astype(np.float32)
        reference = batch[:, self._reference].astype(np.float64)
        # A row without a reference capacity has nothing to scale: NaN, for the caller to skip.
        known = np.isfinite(reference) & (reference >= 0)
        # A row whose forecast is garbage (NaN, e^12 times its reference, beyond any access) is
        # refused alone: one node's absurd counters must not cost a fleet its model. A model
        # that answers garbage for every row it could scale is broken (ModelError).
        refused = np.zeros(len(batch), dtype=bool)
        reasons: list[str] = []
        out = {}
        for part, session in self.sessions.items():
            trees = self.trees.get(part)
            raw = (
                trees.predict(batch)
                if trees is not None
                else session.run(None, {session.get_inputs()[0].name: batch})[0]
            )
            result = np.asarray(raw, dtype=np.float64).ravel()
            finite = np.isfinite(result)
            within = np.abs(result) <= MAX_LOG_RATIO  # (NaN and infinities are not)
            if (known & ~finite).any():
                reasons.append(f"the {self.name} {part} model produced NaN or infinite values")
            far = known & finite & ~within
            if far.any():
                worst = float(result[far][np.argmax(np.abs(result[far]))])
                reasons.append(
                    f"the {self.name} {part} model predicted a capacity e^{worst:.3g} times "
                    "its reference"
                )
            scaled = known & within
            mbps = np.full(len(batch), np.nan)
            mbps[scaled] = from_log_ratio(result[scaled], reference[scaled])
            beyond = scaled & (mbps > MAX_CAPACITY_MBPS)
            if beyond.any():
                reasons.append(
                    f"the {self.name} {part} model predicted {float(np.max(mbps[beyond])):.3g} "
                    f"Mbit/s, beyond any access ({MAX_CAPACITY_MBPS:g})"
                )
            refused |= (known & ~within) | beyond
            out[part] = mbps
        if refused.any() and not (known & ~refused).any():
            raise ModelError(reasons[0])
        known &= ~refused
        for part in out:
            out[part] = np.where(known, out[part], np.nan).astype(np.float32)
        crossed = float(np.mean(out["lower"][known] > out["upper"][known])) if known.any() else 0.0
        lower = np.minimum(out["lower"], out["estimate"])
        upper = np.maximum(out["upper"], out["estimate"])
        return Prediction(
            out["estimate"],
            lower,
            upper,
            crossed,
            tuple(np.flatnonzero(refused).tolist()),
            reasons[0] if reasons else "",
        )


def _one_thread() -> Any:
    """Inference on the calling thread alone. By default onnxruntime runs a pool of one
    thread per core that spins between runs: on a 2-core machine the xApp's processing then
    cost 1.7 times its wall time in CPU (`atsss bench xapp --cpes 1000`: 586 ms of CPU in a
    342 ms period), CPU a replica's limit counts and the rest of the node pays for. A
    period's batch of a thousand paths is worked out in about a millisecond per model on one
    thread."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return options
