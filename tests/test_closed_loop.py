"""Closed-loop evaluation on the shipped scenarios, through the library and the real CLI."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench.closed_loop import LoopSettings, evaluate
from core.scenario.load import load_scenario


@pytest.fixture(scope="module")
def static_report():  # type: ignore[no-untyped-def]
    return evaluate(load_scenario("paper-static"))


def test_static_oracle_round_robin_and_baselines(static_report) -> None:  # type: ignore[no-untyped-def]
    by_name = {r.name: r for r in static_report.results}
    assert set(by_name) == {
        "optimal",
        "proportional",
        "rr",
        "paper-probe",
        "report-oracle",
        "oracle",
    }
    assert by_name["oracle"].efficiency >= 0.98
    assert 0.97 <= by_name["report-oracle"].efficiency <= by_name["oracle"].efficiency
    assert by_name["rr"].efficiency == pytest.approx(36.3 / 1544.1, abs=0.001)
    assert by_name["optimal"].efficiency >= 0.95
    assert by_name["proportional"].efficiency >= 0.95
    # The paper's probes take 10/11 of every path for 5 s of every 10 s.
    assert 0.4 < by_name["paper-probe"].efficiency < 0.6
    assert by_name["paper-probe"].probe_traffic_fraction is not None
    assert by_name["rr"].weight_pushes == 0


def test_the_report_oracle_knows_each_change_only_at_the_next_report() -> None:
    """On paper-interruption a link goes and another comes back every 5 s. The instant oracle
    loses only MPTCP's reconnection; a loop fed by reports also loses the period until the
    report, and the more so the longer the period."""
    scenario = load_scenario("paper-interruption").cut(30.0)
    efficiency = {}
    for period_s in (0.2, 1.0):
        report = evaluate(
            scenario,
            LoopSettings(reporting_period_s=period_s, contenders=("report-oracle", "oracle")),
        )
        efficiency[period_s] = report.result("report-oracle").efficiency
        oracle = report.result("oracle").efficiency
        assert efficiency[period_s] < oracle - 0.01
    assert efficiency[1.0] < efficiency[0.2] - 0.03
    trace = report.trace
    wifi = trace.accesses.index("wifi")
    back = (trace.times_s >= 5.0) & (trace.times_s <= 6.0)  # Wi-Fi is back from 5 s
    assert (trace.weights["report-oracle"][back, wifi] == 0).all()
    assert trace.weights["report-oracle"][trace.times_s >= 6.1][0, wifi] > 0


def test_the_loop_beats_the_proportional_rule_when_capacities_move() -> None:
    report = evaluate(
        load_scenario("paper-dynamic"), LoopSettings(contenders=("optimal", "proportional"))
    )
    assert report.result("optimal").efficiency > report.result("proportional").efficiency


def test_an_outage_puts_the_path_on_standby_within_one_reporting_period() -> None:
    report = evaluate(
        replace(load_scenario("paper-interruption"), duration_s=30),
        LoopSettings(contenders=("optimal",)),
    )
    trace = report.trace
    wifi = trace.accesses.index("wifi")
    times = trace.times_s
    # Wi-Fi is down from 15 s to 20 s (cycle 10 s up, 5 s down, offset 5 s).
    during = (times >= 15 + 1.0 + 0.1) & (times < 20)
    assert (trace.weights["optimal"][during, wifi] == 0).all()
    after = (times >= 21.5) & (times < 25)
    assert (trace.weights["optimal"][after, wifi] > 0).all()


def test_many_cpes_run_through_the_same_loop() -> None:
    report = evaluate(
        replace(load_scenario("many-cpes"), duration_s=4),
        LoopSettings(contenders=("optimal", "oracle")),
    )
    assert report.cpes == 1000
    assert report.result("oracle").efficiency > 0.9
    assert report.result("optimal").weight_pushes >= 1000  # first weights for every CPE


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "atsss", *args], capture_output=True, text=True, timeout=300
    )


def test_bench_loop_json_on_the_paper_static_scenario(tmp_path: Path) -> None:
    plot = tmp_path / "static.png"
    run = run_cli("bench", "loop", "--scenario", "paper-static", "--json", "--plot", str(plot))
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout)["results"]
    assert results["oracle"]["efficiency"] >= 0.98
    assert results["rr"]["efficiency"] == pytest.approx(0.024, abs=0.001)
    assert {"paper-probe", "proportional", "optimal"} <= set(results)
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_at_100_ms_reports_the_control_delay_is_modelled_below_the_period() -> None:
    """The loop's default step lets a delay shorter than the period count: at 100 ms reports a
    20 ms and a 100 ms delay give different figures (before: both were rounded up to one
    100 ms step and gave the same), and the shorter delay the better one."""
    efficiency = {}
    for delay in ("20", "100"):
        run = run_cli(
            "bench", "loop", "--scenario", "raca-driving", "--duration", "30",
            "--reporting-period-ms", "100", "--control-delay-ms", delay,
            "--policy", "report-oracle", "--json",
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        efficiency[delay] = json.loads(run.stdout)["results"]["report-oracle"]["efficiency"]
    assert efficiency["20"] > efficiency["100"], efficiency


def test_the_default_step_falls_on_the_period_and_the_delay() -> None:
    from bench.cli import default_step_ms

    assert default_step_ms(1000, 100) == 100  # 1 s reports as before
    assert default_step_ms(1000, 20) == 10
    assert default_step_ms(100, 100) == 10  # 10 ms or finer below 1 s reports
    assert default_step_ms(100, 25) == 1
    assert default_step_ms(10, 5) == 1


def test_the_default_control_delay_is_the_live_measure_for_the_period() -> None:
    from bench.cli import default_control_delay_ms, default_step_ms

    assert default_control_delay_ms(1000) == 100
    assert default_control_delay_ms(100) == 12
    assert default_step_ms(100, default_control_delay_ms(100)) == 1  # the delay falls on a step


def test_bench_loop_rejects_bad_options() -> None:
    run = run_cli("bench", "loop", "--scenario", "paper-static", "--policy", "best")
    assert run.returncode == 2
    assert "unknown policy best" in run.stderr
    run = run_cli("bench", "loop", "--scenario", "nowhere")
    assert run.returncode == 2
    assert "no shipped scenario" in run.stderr


def test_demo_prints_the_table_next_to_the_papers_figures(tmp_path: Path) -> None:
    run = run_cli("demo", "--no-live", "--duration", "20", "--plots", str(tmp_path))
    assert run.returncode == 0, run.stderr
    for expected in ("1493.4", "1360", "41.1", "paper-static", "paper-dynamic", "oracle"):
        assert expected in run.stdout
    # the xApp's own estimators, not the stand-in, unless asked
    assert "own fused estimator" in " ".join(run.stdout.split())
    assert len(list(tmp_path.glob("*.png"))) == 4
    bad = run_cli("demo", "--no-live", "--estimator", "crystal-ball")
    assert bad.returncode == 2
    assert "--estimator is one of" in bad.stderr


def test_weights_command() -> None:
    run = run_cli("weights", "nr=342,wifi=1190,lifi=12.1")
    assert run.returncode == 0
    assert "1538.6" in run.stdout
    bad = run_cli("weights", "nr=fast")
    assert bad.returncode == 2
    assert "ACCESS=MBPS" in bad.stderr


def test_scenario_list_names_every_shipped_scenario() -> None:
    run = run_cli("scenario", "list")
    assert run.returncode == 0
    assert "many-cpes" in run.stdout
    assert "paper-dynamic" in run.stdout


def test_weights_stay_within_bounds_everywhere() -> None:
    report = evaluate(load_scenario("lifi-blockage"))
    for weights in report.trace.weights.values():
        assert np.all((weights >= 0) & (weights <= 100))


def test_bench_policy_prints_decision_rates() -> None:
    run = run_cli("bench", "policy", "--cpes", "20")
    assert run.returncode == 0, run.stderr
    assert "policy optimal" in run.stdout
    assert "per second" in run.stdout
    assert run_cli("bench", "policy", "--cpes", "0").returncode == 2


def test_the_agents_local_reaction_bridges_the_wait_for_the_next_report() -> None:
    """The agent zeroes a path that lost carrier and tells the xApp, which decides at once; a
    returning path gets its weight back without waiting for the xApp's next report."""
    scenario = load_scenario("paper-interruption")
    base = LoopSettings(estimators=("oracle-noise",), contenders=("optimal", "oracle"))
    without_report = evaluate(scenario, base)
    without = without_report.result("optimal")
    with_agent_report = evaluate(scenario, replace(base, agent_reaction_s=0.1))
    with_agent = with_agent_report.result("optimal")
    assert with_agent.efficiency > without.efficiency
    assert with_agent.reconvergence.mean_s is not None
    assert without.reconvergence.mean_s is not None
    assert with_agent.reconvergence.mean_s < without.reconvergence.mean_s / 2
    trace = with_agent_report.trace
    wifi = trace.accesses.index("wifi")
    returns = [
        k
        for k in range(1, len(trace.times_s))
        if trace.capacity_mbps[k, wifi] > 0 and trace.capacity_mbps[k - 1, wifi] == 0
    ]
    later = [k for k in returns if trace.times_s[k] > 10]  # wifi was up before: a weight to restore
    assert later
    for k in later:
        # The agent acts 0.1 s after the return, the xApp's set lands 0.1 s after that; a loop
        # waiting for the report that covers the return is a second later.
        assert trace.weights["optimal"][k + 2, wifi] > 0
        assert without_report.trace.weights["optimal"][k + 2, wifi] == 0
