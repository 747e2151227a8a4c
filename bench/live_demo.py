"""The live part of ``atsss demo``: the xApp as it runs, against the simulator and two agents.

Processes on loopback, no root: a CPE agent and an MPTCP proxy agent (dry-run backend: they
take and hold weights, the kernel is left alone), ``atsss xapp serve`` in standalone mode with
the real estimators, and the KPM simulator, whose stations carry what the held weights let
them. It is `atsss bench live`'s live half (bench/live_bench.py), scored the same way, next to
what the kernel's round robin would have carried.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from bench.live_bench import held_by, live_efficiency, run_live, scoring_truth
from core.domain import Direction
from core.scenario.load import load_scenario

ACCESS_ORDER = ("nr", "wifi", "lifi")


def run_live_demo(
    console: Console, scenario: str = "paper-dynamic", duration_s: float = 60.0
) -> None:
    console.print(
        f"[bold]The live system[/bold]: simulator, `atsss xapp serve` (fused estimator) and two "
        f"dry-run agents as processes on loopback, {duration_s:g} s of {scenario}"
    )
    with console.status("running …") as status:

        def say(text: str) -> None:
            status.update(text)

        live = run_live(scenario, duration_s, say)
        status.update("scoring …")
        loaded = load_scenario(scenario).cut(duration_s)
        figures = {}
        for direction in (Direction.DOWNLINK, Direction.UPLINK):
            truth = scoring_truth(loaded, direction)
            figures[direction] = (
                live_efficiency(truth, held_by(live, direction)),
                live_efficiency(truth, lambda cpe_id, second: None),
            )
    table = Table(title=f"cpe-1 on {scenario}, live", title_justify="left")
    for column in (
        "direction",
        "weight pushes",
        "last weights nr-wifi-lifi",
        "efficiency",
        "round robin",
    ):
        table.add_column(column, justify="right" if column != "direction" else "left")
    for direction, (efficiency, round_robin) in figures.items():
        seen = live.history.seen.get(("cpe-1", direction.value), [])
        last = "-".join(str(seen[-1][1].get(a, 0)) for a in ACCESS_ORDER) if seen else "none"
        table.add_row(
            direction.value, str(len(seen)), last, f"{efficiency:.3f}", f"{round_robin:.3f}"
        )
    table.caption = (
        "Efficiency: what the weights each agent held let one MPTCP connection carry (the WRR "
        "fluid model, MPTCP noticing a dead path), over the sum of the true capacities, every "
        "10 ms of the run (before the first push the kernel's round robin counts); the "
        "simulator's stations carry what those weights let them, as in `atsss bench loop`."
        + (
            f" First weights {live.first_weights_s:g} s after the last access's first report."
            if live.first_weights_s is not None
            else ""
        )
    )
    console.print(table)
