"""Human-readable tables of closed-loop results (rich)."""

from __future__ import annotations

from rich.table import Table

from bench.closed_loop import LoopReport

# What each contender is, in one line, for table captions.
DESCRIPTIONS = {
    "optimal": "this xApp: estimator + uncertainty-aware integer optimum + hysteresis",
    "proportional": "the paper's proportional rule on the same estimator",
    "rr": "round robin 1-1-1 (the kernel's default weight)",
    "paper-probe": "the paper's method: iperf3 probes 5 s of every 10 s, weights every 12 s",
    "report-oracle": "optimal weights for the true capacities as of each report, after the "
    "control delay: perfect knowledge, no foresight, no hedging",
    "oracle": "optimal weights for the true capacities, instantly",
}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def loop_table(report: LoopReport, paper: dict[str, str] | None = None) -> Table:
    table = Table(
        title=f"{report.scenario}: {report.cpes} CPE(s), {report.duration_s:.0f} s "
        f"{report.direction.value}, mean sum of capacities {report.mean_capacity_mbps:.1f} Mbit/s",
        title_justify="left",
    )
    table.add_column("contender")
    table.add_column("efficiency", justify="right")
    table.add_column("Mbit/s", justify="right")
    table.add_column("pushes", justify="right")
    table.add_column("reconv. s", justify="right")
    table.add_column("weights")
    table.add_column("probe/data", justify="right")
    explored = any(r.exploration_raises for r in report.results)
    if explored:
        table.add_column("explored", justify="right")
    if paper is not None:
        table.add_column("paper", justify="right")
    for r in report.results:
        reconv = r.reconvergence
        reconv_text = (
            "-"
            if reconv.steps == 0
            else f"{_seconds(reconv.mean_s)}/{_seconds(reconv.max_s)}"
            + (f" ({reconv.not_reconverged}×∞)" if reconv.not_reconverged else "")
        )
        probe = r.probe_traffic_fraction
        row = [
            r.name,
            f"{r.efficiency:.3f}",
            f"{r.mean_aggregate_mbps:.1f}",
            str(r.weight_pushes),
            reconv_text,
            "-".join(str(w) for w in r.final_weights.values()),
            "-" if probe is None else f"{probe:.1%}",
        ]
        if explored:
            row.append(
                "-"
                if r.exploration_raises is None
                else f"{r.exploration_raises}/{r.exploration_overshoots}"
            )
        if paper is not None:
            row.append(paper.get(r.name, ""))
        table.add_row(*row)
    table.caption = (
        "reconv. s: mean/max time to 95 % of the oracle after a step change (×∞: never); "
        "weights: final, in access order"
        + (
            "; explored: raises of paths known only from below / raises they could not keep "
            "up with (each cost at most a fifth of one period's data)"
            if explored
            else ""
        )
    )
    return table
