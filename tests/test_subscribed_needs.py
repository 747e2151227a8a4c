"""A deployment's default subscription carries what the xApp's estimators read.

With four measurements per node (throughput, one resource KPI, one radio KPI) the live system
knew NR's downlink and the Wi-Fi and LiFi uplinks only from below, while `bench loop`, whose
nodes report everything, knew them exactly: the two disagreed on the same seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.simulated import SimulatedKpis
from core.domain import Direction
from core.scenario.e2_identities import DEFAULT_SUBSCRIBED, OFFERED
from core.scenario.load import load_scenario
from core.scenario.truth import sample_truth
from xapp.estimators.kpi import KpiEstimator
from xapp.estimators.model import KPI_COLUMNS


def test_the_default_subscription_is_what_the_simulated_nodes_offer() -> None:
    for access, names in DEFAULT_SUBSCRIBED.items():
        assert set(names) <= set(OFFERED[access]), access


@pytest.mark.parametrize("access", sorted(KPI_COLUMNS))
def test_the_models_get_every_kpi_they_were_trained_on(access: str) -> None:
    wanted = set(KPI_COLUMNS[access]) | ({"CARR.WBCQIDist"} if access == "nr" else set())
    assert wanted <= set(DEFAULT_SUBSCRIBED[access])


# The paths whose headroom the KPIs can tell: all of them, NR's uplink through its own PRB
# counters (without them it was known only from below, and explored).
MEASURABLE = [
    ("nr", Direction.DOWNLINK),
    ("nr", Direction.UPLINK),
    ("wifi", Direction.DOWNLINK),
    ("wifi", Direction.UPLINK),
    ("lifi", Direction.DOWNLINK),
    ("lifi", Direction.UPLINK),
]


@pytest.mark.parametrize(("access", "direction"), MEASURABLE)
def test_with_the_default_subscription_a_path_held_back_is_still_measured(
    access: str, direction: Direction
) -> None:
    """A path carrying a tenth of its capacity (its weight held it back) is estimated from
    its headroom, not only as the lower bound its throughput is."""
    scenario = load_scenario("paper-static").cut(5)
    truth = sample_truth(scenario, direction, 1.0)
    subscribed = {a: frozenset(DEFAULT_SUBSCRIBED[a]) for a in truth.accesses}
    kpis = SimulatedKpis(truth, direction, seed=1, node_measurements=subscribed)
    capacity = truth.usable_mbps[2]
    samples = kpis.samples(2, 3.0, 1.0, capacity, capacity * 0.1)
    estimator = KpiEstimator()
    estimator.update(samples, 3.0)
    cpe_id = truth.cpe_ids[0]
    estimate = estimator.estimate(cpe_id, access, direction, 3.0)
    assert estimate is not None
    assert not estimate.lower_bound
    a = truth.accesses.index(access)
    assert estimate.capacity_mbps == pytest.approx(float(capacity[0, a]), rel=0.25)
    assert np.isfinite(estimate.stddev_mbps)
