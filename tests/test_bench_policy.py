"""`atsss bench policy`: one CPE at a time through the policy, and a fleet at once through the
batched searches a step uses."""

from __future__ import annotations

import subprocess
import sys

from bench.policy_bench import run_policy_bench


def test_the_bench_times_one_cpe_at_a_time_and_the_fleet_at_once() -> None:
    results = run_policy_bench(40)
    assert [r.name for r in results] == [
        "exact optimum only",
        "policy optimal (full proposal)",
        "policy proportional (full proposal)",
        "exact optimum, the fleet at once",
        "robust weights, the fleet at once",
    ]
    assert all(r.decisions == 40 and r.seconds > 0 for r in results)


def bench_policy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "atsss", "bench", "policy", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_command_prints_every_row_and_refuses_an_empty_fleet() -> None:
    done = bench_policy("--cpes", "30")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "robust weights, the fleet at once" in done.stdout
    refused = bench_policy("--cpes", "0")
    assert refused.returncode != 0
    assert "--cpes must be ≥ 1, got 0" in refused.stderr + refused.stdout
