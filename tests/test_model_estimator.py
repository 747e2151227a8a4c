"""The ModelEstimator on KPIs that went the whole E2 way: simulator → E2SM-KPM → processor."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from core.domain import Direction, KpiSample
from core.scenario.e2_identities import e2_cpes, node_name
from core.scenario.load import load_scenario
from e2sim.node import SimulatedNode
from e2sim.world import SimWorld
from kpm import builders, e2ap
from kpm.codec import KpmPdu, codec_for
from kpm.versions import KpmVersion
from models import runtime
from models.runtime import SHIPPED, ModelError, OnnxCapacityModel
from xapp.e2.config import E2NodeConfig
from xapp.e2.indications import IndicationProcessor
from xapp.estimators.fusion import FusedEstimator
from xapp.estimators.kpi import KpiEstimator
from xapp.estimators.model import ModelEstimator

V3 = KpmVersion.V3_00
SUBSCRIBED = {
    "nr": (
        "DRB.UEThpDl",
        "L1M.SS-SINR",
        "L1M.SS-RSRP",
        "CARR.WBCQIDist",
        "CARR.AverageLayersDl",
        "RRU.PrbUsedDl",
        "RRU.PrbAvailDl",
        "RRU.PrbTotDl",
    ),
    "wifi": (
        "WLAN.StaThpDl",
        "WLAN.StaRssi",
        "WLAN.StaSnr",
        "WLAN.StaMcsDl",
        "WLAN.StaNssDl",
        "WLAN.StaPhyRateDl",
        "WLAN.StaAirtime",
        "WLAN.ChannelUtilization",
    ),
    "lifi": ("LIFI.StaThpDl", "LIFI.StaSnr", "LIFI.StaPhyRateDl", "LIFI.LinkState"),
}


def kpis_through_e2(scenario_name: str, ticks: int) -> tuple[list[KpiSample], SimWorld]:
    scenario = load_scenario(scenario_name)
    world = SimWorld(scenario)
    processor = IndicationProcessor(e2_cpes(scenario))
    samples: list[KpiSample] = []
    for access in world.accesses:
        processor.set_node(
            E2NodeConfig(node=node_name(access), access=access, measurements=SUBSCRIBED[access]), V3
        )
        # never connected: only its message building is used
        node = SimulatedNode(access, ("127.0.0.1", 1), [1])
        codec = codec_for(V3)
        for tick in range(ticks):
            report = world.report(world.truth(tick, access), tick)
            message = node._per_ue_message(SUBSCRIBED[access], report, 1000)
            header = builders.header(1_700_000_000.0 + tick, V3)
            pdu = e2ap.encode(
                e2ap.Indication(
                    e2ap.RicRequestId(1, 1),
                    2,
                    1,
                    codec.encode(KpmPdu.HEADER, header),
                    codec.encode(KpmPdu.MESSAGE, message),
                )
            )
            samples += processor.handle_payload(node_name(access), pdu)
    return samples, world


def test_estimates_follow_the_true_capacity() -> None:
    samples, world = kpis_through_e2("paper-static", ticks=12)
    estimator = ModelEstimator()
    estimator.update(samples, 12.0)
    estimates = {
        a: estimator.estimate("cpe-1", a, Direction.DOWNLINK, 12.0) for a in ("nr", "wifi", "lifi")
    }
    truth = {a: float(world.truth(11, a).capacity_dl_mbps[0]) for a in ("nr", "wifi", "lifi")}
    for access, tolerance in (("nr", 0.1), ("wifi", 0.1), ("lifi", 0.35)):
        estimate = estimates[access]
        assert estimate is not None, access
        assert estimate.source == "model"
        assert estimate.capacity_mbps == pytest.approx(truth[access], rel=tolerance), access
        assert estimate.stddev_mbps >= 0
    assert estimator.estimate("cpe-1", "nr", Direction.UPLINK, 12.0) is None


def test_link_down_is_reported_unavailable() -> None:
    estimator = ModelEstimator()
    down = KpiSample(
        "cpe-1",
        "lifi",
        Direction.DOWNLINK,
        5.0,
        1.0,
        throughput_mbps=0.0,
        available=False,
        measurements={"LIFI.StaSnr": 2.0, "LIFI.StaPhyRateDl": 12.0, "LIFI.LinkState": 0.0},
    )
    estimator.update([*lifi_history(), down], 5.0)
    estimate = estimator.estimate("cpe-1", "lifi", Direction.DOWNLINK, 6.0)
    assert estimate is not None
    assert not estimate.available
    assert estimate.capacity_mbps == 0.0


def lifi_history() -> list[KpiSample]:
    return [
        KpiSample(
            "cpe-1",
            "lifi",
            Direction.DOWNLINK,
            float(t),
            1.0,
            throughput_mbps=12.0,
            available=True,
            measurements={"LIFI.StaSnr": 2.0, "LIFI.StaPhyRateDl": 12.0, "LIFI.LinkState": 1.0},
        )
        for t in range(5)
    ]


def copy_shipped(tmp_path: Path, access: str) -> Path:
    for file in SHIPPED.glob(f"{access}.*"):
        shutil.copy(file, tmp_path / file.name)
    return tmp_path / f"{access}.card.json"


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("missing", "cannot load the ONNX model"),
        ("corrupt", "cannot load the ONNX model"),
        ("features", "features differ"),
        ("card", "cannot read the model card"),
    ],
)
def test_a_bad_model_file_is_refused_with_its_reason(
    tmp_path: Path, damage: str, reason: str
) -> None:
    card = copy_shipped(tmp_path, "lifi")
    if damage == "missing":
        (tmp_path / "lifi.estimate.onnx").unlink()
    elif damage == "corrupt":
        (tmp_path / "lifi.estimate.onnx").write_bytes(b"not an onnx model")
    elif damage == "features":
        data = json.loads(card.read_text())
        data["features"] = data["features"][:-1]
        card.write_text(json.dumps(data))
    else:
        card.write_text("{")
    with pytest.raises(ModelError, match=reason):
        OnnxCapacityModel(card)


def test_a_model_for_another_feature_set_is_refused(tmp_path: Path) -> None:
    card = copy_shipped(tmp_path, "lifi")
    shutil.copy(SHIPPED / "wifi.estimate.onnx", tmp_path / "lifi.estimate.onnx")
    with pytest.raises(ModelError, match="wrong feature set"):
        OnnxCapacityModel(card)


def constant_model(path: Path, features: int, value: float) -> None:
    """A real ONNX model that answers ``value`` whatever its input: X·0 + value."""
    weights = onnx.numpy_helper.from_array(np.zeros((features, 1), dtype=np.float32), "W")
    bias = onnx.numpy_helper.from_array(np.array([value], dtype=np.float32), "B")
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("MatMul", ["X", "W"], ["XW"]),
            onnx.helper.make_node("Add", ["XW", "B"], ["Y"]),
        ],
        "constant",
        [onnx.helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [None, features])],
        [onnx.helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, [None, 1])],
        initializer=[weights, bias],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


@pytest.mark.parametrize("value", [math.nan, -50.0])
def test_garbage_out_makes_the_estimator_unavailable_and_fusion_carries_on(
    tmp_path: Path, value: float
) -> None:
    card = copy_shipped(tmp_path, "lifi")
    width = len(json.loads(card.read_text())["features"])
    constant_model(tmp_path / "lifi.estimate.onnx", width, value)
    model = ModelEstimator({"lifi": OnnxCapacityModel(card)})
    model.update(lifi_history(), 4.0)
    assert model.estimate("cpe-1", "lifi", Direction.DOWNLINK, 4.0) is None
    assert "lifi" in model.unavailable
    kpi = KpiEstimator()
    fused = FusedEstimator([kpi, model])
    fused.update(lifi_history(), 4.0)
    estimate = fused.estimate("cpe-1", "lifi", Direction.DOWNLINK, 4.0)
    assert estimate is not None
    assert estimate.capacity_mbps == pytest.approx(12.0)


def test_missing_shipped_models_leave_the_estimator_unavailable_not_crashed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(runtime, "SHIPPED", tmp_path)
    model = ModelEstimator()
    assert set(model.unavailable) == {"nr", "wifi", "lifi"}
    model.update(lifi_history(), 4.0)
    assert model.estimate("cpe-1", "lifi", Direction.DOWNLINK, 4.0) is None
