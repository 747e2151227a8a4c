"""``atsss bench policy``: how many weight decisions per second one core makes, one CPE at a
time through the policy (its Python included), and a fleet at once through the batched
searches a step uses (the C core where it is built)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from core.domain import CapacityEstimate, Direction
from xapp.policy.optimal import optimal_weights, optimal_weights_batch
from xapp.policy.robust import robust_weights_many
from xapp.policy.weight_policy import PathView, PolicyConfig, PolicyInput, make_policy

ACCESSES = ("nr", "wifi", "lifi")
MEANS_MBPS = (342.0, 1190.0, 12.1)


@dataclass(frozen=True)
class PolicyBenchResult:
    name: str
    decisions: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.decisions / self.seconds if self.seconds else float("inf")

    @property
    def microseconds_each(self) -> float:
        return 1e6 * self.seconds / self.decisions


def run_policy_bench(
    cpes: int, noise_ratio: float = 0.05, seed: int = 0
) -> list[PolicyBenchResult]:
    rng = np.random.default_rng(seed)
    scales = rng.uniform(0.05, 1.0, size=(cpes, len(ACCESSES)))
    capacities = scales * np.array(MEANS_MBPS)
    requests = [
        PolicyInput(
            f"cpe-{i}",
            Direction.DOWNLINK,
            0.0,
            tuple(
                PathView(
                    a,
                    CapacityEstimate(
                        f"cpe-{i}",
                        a,
                        Direction.DOWNLINK,
                        float(c),
                        noise_ratio * float(c),
                        "bench",
                        0.0,
                    ),
                )
                for a, c in zip(ACCESSES, row, strict=True)
            ),
            current={"nr": 1, "wifi": 1, "lifi": 1},
        )
        for i, row in enumerate(capacities)
    ]
    results = []
    started = time.perf_counter()
    for row in capacities:
        optimal_weights(row.tolist())
    results.append(PolicyBenchResult("exact optimum only", cpes, time.perf_counter() - started))
    for name in ("optimal", "proportional"):
        policy = make_policy(name)
        started = time.perf_counter()
        for request in requests:
            policy.propose(request)
        results.append(
            PolicyBenchResult(f"policy {name} (full proposal)", cpes, time.perf_counter() - started)
        )
    # The searches alone, as a step's rows call them: every CPE's beliefs in one call.
    config = PolicyConfig()
    started = time.perf_counter()
    optimal_weights_batch(capacities, config.max_weight)
    results.append(
        PolicyBenchResult("exact optimum, the fleet at once", cpes, time.perf_counter() - started)
    )
    started = time.perf_counter()
    robust_weights_many(capacities, noise_ratio * capacities, config.max_weight, config.quantile)
    results.append(
        PolicyBenchResult("robust weights, the fleet at once", cpes, time.perf_counter() - started)
    )
    return results
