"""`atsss bench …` and `atsss demo`: the evaluation harness's command line."""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from bench.closed_loop import CONTENDERS, ESTIMATORS, LoopSettings, evaluate
from core.console import err, fail, out
from core.domain import Direction
from core.scenario.load import (
    MeasurementMissingError,
    ScenarioError,
    load_scenario,
    shipped_scenarios,
)
from e2sim.nonideal import NonIdealities
from xapp.policy.exploration import ExplorationConfig
from xapp.policy.hysteresis import DEFAULT_MAX_PUSHES_PER_S
from xapp.policy.weight_policy import PolicyConfig

bench_app = typer.Typer(help="Benchmarks that print figures.", no_args_is_help=True)


def demo(
    plots: Annotated[
        Path | None, typer.Option(help="Write one PNG per scenario into this folder.")
    ] = None,
    duration: Annotated[
        float | None, typer.Option(help="Cut every scenario to at most this many seconds.")
    ] = None,
    live: Annotated[
        bool,
        typer.Option(
            help="First run the live system (simulator, xApp, agents as processes) in real time."
        ),
    ] = True,
    live_seconds: Annotated[
        float, typer.Option(help="How long the live system runs.", min=5)
    ] = 60.0,
    estimator: Annotated[
        str,
        typer.Option(
            help="Estimator of the simulated-time runs: fused, kpi-only, model-only, "
            "probe-only, or the oracle-noise stand-in."
        ),
    ] = "fused",
) -> None:
    """The xApp live against the simulator and two dry-run agents (about a minute, real time),
    then the control loop on the paper's scenarios in simulated time, next to the paper's
    figures. No RIC, no root."""
    from bench.demo import run_demo
    from bench.live_demo import run_live_demo
    from bench.live_system import LiveSystemError

    if live:
        try:
            run_live_demo(out, duration_s=live_seconds)
        except LiveSystemError as error:
            fail(f"the live system: {error}")
        out.print()
    from bench.closed_loop import ESTIMATORS

    if estimator not in ESTIMATORS:
        fail(f"--estimator is one of {', '.join(ESTIMATORS)}, not {estimator!r}")
    run_demo(out, plots, duration, estimator)


@bench_app.command("loop")
def bench_loop(
    scenario: Annotated[
        list[str] | None,
        typer.Option(
            help="Scenario file or shipped name (repeatable). Default: every shipped scenario."
        ),
    ] = None,
    estimator: Annotated[
        list[str] | None,
        typer.Option(
            help=f"Capacity estimator (repeatable, or `all`): {', '.join(ESTIMATORS)}. "
            "Default: oracle-noise."
        ),
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option(
            help=f"Contenders to run (repeatable): {', '.join(CONTENDERS)}. Default: all "
            "(only optimal among the controlled ones when several estimators run)."
        ),
    ] = None,
    direction: Annotated[Direction, typer.Option(help="Which direction to evaluate.")] = (
        Direction.DOWNLINK
    ),
    duration: Annotated[
        float | None, typer.Option(help="Cut each scenario to this many seconds.")
    ] = None,
    reporting_period_ms: Annotated[int, typer.Option(help="KPI reporting period.")] = 1000,
    control_delay_ms: Annotated[
        int | None,
        typer.Option(
            help="From a report to new weights in the kernel (default: what the live system "
            "measures, `bench live`: 100 ms at 1 s reports or more, 12 ms below)."
        ),
    ] = None,
    step_ms: Annotated[
        int | None,
        typer.Option(
            help="Simulation time step (default: 100 ms where it divides the reporting period "
            "and the control delay and the period is 1 s or more, else 10 ms or finer: a delay "
            "lands on a step)."
        ),
    ] = None,
    agent_reaction_ms: Annotated[
        int | None,
        typer.Option(
            help="The CPE agents react to carrier loss themselves after this long (weight 0, "
            "restored when the carrier is back); off when not given."
        ),
    ] = None,
    noise: Annotated[
        float, typer.Option(help="Relative error (1 sigma) of the oracle-noise estimator.")
    ] = 0.05,
    max_weight: Annotated[int, typer.Option(help="Largest WRR weight.")] = 100,
    min_gain: Annotated[
        float, typer.Option(help="Predicted relative gain needed to push new weights.")
    ] = 0.01,
    max_pushes_per_s: Annotated[
        float,
        typer.Option(
            help="At most this many pushes a second per CPE and direction on average, every "
            "push counted (first weights, overrides, paths lost or back always go, and later "
            "gains wait for them); 0: no limit.",
            min=0,
        ),
    ] = DEFAULT_MAX_PUSHES_PER_S,
    non_idealities: Annotated[
        str,
        typer.Option(
            help="What the simulated nodes do that KPI formulas leave out: ideal, or realistic "
            "(NR frequency-selective scheduling gain, Wi-Fi contention loss, radio reports one "
            "period late; docs/e2sim.md)."
        ),
    ] = "ideal",
    exploration: Annotated[
        bool,
        typer.Option(
            help="Give a path known only from below (its node reports no resource KPIs) a "
            "growing share until it shows its capacity (docs/estimators.md)."
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    plot: Annotated[
        Path | None,
        typer.Option(help="Write a PNG of one CPE's run (like the paper's Fig. 6); one scenario."),
    ] = None,
) -> None:
    """Closed-loop evaluation in simulated time: efficiency, weight pushes, re-convergence time
    and probe traffic of this xApp (per estimator) against round robin, the proportional rule,
    the paper's probe method, the ceiling of a loop fed by the reports (report-oracle) and an
    instant oracle.

    The estimators read simulated E2SM-KPM KPIs of what the weights let each path carry, and
    probe through simulated agents (`probe-only`, `fused`)."""
    names = list(scenario or sorted(shipped_scenarios()))
    estimators = list(estimator or ["oracle-noise"])
    if "all" in estimators:
        estimators = [e for e in ESTIMATORS if e != "oracle-noise"]
    if policy:
        contenders = tuple(policy)
    elif len(estimators) > 1:
        contenders = ("optimal", "rr", "paper-probe", "report-oracle", "oracle")
    else:
        contenders = CONTENDERS
    if plot is not None and len(names) > 1:
        fail("--plot draws one scenario; give exactly one --scenario")
    if duration is not None and duration <= 0:
        fail(f"--duration must be > 0 s, got {duration}")
    if control_delay_ms is None:
        control_delay_ms = default_control_delay_ms(reporting_period_ms)
    if step_ms is None:
        step_ms = default_step_ms(reporting_period_ms, control_delay_ms)
    elif step_ms > 0 and control_delay_ms % step_ms:
        err.print(
            f"note: the control delay of {control_delay_ms} ms lands on the next step of "
            f"{step_ms} ms ({-(-control_delay_ms // step_ms) * step_ms} ms)"
        )
    try:
        settings = LoopSettings(
            direction=direction,
            step_s=step_ms / 1000,
            reporting_period_s=reporting_period_ms / 1000,
            control_delay_s=control_delay_ms / 1000,
            estimators=tuple(dict.fromkeys(estimators)),
            estimator_noise=noise,
            min_gain=min_gain,
            max_pushes_per_s=max_pushes_per_s or None,
            policy=PolicyConfig(max_weight=max_weight),
            contenders=contenders,
            agent_reaction_s=None if agent_reaction_ms is None else agent_reaction_ms / 1000,
            nonideal=NonIdealities.named(non_idealities),
            exploration=ExplorationConfig() if exploration else None,
        )
        loaded = []
        for name in names:
            try:
                loaded.append(load_scenario(name))
            except MeasurementMissingError as error:
                if scenario:
                    raise
                # every shipped scenario was asked for: one whose trace is not here is skipped
                err.print(f"[yellow]skipped[/] {name}: {error}")
    except (ScenarioError, ValueError) as error:
        fail(str(error), getattr(error, "exit_code", 2))
    reports = []
    for each in loaded:
        if duration is not None:
            each = each.cut(duration)
        try:
            with err.status(f"evaluating {each.name} ({len(each.cpes)} CPEs) …") as status:
                report = evaluate(each, settings, lambda text: status.update(text))
        except (ScenarioError, ValueError) as error:
            fail(str(error), getattr(error, "exit_code", 2))
        reports.append(report)
        if not as_json:
            from bench.report import loop_table

            out.print(loop_table(report))
            out.print(f"wall time {report.wall_s:.2f} s")
    if as_json:
        dumped = [r.as_dict() for r in reports]
        print(json.dumps(dumped[0] if len(dumped) == 1 else dumped, indent=2))
    if plot is not None:
        from bench.plot import plot_report

        plot_report(reports[0], plot)
        err.print(f"plot written to {plot}")


@bench_app.command("live")
def bench_live(
    scenario: Annotated[
        list[str] | None,
        typer.Option(
            help="Scenario file or shipped name (repeatable). Default: paper-dynamic and "
            "paper-interruption."
        ),
    ] = None,
    duration: Annotated[float, typer.Option(help="Seconds of each scenario to run.")] = 60.0,
    reporting_period_ms: Annotated[
        int, typer.Option(help="The nodes' reporting period, live and simulated (10 ms steps).")
    ] = 1000,
    workdir: Annotated[
        Path | None,
        typer.Option(
            help="Keep the live runs' logs, agent state and truth here, a folder per scenario "
            "(default: temporary folders, removed)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """The same scenario and seconds run live (simulator, `xapp serve`, two dry-run agents as
    processes, the stations carrying what the held weights let them) and in simulated time
    (`bench loop`, fused estimator, the live xApp's measured control delay), scored alike;
    both efficiencies per direction side by side. Exits 1 when they differ by more than 0.02."""
    from bench.live_bench import MIN_SHARE, NEAR, SETTLING_S, TOLERANCE, compare
    from bench.live_system import LiveSystemError

    if duration <= 0:
        fail(f"--duration must be > 0 s, got {duration}")
    names = list(scenario or ["paper-dynamic", "paper-interruption"])
    results = []
    for name in names:
        try:
            with err.status(f"{name}: starting the live system …") as status:
                say = _status_line(status, name)
                folder = None if workdir is None else workdir / Path(name).stem
                results.append(compare(name, duration, say, folder, reporting_period_ms))
        except (ScenarioError, ValueError) as error:
            fail(str(error), getattr(error, "exit_code", 2))
        except (LiveSystemError, RuntimeError) as error:
            fail(f"the live system: {error}")
    if as_json:
        print(json.dumps([r.as_dict() for r in results], indent=2))
    else:
        table = Table(title="live and simulated, scored alike", title_justify="left")
        for column in (
            "scenario",
            "direction",
            "live",
            "simulated",
            "difference",
            "pushes live / sim",
            "live near",
        ):
            table.add_column(
                column, justify="left" if column in ("scenario", "direction") else "right"
            )
        for result in results:
            for d in result.directions:
                table.add_row(
                    result.scenario,
                    d.direction,
                    f"{d.live:.3f}",
                    f"{d.simulated:.3f}",
                    f"{d.difference:+.3f}",
                    f"{d.live_pushes} / {d.simulated_pushes}",
                    f"{d.live_near:.0%}",
                )
        delays = ", ".join(
            f"{r.scenario} {r.control_delay_s * 1000:.0f} ms"
            + (
                f" (measured {r.measured_delay_s * 1000:.1f})"
                if r.measured_delay_s is not None
                else " (none measured: assumed)"
            )
            for r in results
        )
        table.caption = (
            f"{duration:g} s each, reports every {reporting_period_ms} ms. Simulated control "
            f"delay: the live xApp's mean report → agent's answer ({delays}). "
            f"Tolerance ±{TOLERANCE}. Live near: the share of "
            f"the time after the first {SETTLING_S:g} s in which the live weights were within "
            f"{NEAR:.0%} of the capacities (each path of at least {MIN_SHARE:.0%} of the "
            "capacity, relative to the largest)."
        )
        out.print(table)
    if not all(r.within_tolerance for r in results):
        raise typer.Exit(1)


def _status_line(status: Any, prefix: str) -> Callable[[str], None]:
    """Progress text into a rich status, after ``prefix``."""

    def say(text: str) -> None:
        status.update(f"{prefix}: {text}")

    return say


@bench_app.command("predictability")
def bench_predictability(
    scenario: Annotated[
        list[str] | None,
        typer.Option(
            help="Scenario file or shipped name (repeatable). Default: every shipped scenario."
        ),
    ] = None,
    reporting_period_ms: Annotated[int, typer.Option(help="KPI reporting period.")] = 1000,
    step_ms: Annotated[int, typer.Option(help="Time step of the scenario's truth.")] = 100,
    direction: Annotated[Direction, typer.Option(help="Which direction to evaluate.")] = (
        Direction.DOWNLINK
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """How far any loop fed by periodic reports can get: an idealised WRR (continuous weights,
    no delay) with weights from the instant capacities, from each coming period's mean, from
    the last report, and from the last report hedged per access by the factors best on the
    scenario in hindsight (a bound on deciding from one report)."""
    from bench.predictability import predictability

    names = list(scenario or sorted(shipped_scenarios()))
    if reporting_period_ms <= 0 or step_ms <= 0:
        fail("--reporting-period-ms and --step-ms must be > 0")
    results = []
    for name in names:
        try:
            loaded = load_scenario(name)
        except MeasurementMissingError as error:
            if scenario:
                fail(str(error), error.exit_code)
            err.print(f"[yellow]skipped[/] {name}: {error}")
            continue
        except ScenarioError as error:
            fail(str(error), error.exit_code)
        try:
            with err.status(f"scoring {loaded.name} …"):
                results.append(
                    predictability(
                        loaded,
                        period_s=reporting_period_ms / 1000,
                        step_s=step_ms / 1000,
                        direction=direction,
                    )
                )
        except (ScenarioError, ValueError) as error:
            fail(str(error), getattr(error, "exit_code", 2))
    if as_json:
        rows = [{**r.__dict__, "half_gap_target": r.half_gap_target} for r in results]
        print(json.dumps(rows, indent=2))
        return
    table = Table(
        "scenario",
        "instant",
        "period-mean",
        "last-report",
        "hedged-hindsight",
        "half-gap target",
        "lag-1 correlation",
    )
    for r in results:
        table.add_row(
            r.scenario,
            f"{r.instant:.3f}",
            f"{r.period_mean:.3f}",
            f"{r.last_report:.3f}",
            f"{r.hedged_hindsight:.3f}",
            f"{r.half_gap_target:.3f}",
            " ".join(
                f"{access} {'-' if value is None else f'{value:.2f}'}"
                for access, value in r.lag1_correlation.items()
            ),
        )
    out.print(table)


@bench_app.command("testbed")
def bench_testbed(
    scenario: Annotated[
        str, typer.Option(help="Scenario file or shipped name (one CPE).")
    ] = "paper-static",
    scale: Annotated[
        float, typer.Option(help="Multiply the scenario's capacities to suit this machine.")
    ] = 0.1,
    duration: Annotated[float, typer.Option(help="Seconds of transfer per phase.")] = 30.0,
    step: Annotated[float, typer.Option(help="Report a row per this many seconds.")] = 10.0,
    direction: Annotated[str, typer.Option(help="downlink or uplink.")] = "downlink",
    estimator: Annotated[
        str, typer.Option(help="fused, kpi-only, model-only or probe-only.")
    ] = "fused",
    prefix: Annotated[str, typer.Option(help="Namespace name prefix.")] = "atb",
    outage: Annotated[
        str,
        typer.Option(
            help="How the scenario's outages are made: link (taken down: the CPE's agent sees "
            "its carrier go) or loss (every packet dropped, the link stays up)."
        ),
    ] = "link",
    congestion: Annotated[
        str,
        typer.Option(
            help="TCP congestion control of the transfer's subflows (cubic, the kernel's "
            "default; bbr; reno), or host for whatever the host is set to."
        ),
    ] = "cubic",
    reporting_period_ms: Annotated[
        int,
        typer.Option(
            help="The simulated nodes' reporting period (100 ms or more; below a second the "
            "paths are shaped as often, and it divides a second)."
        ),
    ] = 1000,
    workdir: Annotated[
        Path | None,
        typer.Option(help="Keep the run's logs (xApp, agent, simulator's truth) in this folder."),
    ] = None,
    link_buffer_ms: Annotated[
        float,
        typer.Option(
            help="Each shaped link's buffer, in milliseconds of its rate (at least 30 kB); 0 "
            "keeps the kernel's FIFO of 1,000 packets."
        ),
    ] = 50.0,
    receive_buffer_kib: Annotated[
        int,
        typer.Option(
            help="The CPE's and the proxy's default TCP receive buffer (tcp_rmem's middle "
            "value); 0 keeps the kernel's."
        ),
    ] = 2048,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run the whole system for real (root): the netns testbed shaped to the scenario, the KPM
    simulator, the xApp and the CPE agent (mainline MPTCP); a long MPTCP iperf3 transfer with
    all paths active, then with the xApp in the loop, against the sum of the shaped capacities.
    With the xApp it counts what its pushes cost the connection: sets applied, endpoint flag
    flips, MP_PRIO options sent and received."""
    from bench.testbed_bench import (
        TestbedBenchError,
        TestbedBenchSettings,
        run_testbed_bench,
    )
    from xapp.estimators.selection import MODES

    try:
        loaded = load_scenario(scenario)
        chosen = Direction(direction)
    except ScenarioError as error:
        fail(str(error), error.exit_code)
    except ValueError:
        fail(f"--direction is downlink or uplink, got {direction!r}")
    if estimator not in MODES:
        fail(f"--estimator: {estimator!r} is not one of {', '.join(MODES)}")
    if not 0 < scale <= 100 or duration < 2 or step < 1:
        fail("--scale must be in (0, 100], --duration ≥ 2 s and --step ≥ 1 s")
    if outage not in ("link", "loss"):
        fail(f"--outage is link or loss, got {outage!r}")
    if len(prefix) > 9 or not prefix.isalnum():
        fail("--prefix is at most 9 letters or digits (interface names are short)")
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
    known = available.read_text().split() if available.exists() else ["cubic", "reno"]
    if congestion != "host" and congestion not in known:
        fail(f"--congestion: {congestion!r} is not one of host, {', '.join(known)}")
    if reporting_period_ms < 100 or (reporting_period_ms < 1000 and 1000 % reporting_period_ms):
        fail(
            f"--reporting-period-ms must be 100 ms or more, and divide a second below one; "
            f"got {reporting_period_ms}"
        )
    if link_buffer_ms < 0 or receive_buffer_kib < 0:
        fail("--link-buffer-ms and --receive-buffer-kib are 0 (the kernel's) or more")
    # Its own addresses per prefix: two benches (or a bench and the tests) never share a subnet.
    subnet = 100 + zlib.crc32(prefix.encode()) % 100
    settings = TestbedBenchSettings(
        loaded,
        scale,
        chosen,
        duration,
        step,
        estimator,
        outage="link" if outage == "link" else "loss",
        prefix=prefix,
        subnet=subnet,
        congestion=congestion,
        reporting_period_ms=reporting_period_ms,
        workdir=workdir,
        link_buffer_ms=link_buffer_ms or None,
        receive_buffer_kib=receive_buffer_kib or None,
    )
    try:
        result = run_testbed_bench(settings, lambda message: err.print(message, highlight=False))
    except TestbedBenchError as error:
        fail(str(error))
    if as_json:
        typer.echo(json.dumps(result.as_dict()))
        return
    names = [p.name for p in result.phases]
    table = Table(
        "from s",
        "shaped Mbit/s",
        *(f"{n} Mbit/s" for n in names),
        *(f"{n} / shaped" for n in names),
        title=f"{loaded.name} ×{scale:g}, {chosen.value}, {estimator}, {congestion}, "
        f"reports every {reporting_period_ms} ms, link buffers "
        f"{f'{link_buffer_ms:g} ms' if link_buffer_ms else 'of the kernel'}",
    )
    for start, shaped, carried in result.steps():
        table.add_row(
            f"{start:.0f}",
            f"{shaped:.1f}",
            *(f"{carried[n]:.1f}" for n in names),
            *(f"{carried[n] / shaped:.3f}" for n in names),
        )
    shaped, carried = result.totals()
    table.add_row(
        "all",
        f"{shaped:.1f}",
        *(f"{carried[n]:.1f}" for n in names),
        *(f"{carried[n] / shaped:.3f}" for n in names),
    )
    out.print(table)
    for phase in result.phases:
        on_backup = sorted({a for flags in phase.backup for a, b in flags.items() if b})
        out.print(f"{phase.name}: on backup at some point: {', '.join(on_backup) or 'none'}")
        if phase.churn is not None:
            c = phase.churn
            out.print(
                f"{phase.name}: {c.pushes} sets applied in {c.seconds:g} s "
                f"({c.pushes / max(c.seconds, 1e-9):.2f}/s), {c.flips} endpoint flag flips, "
                f"MP_PRIO sent {c.mp_prio_sent} / received {c.mp_prio_received}"
            )


@bench_app.command("api")
def bench_api(
    requests: Annotated[int, typer.Option(help="Requests per path and kind of connection.")] = 200,
    path: Annotated[
        list[str] | None,
        typer.Option(help="Path to ask (repeatable). Default: /ric/v1/health/alive and /metrics."),
    ] = None,
    audit_entries: Annotated[
        int, typer.Option(help="Audit log entries to write before timing its first page (0: skip).")
    ] = 300_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """The xApp's HTTP API, live (`xapp serve`, standalone, on a Redis of its own): p50 and
    p99 on a kept-alive connection and on a new connection per request; five parallel 100 MB
    bodies without a token (how soon each 401 comes, RSS growth); the first page of an audit
    log of --audit-entries entries."""
    import json

    from bench.api_latency import run_api_bench
    from bench.live_system import LiveSystemError

    if requests < 1 or audit_entries < 0:
        fail("--requests must be ≥ 1 and --audit-entries ≥ 0")
    try:
        result = run_api_bench(
            requests, tuple(path or ("/ric/v1/health/alive", "/metrics")), audit_entries
        )
    except LiveSystemError as error:
        fail(str(error))
    if as_json:
        out.print_json(json.dumps(result.as_json()))
        return
    table = Table("path", "keep-alive p50 ms", "p99", "new connection p50 ms", "p99")
    for r in result.latencies:
        table.add_row(
            r.path,
            f"{r.keep_alive_p50_ms:.2f}",
            f"{r.keep_alive_p99_ms:.2f}",
            f"{r.new_connection_p50_ms:.2f}",
            f"{r.new_connection_p99_ms:.2f}",
        )
    out.print(table)
    out.print(
        f"5 parallel 100 MB bodies without a token: {result.unauthenticated_bodies} answered 401, "
        f"the slowest {result.unauthenticated_401_ms_max:.1f} ms after its headers; xApp RSS "
        f"{result.unauthenticated_rss_growth_mb:+.1f} MB"
    )
    if result.audit_entries:
        out.print(
            f"GET /v1/audit?limit=100 with {result.audit_entries:,} entries: p50 "
            f"{result.audit_page_p50_ms:.1f} ms, p99 {result.audit_page_p99_ms:.1f} ms; KEYS/SCAN "
            f"run by Redis meanwhile: {result.audit_keys_calls}"
        )
    for note in result.notes:
        out.print(f"note: {note}")


@bench_app.command("e2")
def bench_e2(
    ues: Annotated[int, typer.Option(help="UEs in one per-UE (Format 3) indication.")] = 1000,
    repeats: Annotated[int, typer.Option(help="Runs; the best one is reported.")] = 3,
    reader: Annotated[
        list[str] | None,
        typer.Option(
            help="fast (the strict fast reader with its C core, the generic one behind it: "
            "what the service runs), fast-python (the same with the reader's pure-Python twin) "
            "or generic (the generic reader alone); repeatable. Default: all three."
        ),
    ] = None,
) -> None:
    """Time encoding one RIC indication and decoding it into KPI samples, with each reader;
    with the generic one among them, how many times faster each other is on the same bytes."""
    from bench.e2_codec import READERS, run_e2_bench

    if ues < 1 or repeats < 1:
        fail("--ues and --repeats must be ≥ 1")
    readers = reader or list(READERS)
    for name in readers:
        if name not in READERS:
            fail(f"--reader {name!r}: not one of {', '.join(READERS)}")
    table = Table(
        "UEs", "reader", "bytes", "encode ms", "decode → samples ms", "samples", "UE reports/s"
    )
    compared = "generic" in readers and len(set(readers)) > 1
    if compared:
        table.add_column("× generic")
    for count in sorted({1, 10, 100, ues}):
        results = {name: run_e2_bench(count, repeats, reader=name) for name in readers}
        for name, r in results.items():
            row = [
                str(r.ues),
                name,
                f"{r.indication_bytes:,}",
                f"{r.encode_ms:.2f}",
                f"{r.process_ms:.2f}",
                str(r.samples),
                f"{r.ue_reports_per_second:,.0f}",
            ]
            if compared:
                speedup = results["generic"].process_ms / max(r.process_ms, 1e-9)
                row.append(f"{speedup:.1f}" if name != "generic" else "")
            table.add_row(*row)
    out.print(table)


@bench_app.command("trees")
def bench_trees(
    rows: Annotated[int, typer.Option(help="Rows scored by each shipped ensemble.")] = 10000,
    repeats: Annotated[int, typer.Option(help="Runs; the best one is reported.")] = 3,
) -> None:
    """Time scoring the shipped capacity models' tree ensembles with onnxruntime and with the
    tree core (eight rows a vector, and sixteen where the CPU has AVX-512), on the same rows,
    and say whether every value came out the same, bit for bit."""
    from bench.tree_scoring import run_tree_bench

    if rows < 1 or repeats < 1:
        fail("--rows and --repeats must be ≥ 1")
    try:
        results = run_tree_bench(rows, repeats)
    except RuntimeError as error:
        fail(str(error))
    widths = sorted(results[0].core_ms) if results else []
    table = Table("model", "trees", "rows", "onnxruntime ms")
    for lanes in widths:
        table.add_column(f"core ×{lanes} ms")
    table.add_column("× onnxruntime")
    table.add_column("same bits")
    for r in results:
        fastest = min(r.core_ms.values())
        table.add_row(
            r.model,
            str(r.trees),
            f"{r.rows:,}",
            f"{r.onnxruntime_ms:.2f}",
            *(f"{r.core_ms[lanes]:.2f}" for lanes in widths),
            f"{r.onnxruntime_ms / max(fastest, 1e-9):.1f}",
            "yes" if r.same_bits else "NO",
        )
    out.print(table)
    total_ort = sum(r.onnxruntime_ms for r in results)
    total_core = sum(min(r.core_ms.values()) for r in results)
    out.print(
        f"all nine: onnxruntime {total_ort:.1f} ms, core {total_core:.1f} ms "
        f"({total_ort / max(total_core, 1e-9):.1f}×) for {rows:,} rows each"
    )
    if not all(r.same_bits for r in results):
        fail("the core and onnxruntime gave different values")


@bench_app.command("faults")
def bench_faults(
    fault: Annotated[
        list[str] | None,
        typer.Option(
            help="Fault to make (repeatable): redis, agent-kill, agent-hang, simulator, "
            "xapp-kill, link (root). Default: all of them (link only as root)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Break the live system one part at a time (real processes on loopback: Redis, two agents,
    the xApp, the simulator) and report, per fault: acknowledged changes lost (must be 0),
    recovery time and efficiency during the fault."""
    from bench.faults import FaultsBenchError, run_faults_bench
    from bench.faults import as_json as results_json
    from bench.live_system import LiveSystemError

    try:
        results = run_faults_bench(
            tuple(fault) if fault else None, lambda message: err.print(message, highlight=False)
        )
    except (FaultsBenchError, LiveSystemError) as error:
        fail(str(error))
    if as_json:
        typer.echo(results_json(results))
        return
    table = Table("fault", "acknowledged", "lost", "recovery s", "recovered when", "efficiency")
    for r in results:
        table.add_row(
            r.fault,
            str(r.acknowledged),
            str(r.lost),
            "not within 30 s" if r.recovery_s is None else f"{r.recovery_s:.2f}",
            r.recovered_when,
            "-" if r.efficiency is None else f"{r.efficiency:.3f}",
        )
    out.print(table)
    for r in results:
        out.print(f"{r.fault}: {r.what}" + "".join(f"; {n}" for n in r.notes))
    if any(r.lost or r.recovery_s is None for r in results):
        raise typer.Exit(1)


@bench_app.command("fleet")
def bench_fleet(
    cpes: Annotated[int, typer.Option(help="CPEs in the fleet.", min=1, max=10_000)] = 1000,
    bad_agents: Annotated[
        float,
        typer.Option(
            help="Percent of the CPEs whose agent is hostile (down, hung, trickling, endless, "
            "event flood, wrong token, in equal shares).",
            min=0,
            max=100,
        ),
    ] = 5.0,
    period_ms: Annotated[
        int, typer.Option(help="Reporting period of the simulated nodes.", min=100)
    ] = 1000,
    settle_s: Annotated[
        float, typer.Option(help="Seconds to watch the weights arrive before the overrides.")
    ] = 30.0,
    overrides: Annotated[int, typer.Option(help="Overrides set on good CPEs, one by one.")] = 20,
    estimator: Annotated[
        str,
        typer.Option(
            help="The xApp's estimator: fused (the service's default, with the shipped models), "
            "kpi-only, model-only or probe-only."
        ),
    ] = "fused",
    workdir: Annotated[
        Path | None, typer.Option(help="Where logs and state go (default: a new temp folder).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """The live system with a fleet: the simulator, `xapp serve` on Redis, the proxy's agent and
    one agent per CPE (one process hosts them), a share of them hostile. Prints the share of good
    CPEs that hold weights and how soon, override-to-agent latency, the xApp's RSS and CPU, and
    its stop time. Exits 1 when fewer than 99 % of the good CPEs hold weights."""
    import tempfile

    from bench.fleet import run_fleet
    from bench.live_system import LiveSystemError

    folder = workdir or Path(tempfile.mkdtemp(prefix="atsss-fleet-"))
    try:
        result = run_fleet(
            folder,
            cpes,
            bad_agents / 100,
            period_ms,
            settle_s,
            overrides,
            lambda message: err.print(message, highlight=False),
            estimator,
        )
    except LiveSystemError as error:
        fail(f"{error} (logs in {folder})")
    if as_json:
        typer.echo(json.dumps(result.as_json(), indent=2))
    else:
        table = Table("figure", "value")
        kinds = ", ".join(f"{k} {n}" for k, n in result.kinds.items() if n)
        rows = [
            ("agents", kinds),
            ("reporting period, estimator", f"{result.period_s:g} s, {result.estimator}"),
            ("good CPEs holding uplink weights", f"{result.good_uplink_held:.1%}"),
            ("good CPEs holding downlink weights", f"{result.good_downlink_held:.1%}"),
            ("both within 3 periods of the first report", f"{result.within_3_periods:.1%}"),
            (
                "first weights p50 / p99 (s)",
                f"{result.first_weights_p50_s} / {result.first_weights_p99_s}",
            ),
            (
                "override to agent p50 / p99 (s)",
                f"{result.override_p50_s} / {result.override_p99_s}",
            ),
            ("overrides that never arrived", str(result.overrides_lost)),
            ("xApp RSS now / peak (MB)", f"{result.rss_mb:.0f} / {result.rss_peak_mb:.0f}"),
            ("xApp CPU (cores)", f"{result.cpu_cores:.2f}"),
            ("stop after SIGTERM (s)", f"{result.stop_s:.2f} (exit {result.stop_code})"),
        ]
        for name, value in rows:
            table.add_row(name, value)
        out.print(table)
        for note in result.notes:
            out.print(f"note: {note}")
        err.print(f"logs in {folder}", highlight=False)
    if min(result.good_uplink_held, result.good_downlink_held) < 0.99:
        raise typer.Exit(1)


@bench_app.command("replicas")
def bench_replicas(
    cpes: Annotated[int, typer.Option(help="CPEs in the fleet.", min=1, max=20_000)] = 10_000,
    replicas: Annotated[int, typer.Option(help="`xapp serve` replicas.", min=1, max=8)] = 2,
    period_ms: Annotated[
        int, typer.Option(help="Reporting period (leases last 3).", min=100)
    ] = 1000,
    checks: Annotated[int, typer.Option(help="Looks at the leases, a period apart.", min=1)] = 10,
    overrides: Annotated[
        int, typer.Option(help="Overrides, each through the next replica.", min=0)
    ] = 20,
    workdir: Annotated[
        Path | None, typer.Option(help="Where logs and state go (default: a new temp folder).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Several `xapp serve` replicas on one real Redis sharing a fleet (the proxy's agent
    serves every CPE; no E2 reports). Prints how soon every CPE is leased, at each look how many
    are leased by a live replica and how they are shared, and how long an override sent to
    either replica takes to reach the agent. Exits 1 when a look found a CPE without a live
    lease or an override was lost."""
    import tempfile

    from bench.live_system import LiveSystemError
    from bench.replicas import run_replicas

    folder = workdir or Path(tempfile.mkdtemp(prefix="atsss-replicas-"))
    try:
        result = run_replicas(
            folder,
            cpes,
            replicas,
            period_ms,
            checks,
            overrides,
            lambda message: err.print(message, highlight=False),
        )
    except LiveSystemError as error:
        fail(f"{error} (logs in {folder})")
    if as_json:
        typer.echo(json.dumps(result.as_json(), indent=2))
    else:
        table = Table("figure", "value")
        period = result.period_s
        rows = [
            ("CPEs, replicas, period", f"{result.cpes:,}, {result.replicas}, {period:g} s"),
            ("every CPE leased by its replica after (s)", f"{result.leased_after_s}"),
            (
                "looks with every CPE leased by a live replica",
                f"{result.looks_all_leased} of {result.checks}"
                f" (worst look: {result.worst_leased:,} of {result.cpes:,})",
            ),
            ("CPEs per replica", ", ".join(f"{k} {v:,}" for k, v in result.share.items())),
            (
                "override to agent p50 / p99",
                _in_periods(result.override_p50_s, period)
                + " / "
                + _in_periods(result.override_p99_s, period),
            ),
            ("overrides that never arrived", str(result.overrides_lost)),
            ("replicas' RSS (MB)", ", ".join(f"{m:.0f}" for m in result.rss_mb)),
        ]
        for name, value in rows:
            table.add_row(name, value)
        out.print(table)
        for note in result.notes:
            out.print(f"note: {note}")
        err.print(f"logs in {folder}", highlight=False)
    if result.looks_all_leased < result.checks or result.overrides_lost:
        raise typer.Exit(1)


def _in_periods(seconds: float | None, period_s: float) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.2f} s ({seconds / period_s:.1f} periods)"


@bench_app.command("xapp")
def bench_xapp(
    cpes: Annotated[list[int] | None, typer.Option(help="CPEs (× 3 accesses); repeatable.")] = None,
    periods: Annotated[
        int | None,
        typer.Option(
            help="Reporting periods to run; the busy time is the median of the second half "
            "(the estimators' histories fill over the first eleven periods, the push limit's "
            "budgets over the first seconds). Default: 16, or 10 s of periods if more."
        ),
    ] = None,
    period_ms: Annotated[int, typer.Option(help="Reporting period.")] = 1000,
    replicas: Annotated[
        int,
        typer.Option(
            help="Also run 1 and this many processes at once on the largest --cpes, each on "
            "its share (as replicas): does the throughput scale?"
        ),
    ] = 1,
    estimator: Annotated[
        str,
        typer.Option(
            help="The estimators' mode, built as the service builds it: fused (the service's "
            "default, with the shipped models), kpi-only, model-only or probe-only."
        ),
    ] = "fused",
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """The xApp's processing path without the network: per-UE E2SM-KPM indications from the
    simulator decoded into samples, then a decision per CPE and direction, one core. Prints
    throughput, p50/p99 latencies, the cores a replica needs at the period, memory per CPE;
    with --replicas, the throughput of 1 and N replicas side by side."""
    import dataclasses

    from bench.xapp_bench import STAGES, default_periods, run_replicas, run_xapp_bench
    from xapp.estimators.selection import MODES

    if estimator not in MODES:
        fail(f"--estimator {estimator!r}: not one of {', '.join(MODES)}")
    counts = cpes or [100, 1000, 10000]
    if periods is None and period_ms >= 1:
        periods = default_periods(period_ms / 1000)
    if periods is None or periods < 1 or period_ms < 1 or any(not 1 <= c <= 10_000 for c in counts):
        fail("--periods and --period-ms must be ≥ 1, --cpes in 1..10000")
    if not 1 <= replicas <= 16:
        fail("--replicas must be in 1..16")
    if replicas > 1:
        largest = max(counts)
        scaling = []
        for n in (1, replicas):
            err.print(f"{n} replica(s) on {largest} CPEs: encoding, then processing at once…")
            scaling.append(run_replicas(largest, n, periods, period_ms / 1000, estimator))
        if as_json:
            typer.echo(json.dumps([dataclasses.asdict(s) for s in scaling]))
            return
        base = scaling[0].cpes_per_s
        table = Table("replicas", "CPEs", "wall s", "CPE periods/s", "× one replica")
        for s in scaling:
            table.add_row(
                str(s.replicas),
                f"{s.cpes:,}",
                f"{s.wall_s:.2f}",
                f"{s.cpes_per_s:,.0f}",
                f"{s.cpes_per_s / base:.2f}",
            )
        out.print(table)
        out.print(f"this machine has {os.cpu_count()} cores; a replica is one process, one core")
        return
    rows = []
    for count in counts:
        err.print(f"{count} CPEs: encoding {periods} periods of indications, then processing…")
        rows.append(run_xapp_bench(count, periods, period_ms / 1000, estimator=estimator))
    if as_json:
        typer.echo(json.dumps([dataclasses.asdict(r) for r in rows]))
        return
    table = Table(
        "CPEs", "indications", "UE reports/s", "decode p50/p99 ms", "decisions/s",
        "decision p50/p99 ms", "busy s/period", "CPU s/period", "cores", "KiB/CPE",
    )  # fmt: skip
    for r in rows:
        table.add_row(
            f"{r.cpes:,}",
            str(r.indications),
            f"{r.ue_reports_per_s:,.0f}",
            f"{r.decode_p50_ms:.1f}/{r.decode_p99_ms:.1f}",
            f"{r.decisions_per_s:,.0f}",
            f"{r.decision_p50_ms:.2f}/{r.decision_p99_ms:.2f}",
            f"{r.period_busy_s:.2f}",
            f"{r.period_cpu_s:.2f}",
            f"{r.cores_needed:.2f}",
            f"{r.resident_kib_per_cpe:.1f}",
        )
    out.print(table)
    stages = Table("CPEs", *STAGES, title="ms per period in each stage")
    for r in rows:
        stages.add_row(f"{r.cpes:,}", *(f"{r.stage_ms.get(stage, 0.0):.0f}" for stage in STAGES))
    out.print(stages)
    out.print(f"estimator: {estimator}; reporting period {period_ms} ms")


def default_control_delay_ms(reporting_period_ms: int) -> int:
    """What the live system measures from a report's arrival to the agent's answer (`atsss
    bench live`, this 2-core machine, one CPE). Below 1 s reports: 12 ms, the mean of six 40 s
    runs at 100 ms reports (10.5 and 10.7 ms on paper-dynamic, 13.1 and 14.3 on
    paper-interruption, 12.8 and 10.3 on paper-static; 28.7-36.8 ms when first measured, with
    each node's report fed to the estimators as it came). At 1 s reports or more the published
    figures keep 100 ms, the slow end (17-90 ms measured)."""
    return 100 if reporting_period_ms >= 1000 else 12


def default_step_ms(reporting_period_ms: int, control_delay_ms: int) -> int:
    """The simulated loop's step: fine enough that the control delay and the reporting period
    fall on steps (a delay is otherwise rounded up to a whole step: at 100 ms reports, delays
    of 20 and 100 ms gave the same figures), and 10 ms or finer below 1 s reports, where the
    delay is the loop's main loss; coarse where that changes nothing, as a finer step costs
    time in proportion."""
    coarsest = 100 if reporting_period_ms >= 1000 else 10
    for step in (100, 10, 1):
        if step <= coarsest and reporting_period_ms % step == 0 and control_delay_ms % step == 0:
            return step
    return 1


@bench_app.command("e2sim")
def bench_e2sim(
    scenario: Annotated[str, typer.Option(help="Scenario file or shipped name.")] = "many-cpes",
    duration: Annotated[
        float, typer.Option(help="Seconds of scenario to run in real time.")
    ] = 20.0,
    kpm_version: Annotated[
        str, typer.Option(help="v3.00, v2.03, flexric-v3.00 or flexric-v2.03.")
    ] = "v3.00",
) -> None:
    """The simulator in real time against a standalone xApp process: can it keep up?"""
    import subprocess
    import sys

    from core.scenario.load import ScenarioError, load_scenario
    from e2sim.runner import SimRunner
    from e2sim.world import SimWorld
    from kpm.versions import parse_builder_layout

    try:
        loaded = load_scenario(scenario)
        version = parse_builder_layout(kpm_version)
    except (ScenarioError, ValueError) as error:
        fail(str(error), getattr(error, "exit_code", 2))
    loaded = loaded.cut(duration)
    world = SimWorld(loaded)
    xapp = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "atsss",
            "xapp",
            "run",
            "--scenario",
            scenario,
            "--listen",
            "127.0.0.1:0",
            "--duration",
            str(duration + 30),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert xapp.stderr is not None
        line = xapp.stderr.readline()
        if "listening for E2 nodes on" not in line:
            fail(f"the xApp did not start: {line.strip()}")
        host, _, port = line.strip().rsplit(" ", 1)[-1].rpartition(":")
        stats = SimRunner(world, (host, int(port)), version).run()
    finally:
        xapp.terminate()
        xapp_output, _ = xapp.communicate(timeout=60)
    lines = xapp_output.strip().splitlines()
    received = json.loads(lines[-1]) if lines else {}
    summary = stats.as_dict()
    table = Table("what", "value")
    table.add_row("CPEs × accesses", f"{len(loaded.cpes)} × {len(world.accesses)}")
    table.add_row("periods (1 s)", str(stats.ticks))
    table.add_row("indications/s", f"{stats.indications_per_second:.2f}")
    table.add_row("UE reports/s", f"{stats.indications_per_second * len(loaded.cpes):,.0f}")
    table.add_row("lag mean / max", f"{summary['mean_lag_ms']} / {summary['max_lag_ms']} ms")
    table.add_row("simulator busy", f"{summary['busy_share']:.0%} of one core's time")
    table.add_row("xApp received samples", f"{received.get('samples', 0):,}")
    table.add_row("subscribed", ", ".join(a for a, ok in stats.subscribed.items() if ok))
    out.print(table)


@bench_app.command("policy")
def bench_policy(
    cpes: Annotated[int, typer.Option(help="How many CPE decisions to time.")] = 1000,
    noise: Annotated[float, typer.Option(help="Relative uncertainty of the estimates.")] = 0.05,
) -> None:
    """Weight decisions per second on one core, for CPEs with nr, wifi and lifi."""
    from bench.policy_bench import run_policy_bench

    if cpes < 1:
        fail(f"--cpes must be ≥ 1, got {cpes}")
    table = Table("what", "decisions", "seconds", "per second", "µs each")
    for r in run_policy_bench(cpes, noise):
        table.add_row(
            r.name,
            str(r.decisions),
            f"{r.seconds:.3f}",
            f"{r.per_second:,.0f}",
            f"{r.microseconds_each:,.2f}"
            if r.microseconds_each < 10
            else f"{r.microseconds_each:,.0f}",
        )
    out.print(table)
