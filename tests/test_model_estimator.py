"""The ModelEstimator on KPIs that went the whole E2 way: simulator → E2SM-KPM → processor."""

from __future__ import annotations

import pytest

from e2sim.identities import e2_cpes, node_name
from e2sim.node import SimulatedNode
from e2sim.world import SimWorld
from kpm import builders, e2ap
from kpm.codec import KpmPdu, codec_for
from kpm.versions import KpmVersion
from xapp.domain import Direction, KpiSample
from xapp.e2.config import E2NodeConfig
from xapp.e2.indications import IndicationProcessor
from xapp.estimators.model import ModelEstimator
from xapp.scenario.load import load_scenario

V3 = KpmVersion.V3_00
SUBSCRIBED = {
    "nr": ("DRB.UEThpDl", "L1M.SS-SINR", "L1M.SS-RSRP", "CARR.WBCQIDist"),
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
    estimator.update(samples)
    estimates = {
        a: estimator.estimate("cpe-1", a, Direction.DOWNLINK, 12.0) for a in ("nr", "wifi", "lifi")
    }
    truth = {a: float(world.truth(11, a).capacity_dl_mbps[0]) for a in ("nr", "wifi", "lifi")}
    for access, tolerance in (("nr", 0.2), ("wifi", 0.15), ("lifi", 0.35)):
        estimate = estimates[access]
        assert estimate is not None, access
        assert estimate.source == "model"
        assert estimate.capacity_mbps == pytest.approx(truth[access], rel=tolerance), access
        assert estimate.stddev_mbps >= 0
    assert estimator.estimate("cpe-1", "nr", Direction.UPLINK, 12.0) is None


def test_link_down_is_reported_unavailable() -> None:
    estimator = ModelEstimator()
    base = {"LIFI.StaSnr": 2.0, "LIFI.StaPhyRateDl": 12.0}
    estimator.update(
        [
            KpiSample(
                "cpe-1",
                "lifi",
                Direction.DOWNLINK,
                float(t),
                1.0,
                throughput_mbps=12.0,
                available=True,
                measurements={**base, "LIFI.LinkState": 1.0},
            )
            for t in range(5)
        ]
        + [
            KpiSample(
                "cpe-1",
                "lifi",
                Direction.DOWNLINK,
                5.0,
                1.0,
                throughput_mbps=0.0,
                available=False,
                measurements={**base, "LIFI.LinkState": 0.0},
            )
        ]
    )
    estimate = estimator.estimate("cpe-1", "lifi", Direction.DOWNLINK, 6.0)
    assert estimate is not None
    assert not estimate.available
    assert estimate.capacity_mbps == 0.0
