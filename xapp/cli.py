"""The ``atsss`` command line: one entry point, a subcommand per job.

Errors a user can fix (a bad scenario, a bad option) print one line on stderr and exit with 2;
nothing here prints a traceback for them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from agent.cli import agent_app, testbed_app
from e2sim.cli import e2sim_app
from kpm.cli import kpm_app
from models.cli import train_app
from xapp.domain import Direction
from xapp.evaluation.closed_loop import CONTENDERS, ESTIMATORS, LoopSettings, evaluate
from xapp.policy.baselines import proportional_weights, round_robin_weights
from xapp.policy.fluid import aggregate_mbps
from xapp.policy.optimal import optimal_weights
from xapp.policy.weight_policy import PolicyConfig
from xapp.scenario.load import ScenarioError, load_scenario, shipped_scenarios
from xapp.scenario.model import Scenario

if TYPE_CHECKING:
    from xapp.live import LiveControl

app = typer.Typer(
    name="atsss",
    help="ATSSS weight control xApp: keeps MPTCP WRR weights proportional to path capacity.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
bench_app = typer.Typer(help="Benchmarks that print figures.", no_args_is_help=True)
scenario_app = typer.Typer(help="List and check scenario files.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
app.add_typer(scenario_app, name="scenario")
app.add_typer(kpm_app, name="kpm")
app.add_typer(e2sim_app, name="e2sim")
app.add_typer(agent_app, name="agent")
app.add_typer(testbed_app, name="testbed")
app.add_typer(train_app, name="train")
xapp_app = typer.Typer(help="Run the xApp.", no_args_is_help=True)
app.add_typer(xapp_app, name="xapp")

LOG_LEVEL_VARIABLE = "ATSSS_LOG_LEVEL"


@app.callback()
def configure_logging() -> None:
    """Log to stderr at the level in ATSSS_LOG_LEVEL (default WARNING; INFO shows every weight
    push and probe with its reason)."""
    level = os.environ.get(LOG_LEVEL_VARIABLE, "WARNING").upper()
    if level not in logging.getLevelNamesMapping():
        fail(f"{LOG_LEVEL_VARIABLE} must be one of DEBUG, INFO, WARNING, ERROR; got {level!r}")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# Tables are wider than 80 columns; pipes and CI logs get 110 rather than rich's default 80.
out = Console(width=max(110, Console().size.width))
err = Console(stderr=True)


def fail(message: str) -> NoReturn:
    err.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


@app.command()
def demo(
    plots: Annotated[
        Path | None, typer.Option(help="Write one PNG per scenario into this folder.")
    ] = None,
    duration: Annotated[
        float | None, typer.Option(help="Cut every scenario to at most this many seconds.")
    ] = None,
) -> None:
    """Run the control loop on the paper's scenarios (simulated time, no RIC, no root) and
    print the results next to the paper's figures."""
    from xapp.demo import run_demo

    run_demo(out, plots, duration)


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
        int, typer.Option(help="From a report to new weights in the kernel.")
    ] = 100,
    step_ms: Annotated[int, typer.Option(help="Simulation time step.")] = 100,
    noise: Annotated[
        float, typer.Option(help="Relative error (1 sigma) of the oracle-noise estimator.")
    ] = 0.05,
    max_weight: Annotated[int, typer.Option(help="Largest WRR weight.")] = 100,
    min_gain: Annotated[
        float, typer.Option(help="Predicted relative gain needed to push new weights.")
    ] = 0.01,
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
    try:
        settings = LoopSettings(
            direction=direction,
            step_s=step_ms / 1000,
            reporting_period_s=reporting_period_ms / 1000,
            control_delay_s=control_delay_ms / 1000,
            estimators=tuple(dict.fromkeys(estimators)),
            estimator_noise=noise,
            min_gain=min_gain,
            policy=PolicyConfig(max_weight=max_weight),
            contenders=contenders,
        )
        loaded = [load_scenario(name) for name in names]
    except (ScenarioError, ValueError) as error:
        fail(str(error))
    reports = []
    for each in loaded:
        if duration is not None:
            each = each.cut(duration)
        try:
            with err.status(f"evaluating {each.name} ({len(each.cpes)} CPEs) …") as status:
                report = evaluate(each, settings, lambda text: status.update(text))
        except ScenarioError as error:
            fail(str(error))
        reports.append(report)
        if not as_json:
            from xapp.evaluation.report import loop_table

            out.print(loop_table(report))
            out.print(f"wall time {report.wall_s:.2f} s")
    if as_json:
        dumped = [r.as_dict() for r in reports]
        print(json.dumps(dumped[0] if len(dumped) == 1 else dumped, indent=2))
    if plot is not None:
        from xapp.evaluation.plot import plot_report

        plot_report(reports[0], plot)
        err.print(f"plot written to {plot}")


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
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run the whole system for real (root): the netns testbed shaped to the scenario, the KPM
    simulator, the xApp and the CPE agent (mainline MPTCP); a long MPTCP iperf3 transfer with
    all paths active, then with the xApp in the loop, against the sum of the shaped capacities."""
    from xapp.estimators.selection import MODES
    from xapp.evaluation.testbed_bench import (
        TestbedBenchError,
        TestbedBenchSettings,
        run_testbed_bench,
    )

    try:
        loaded = load_scenario(scenario)
        chosen = Direction(direction)
    except ScenarioError as error:
        fail(str(error))
    except ValueError:
        fail(f"--direction is downlink or uplink, got {direction!r}")
    if estimator not in MODES:
        fail(f"--estimator: {estimator!r} is not one of {', '.join(MODES)}")
    if not 0 < scale <= 100 or duration < 2 or step < 1:
        fail("--scale must be in (0, 100], --duration ≥ 2 s and --step ≥ 1 s")
    if len(prefix) > 9 or not prefix.isalnum():
        fail("--prefix is at most 9 letters or digits (interface names are short)")
    # Its own addresses per prefix: two benches (or a bench and the tests) never share a subnet.
    subnet = 100 + zlib.crc32(prefix.encode()) % 100
    settings = TestbedBenchSettings(
        loaded, scale, chosen, duration, step, estimator, prefix=prefix, subnet=subnet
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
        title=f"{loaded.name} ×{scale:g}, {chosen.value}, {estimator}",
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


@bench_app.command("e2")
def bench_e2(
    ues: Annotated[int, typer.Option(help="UEs in one per-UE (Format 3) indication.")] = 1000,
    repeats: Annotated[int, typer.Option(help="Runs; the best one is reported.")] = 3,
) -> None:
    """Time encoding one RIC indication and decoding it into KPI samples."""
    from xapp.e2.bench import run_e2_bench

    if ues < 1 or repeats < 1:
        fail("--ues and --repeats must be ≥ 1")
    table = Table("UEs", "bytes", "encode ms", "decode → samples ms", "samples", "UE reports/s")
    for count in sorted({1, 10, 100, ues}):
        r = run_e2_bench(count, repeats)
        table.add_row(
            str(r.ues),
            f"{r.indication_bytes:,}",
            f"{r.encode_ms:.2f}",
            f"{r.process_ms:.2f}",
            str(r.samples),
            f"{r.ue_reports_per_second:,.0f}",
        )
    out.print(table)


@bench_app.command("e2sim")
def bench_e2sim(
    scenario: Annotated[str, typer.Option(help="Scenario file or shipped name.")] = "many-cpes",
    duration: Annotated[
        float, typer.Option(help="Seconds of scenario to run in real time.")
    ] = 20.0,
    kpm_version: Annotated[str, typer.Option(help="v3.00 or v2.03.")] = "v3.00",
) -> None:
    """The simulator in real time against a standalone xApp process: can it keep up?"""
    import subprocess
    import sys

    from e2sim.runner import SimRunner
    from e2sim.world import SimWorld
    from kpm.versions import parse_version
    from xapp.scenario.load import ScenarioError, load_scenario

    try:
        loaded = load_scenario(scenario)
        version = parse_version(kpm_version)
    except (ScenarioError, ValueError) as error:
        fail(str(error))
    loaded = loaded.cut(duration)
    world = SimWorld(loaded)
    xapp = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "xapp",
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
    from xapp.evaluation.policy_bench import run_policy_bench

    if cpes < 1:
        fail(f"--cpes must be ≥ 1, got {cpes}")
    table = Table("what", "decisions", "seconds", "per second", "µs each")
    for r in run_policy_bench(cpes, noise):
        table.add_row(
            r.name,
            str(r.decisions),
            f"{r.seconds:.3f}",
            f"{r.per_second:,.0f}",
            f"{r.microseconds_each:,.0f}",
        )
    out.print(table)


@scenario_app.command("list")
def scenario_list() -> None:
    """The scenarios shipped with the xApp."""
    table = Table("name", "CPEs", "duration s", "description")
    for name, path in sorted(shipped_scenarios().items()):
        loaded = load_scenario(str(path))
        first_line = loaded.description.splitlines()[0] if loaded.description else ""
        table.add_row(name, str(len(loaded.cpes)), f"{loaded.duration_s:g}", first_line)
    out.print(table)


@scenario_app.command("check")
def scenario_check(
    files: Annotated[list[str], typer.Argument(help="Scenario files or shipped names.")],
) -> None:
    """Validate scenario files; prints one line per file, exits 2 on the first bad one."""
    for name in files:
        try:
            loaded = load_scenario(name)
        except ScenarioError as error:
            fail(str(error))
        out.print(
            f"ok: {loaded.source}: {loaded.name}, {len(loaded.cpes)} CPE(s), "
            f"accesses {', '.join(loaded.access_names)}, {loaded.duration_s:g} s"
        )


@app.command()
def weights(
    capacities: Annotated[
        str, typer.Argument(help="Capacities in Mbit/s, e.g. nr=342,wifi=1190,lifi=12.1")
    ],
    max_weight: Annotated[int, typer.Option(help="Largest WRR weight.")] = 100,
) -> None:
    """Optimal integer WRR weights for given capacities, next to the baselines."""
    parsed: dict[str, float] = {}
    for item in capacities.split(","):
        name, sep, value = item.partition("=")
        try:
            parsed[name.strip()] = float(value)
        except ValueError:
            fail(f"capacities: {item!r} is not ACCESS=MBPS (e.g. nr=342)")
        if not sep or not name.strip() or parsed[name.strip()] < 0:
            fail(f"capacities: {item!r} is not ACCESS=MBPS with MBPS ≥ 0")
    if not 1 <= max_weight <= 255:
        fail(f"--max-weight must be in 1..255, got {max_weight}")
    caps = list(parsed.values())
    total = sum(caps)
    table = Table("rule", *parsed.keys(), "aggregate Mbit/s", "of sum")
    for label, chosen in (
        ("optimal", optimal_weights(caps, max_weight)),
        ("proportional", proportional_weights(caps, max_weight)),
        ("round robin", round_robin_weights(caps)),
    ):
        agg = aggregate_mbps(list(chosen), caps)
        table.add_row(
            label, *map(str, chosen), f"{agg:.1f}", f"{agg / total:.4f}" if total else "-"
        )
    out.print(table)


@xapp_app.command("run")
def xapp_run(
    scenario: Annotated[str, typer.Option(help="Scenario whose CPEs and accesses to expect.")],
    listen: Annotated[
        str, typer.Option(help="E2 address to listen on, HOST:PORT.")
    ] = "127.0.0.1:36421",
    duration: Annotated[float | None, typer.Option(help="Stop after this many seconds.")] = None,
    samples: Annotated[
        Path | None, typer.Option(help="Write received KPI samples (JSON lines).")
    ] = None,
    period_ms: Annotated[int, typer.Option(help="Reporting period to subscribe with.")] = 1000,
    agent: Annotated[
        list[str] | None,
        typer.Option(
            help="CPE=URL of a CPE's agent (repeatable). With agents, the control loop runs and "
            "pushes weights; without, the xApp only receives KPIs."
        ),
    ] = None,
    proxy_agent: Annotated[
        str | None, typer.Option(help="URL of the MPTCP proxy's agent (downlink weights).")
    ] = None,
    downlink_via_cpe: Annotated[
        bool,
        typer.Option(
            help="Send downlink weights to the CPE's agent: mainline MPTCP, whose CPE backup "
            "flags steer the proxy (MP_PRIO)."
        ),
    ] = False,
    direction: Annotated[
        list[str] | None, typer.Option(help="uplink and/or downlink to control (default: both).")
    ] = None,
    estimator: Annotated[
        str, typer.Option(help="fused, kpi-only, model-only or probe-only.")
    ] = "fused",
    token_file: Annotated[
        Path | None, typer.Option(help="File holding the agents' bearer token.")
    ] = None,
    agent_wait: Annotated[
        float,
        typer.Option(
            help="Seconds to keep retrying an agent that does not answer at start (agents "
            "may come up after the xApp); 0: fail at once.",
            min=0,
        ),
    ] = 0.0,
) -> None:
    """Standalone mode: accept E2 nodes (e.g. `atsss e2sim run`), subscribe, decode their KPIs,
    and with `--agent` run the control loop that keeps the agents' weights right."""
    from xapp.live import LiveSetupError
    from xapp.scenario.load import ScenarioError, load_scenario
    from xapp.standalone import ReceivedStats, run_standalone

    try:
        loaded = load_scenario(scenario)
    except ScenarioError as error:
        fail(str(error))
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        fail(f"--listen is HOST:PORT, got {listen!r}")
    control = (
        _live_control(
            loaded,
            agent,
            proxy_agent,
            downlink_via_cpe,
            direction,
            estimator,
            token_file,
            period_ms,
        )
        if agent or proxy_agent
        else None
    )
    if control is not None:
        try:
            levers = control.prepare(agent_wait, on_wait=lambda m: typer.echo(m, err=True))
        except LiveSetupError as error:
            fail(str(error))
        typer.echo(
            "agents: " + ", ".join(f"{url} ({lever})" for url, lever in sorted(levers.items())),
            err=True,
        )

    def ready(address: tuple[str, int]) -> None:
        typer.echo(f"listening for E2 nodes on {address[0]}:{address[1]}", err=True)
        if control is not None:
            control.start()

    def summary(stats: ReceivedStats, status: dict[str, str]) -> None:
        accesses = ", ".join(f"{a} {n}" for a, n in sorted(stats.by_access.items()))
        nodes = ", ".join(f"{n}: {s}" for n, s in sorted(status.items()))
        pushes = (
            f"; {control.pushes} weight pushes, {control.push_failures} failed"
            if control is not None
            else ""
        )
        typer.echo(
            f"samples {stats.samples} ({accesses}) from {len(stats.cpes)} CPEs; {nodes}{pushes}",
            err=True,
        )

    try:
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(samples.open("w")) if samples is not None else None
            if control is not None:
                stack.callback(control.stop)
            stats = run_standalone(
                loaded,
                host,
                int(port),
                duration,
                out,
                period_ms,
                ready,
                summary,
                on_samples=control.add_samples if control is not None else lambda batch: None,
            )
    except OSError as error:
        fail(f"cannot listen on {listen}: {error.strerror or error}")
    result: dict[str, object] = {
        "samples": stats.samples,
        "by_access": dict(stats.by_access),
        "cpes": len(stats.cpes),
    }
    if control is not None:
        result |= {
            "steps": control.steps,
            "pushes": control.pushes,
            "push_failures": control.push_failures,
        }
    typer.echo(json.dumps(result))


def _live_control(
    scenario: Scenario,
    agents: list[str] | None,
    proxy_agent: str | None,
    downlink_via_cpe: bool,
    directions: list[str] | None,
    estimator: str,
    token_file: Path | None,
    period_ms: int,
) -> LiveControl:
    from e2sim.identities import e2_cpes
    from xapp.adapters.agent_http import AgentEndpoint
    from xapp.estimators.selection import MODES, EstimatorSettings
    from xapp.live import LiveControl, LiveSettings

    token = None
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as error:
            fail(f"--token-file {token_file}: {error.strerror}")
    if estimator not in MODES:
        fail(f"--estimator: {estimator!r} is not one of {', '.join(MODES)}")
    cpes = e2_cpes(scenario)
    known = {c.cpe_id for c in cpes}
    endpoints: dict[str, AgentEndpoint] = {}
    for item in agents or []:
        cpe_id, sep, url = item.partition("=")
        if not sep or not url.startswith(("http://", "https://")):
            fail(f"--agent is CPE=URL (http:// or https://), got {item!r}")
        if cpe_id not in known:
            fail(f"--agent: {cpe_id!r} is not a CPE of the scenario ({', '.join(sorted(known))})")
        endpoints[cpe_id] = AgentEndpoint(url, token)
    chosen = []
    for name in directions or ["downlink", "uplink"]:
        try:
            chosen.append(Direction(name))
        except ValueError:
            fail(f"--direction is uplink or downlink, got {name!r}")
    settings = LiveSettings(
        cpe_agents=endpoints,
        proxy_agent=AgentEndpoint(proxy_agent, token) if proxy_agent else None,
        downlink_via_cpe=downlink_via_cpe,
        directions=tuple(dict.fromkeys(chosen)),
        period_s=period_ms / 1000,
        estimator=EstimatorSettings(mode=estimator),
    )
    return LiveControl(cpes, settings)


@xapp_app.command("export-dataset")
def xapp_export_dataset(
    out_file: Annotated[Path, typer.Option("--out", help="CSV or .parquet file to write.")],
    namespace: Annotated[str, typer.Option(help="SDL namespace of the xApp.")] = "atsss",
) -> None:
    """Write the probe results the xApp stored in SDL, each with the KPIs of its moment, as a
    training dataset for `atsss train --data` (SDL found through DBAAS_SERVICE_HOST/PORT)."""
    from xapp.adapters.probe_records import write_dataset
    from xapp.adapters.sdl_store import SdlStateStore

    try:
        store = SdlStateStore(namespace=namespace)
    except Exception as error:  # ricsdl raises its own types when Redis is unreachable
        fail(f"cannot reach SDL (DBAAS_SERVICE_HOST/PORT): {error}")
    try:
        records = store.load_probe_records()
    finally:
        store.close()
    if not records:
        fail(f"no probe records in SDL namespace {namespace!r}")
    labelled = write_dataset(records, out_file)
    err.print(
        f"{len(records)} probe records → {labelled} labelled rows in {out_file}",
        highlight=False,
    )


def main() -> None:
    app()
