"""Serve a shipped model with onnxruntime: batched, with its prediction interval.

The model card names the features in order; the runtime refuses a model whose card does not
match this code's feature definitions, so training and serving cannot drift apart silently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from models.features import feature_names

SHIPPED = Path(__file__).with_name("shipped")


class ModelError(ValueError):
    pass


@dataclass(frozen=True)
class Prediction:
    estimate_mbps: npt.NDArray[np.float32]
    lower_mbps: npt.NDArray[np.float32]
    upper_mbps: npt.NDArray[np.float32]


class OnnxCapacityModel:
    def __init__(self, card_path: Path) -> None:
        import onnxruntime

        try:
            self.card = json.loads(card_path.read_text())
        except (OSError, ValueError) as error:
            raise ModelError(f"{card_path}: cannot read the model card: {error}") from error
        self.access = str(self.card["access"])
        names = [f["name"] for f in self.card["features"]]
        if names != feature_names(self.access):
            raise ModelError(
                f"{card_path}: the card's features differ from models/features.py; retrain"
            )
        self.sessions = {}
        for part in ("estimate", "lower", "upper"):
            path = card_path.parent / self.card["onnx"][part]["file"]
            self.sessions[part] = onnxruntime.InferenceSession(
                str(path), providers=["CPUExecutionProvider"]
            )

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
        out = {}
        for part, session in self.sessions.items():
            result = session.run(None, {session.get_inputs()[0].name: batch})[0]
            out[part] = np.maximum(np.asarray(result, dtype=np.float32).ravel(), 0.0)
        lower = np.minimum(out["lower"], out["estimate"])
        upper = np.maximum(out["upper"], out["estimate"])
        return Prediction(out["estimate"], lower, upper)
