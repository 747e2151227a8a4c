"""Human-readable tables of closed-loop results (rich)."""

from __future__ import annotations

from rich.table import Table

from xapp.evaluation.closed_loop import LoopReport

# What each contender is, in one line, for table captions.
DESCRIPTIONS = {
    "optimal": "this xApp: estimator + uncertainty-aware integer optimum + hysteresis",
    "proportional": "the paper's proportional rule on the same estimator",
    "rr": "round robin 1-1-1 (the kernel's default weight)",
    "paper-probe": "the paper's method: iperf3 probes 5 s of every 10 s, weights every 12 s",
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
    table.add_column("mean Mbit/s", justify="right")
    table.add_column("pushes", justify="right")
    table.add_column("re-converge s (mean/max)", justify="right")
    table.add_column("final weights")
    if paper is not None:
        table.add_column("paper (measured)", justify="right")
    for r in report.results:
        weights = "-".join(str(w) for w in r.final_weights.values())
        extra = ""
        if r.probe_traffic_fraction is not None:
            extra = f" (probes {r.probe_traffic_fraction:.0%} of data)"
        reconv = r.reconvergence
        reconv_text = (
            "no steps"
            if reconv.steps == 0
            else f"{_seconds(reconv.mean_s)}/{_seconds(reconv.max_s)}"
            + (f" ({reconv.not_reconverged} never)" if reconv.not_reconverged else "")
        )
        row = [
            r.name,
            f"{r.efficiency:.3f}",
            f"{r.mean_aggregate_mbps:.1f}" + extra,
            str(r.weight_pushes),
            reconv_text,
            weights,
        ]
        if paper is not None:
            row.append(paper.get(r.name, ""))
        table.add_row(*row)
    return table
