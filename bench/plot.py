"""A picture of one CPE in a closed-loop run, like Fig. 6/12 of Navarro-Ortiz et al. (2024):
per access, the throughput each contender's weights let it carry, stacked, with the sum of the
capacities above it, and the weights in force below."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.closed_loop import LoopReport

_COLOURS = {"nr": "#1f77b4", "wifi": "#ff7f0e", "lifi": "#2ca02c"}


def plot_report(report: LoopReport, out: Path, contenders: list[str] | None = None) -> Path:
    trace = report.trace
    names = contenders or [n for n in ("optimal", "paper-probe", "oracle") if n in trace.weights]
    names = names or list(trace.weights)[:3]
    fig, axes = plt.subplots(
        2,
        len(names),
        figsize=(5.2 * len(names), 6.2),
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": [3, 1.3]},
    )
    total = trace.capacity_mbps.sum(axis=1)
    for column, name in enumerate(names):
        top, bottom = axes[0][column], axes[1][column]
        carried = trace.carried_mbps[name]
        top.stackplot(
            trace.times_s,
            carried.T,
            labels=list(trace.accesses),
            colors=[_COLOURS.get(a, f"C{i + 3}") for i, a in enumerate(trace.accesses)],
            alpha=0.85,
        )
        top.plot(trace.times_s, total, "k--", linewidth=1, label="sum of capacities")
        result = report.result(name)
        top.set_title(f"{name}: efficiency {result.efficiency:.3f}")
        top.set_ylabel("throughput (Mbit/s)")
        top.set_ylim(bottom=0)
        for a, access in enumerate(trace.accesses):
            bottom.step(
                trace.times_s,
                trace.weights[name][:, a],
                where="post",
                label=access,
                color=_COLOURS.get(access, f"C{a + 3}"),
            )
        bottom.set_ylabel("WRR weight")
        bottom.set_xlabel("time (s)")
        bottom.set_yscale("symlog", linthresh=1)
    axes[0][0].legend(loc="upper right", fontsize="small")
    fig.suptitle(f"{report.scenario} ({report.direction.value}, {trace.cpe_id})", fontsize="medium")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
