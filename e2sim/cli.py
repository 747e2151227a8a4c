"""`atsss e2sim …`: run the KPM simulator against an xApp, or write a training dataset."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import Progress

from core.deployment import DeploymentError, dump_deployment, load_deployment
from core.scenario.e2_identities import scenario_deployment
from core.scenario.load import ScenarioError, load_scenario
from core.scenario.model import Scenario
from core.standards.nr import PATTERNS
from e2sim.dataset import write_dataset
from e2sim.nonideal import NonIdealities
from e2sim.runner import RunStats, SimRunner
from e2sim.traffic import AgentWeights, WeightedTraffic
from e2sim.world import SimWorld
from kpm.versions import parse_builder_layout

e2sim_app = typer.Typer(
    help="KPM simulator of 5G NR, Wi-Fi and LiFi access nodes.", no_args_is_help=True
)
err = Console(stderr=True, width=110)


NON_IDEALITIES_HELP = (
    "What the nodes do that KPI formulas leave out: ideal, or realistic (NR frequency-selective "
    "scheduling gain, Wi-Fi efficiency per station and contention loss, radio reports one "
    "period late; docs/e2sim.md)."
)


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _scenario(name: str, duration_s: float | None) -> Scenario:
    try:
        scenario = load_scenario(name)
    except ScenarioError as error:
        _fail(str(error), error.exit_code)
    if duration_s is not None:
        if duration_s <= 0:
            _fail(f"--duration must be > 0 s, got {duration_s}")
        scenario = scenario.cut(duration_s)
    return scenario


def _world(
    scenario: Scenario,
    period_ms: int,
    utilisation: float,
    nr_pattern: str,
    scale: float = 1.0,
    own_cells: bool = False,
    non_idealities: str = "ideal",
) -> SimWorld:
    if nr_pattern not in PATTERNS:
        _fail(f"--nr-pattern is one of {', '.join(PATTERNS)}, not {nr_pattern!r}")
    try:
        return SimWorld(
            scenario,
            period_ms / 1000.0,
            utilisation,
            nr_pattern,
            capacity_scale=scale,
            own_cells=own_cells,
            nonideal=NonIdealities.named(non_idealities),
        )
    except (ScenarioError, ValueError) as error:
        _fail(str(error), getattr(error, "exit_code", 2))


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        _fail(f"--connect is HOST:PORT, got {text!r}")
    return host, int(port)


@e2sim_app.command("run")
def run(
    scenario: Annotated[str, typer.Option(help="Scenario file, or the name of a shipped one.")],
    connect: Annotated[
        str, typer.Option(help="The xApp's E2 address, HOST:PORT.")
    ] = "127.0.0.1:36421",
    speed: Annotated[
        float, typer.Option(help="1 real time, 10 ten times faster, 0 as fast as possible.")
    ] = 1.0,
    duration: Annotated[
        float | None, typer.Option(help="Cut the scenario to this many seconds.")
    ] = None,
    period_ms: Annotated[int, typer.Option(help="Reporting (and granularity) period.")] = 1000,
    kpm_version: Annotated[
        str,
        typer.Option(
            help="E2SM-KPM layout the nodes speak: v3.00, v2.03, flexric-v3.00 or flexric-v2.03."
        ),
    ] = "v3.00",
    truth: Annotated[
        Path | None, typer.Option(help="Write the ground truth here (JSON lines).")
    ] = None,
    utilisation: Annotated[
        float, typer.Option(help="Share of its capacity each station carries.")
    ] = 1.0,
    nr_pattern: Annotated[
        str, typer.Option(help="NR TDD pattern: 5ms (342 Mbit/s) or 1ms (116).")
    ] = "5ms",
    report_delay_ms: Annotated[
        int, typer.Option(help="How long after a period ends its report is sent.")
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    scale: Annotated[
        float,
        typer.Option(help="Multiply every capacity (0.1: a testbed shaped to a tenth)."),
    ] = 1.0,
    config: Annotated[
        Path | None,
        typer.Option(
            help="The xApp's configuration (`atsss e2sim config` writes one): checked to name "
            "the nodes and CPEs as the simulator does, so both sides agree."
        ),
    ] = None,
    non_idealities: Annotated[str, typer.Option(help=NON_IDEALITIES_HELP)] = "ideal",
    own_cells: Annotated[
        bool,
        typer.Option(
            help="Each CPE in a cell of its own, the rest of the carrier or channel reported as "
            "others' load, as `bench loop` reports it: a station's capacity below the whole "
            "carrier then shows as PRBs or airtime taken by others, not as free ones its KPIs "
            "would count as headroom."
        ),
    ] = False,
    traffic_follows_agents: Annotated[
        bool,
        typer.Option(
            help="Each CPE's traffic spread by the weights its agents hold (the agents of "
            "--config, asked several times a period): one saturating MPTCP connection per CPE "
            "and direction, what the WRR scheduler lets each path carry, as `bench loop` "
            "reports it. Without it every station carries --utilisation of its capacity."
        ),
    ] = False,
) -> None:
    """Connect one E2 node per access to the xApp and report every period."""
    try:
        version = parse_builder_layout(kpm_version)
    except ValueError as error:
        _fail(str(error))
    loaded = _scenario(scenario, duration)
    if config is not None:
        _check_config(config, loaded)
    world = _world(
        loaded,
        period_ms,
        utilisation,
        nr_pattern,
        scale,
        own_cells=own_cells,
        non_idealities=non_idealities,
    )
    if traffic_follows_agents and config is None:
        _fail("--traffic-follows-agents needs --config: the agents are the configuration's")
    with contextlib.ExitStack() as stack:
        traffic = None
        if config is not None and traffic_follows_agents:
            try:
                held = AgentWeights(load_deployment(config))
            except OSError as error:
                _fail(f"--traffic-follows-agents: an agent's token file: {error}")
            held.start()
            stack.callback(held.close)
            traffic = WeightedTraffic(held, world.downlink.cpe_ids, world.accesses)
        truth_out = stack.enter_context(truth.open("w")) if truth is not None else None
        progress = stack.enter_context(Progress(console=err, transient=True, disable=as_json))
        task = progress.add_task("simulating", total=world.ticks)

        def advance(stats: RunStats) -> None:
            progress.update(
                task, completed=stats.ticks, description=f"lag {stats.lags_s[-1] * 1000:.0f} ms"
            )

        if report_delay_ms < 0:
            _fail(f"--report-delay-ms must be ≥ 0, got {report_delay_ms}")
        runner = SimRunner(
            world,
            _address(connect),
            version,
            speed,
            truth_out,
            progress=advance,
            report_delay_s=report_delay_ms / 1000,
            traffic=traffic,
        )
        try:
            stats = runner.run()
        except OSError as error:
            _fail(f"cannot reach the xApp at {connect}: {error.strerror or error}")
    summary = stats.as_dict()
    if as_json:
        typer.echo(json.dumps(summary))
        return
    refused = [a for a, ok in stats.subscribed.items() if not ok]
    typer.echo(
        f"{stats.ticks} periods, {stats.indications} indications in {stats.wall_s:.1f} s "
        f"({stats.indications_per_second:.1f}/s, {stats.bytes_sent / 1e6:.1f} MB); "
        f"lag mean {summary['mean_lag_ms']} ms, max {summary['max_lag_ms']} ms; "
        f"busy {summary['busy_share']:.0%} of the time"
        + (f"; not subscribed: {', '.join(refused)}" if refused else "")
    )


def _check_config(path: Path, scenario: Scenario) -> None:
    """The configuration must know the simulator's nodes and CPEs by their simulated names."""
    try:
        given = load_deployment(path)
    except DeploymentError as error:
        _fail(str(error))
    expected = scenario_deployment(scenario)
    nodes = {n.access: n.name for n in given.e2.nodes}
    for node in expected.e2.nodes:
        if nodes.get(node.access) != node.name:
            _fail(
                f"{path}: e2.nodes: the simulated {node.access} node is {node.name}, "
                f"the configuration has {nodes.get(node.access) or 'none'}"
            )
    configured = {c.id: c for c in given.cpes}
    for cpe in expected.cpes:
        mine = configured.get(cpe.id)
        for access, identity in cpe.accesses.items():
            theirs = None if mine is None else mine.accesses.get(access)
            if theirs is None or (theirs.ue_id, theirs.station_mac) != (
                identity.ue_id,
                identity.station_mac,
            ):
                _fail(
                    f"{path}: cpes: {cpe.id} on {access} is ue_id {identity.ue_id}"
                    + (f", station_mac {identity.station_mac}" if identity.station_mac else "")
                    + " in the simulator"
                )


@e2sim_app.command("config")
def config(
    scenario: Annotated[str, typer.Option(help="Scenario file, or the name of a shipped one.")],
    out: Annotated[
        Path | None, typer.Option(help="Write it here (JSON). Default: standard output.")
    ] = None,
    period_ms: Annotated[int, typer.Option(help="Reporting period to subscribe with.")] = 1000,
    agent: Annotated[
        list[str] | None, typer.Option(help="CPE=URL of a CPE's agent (repeatable).")
    ] = None,
    proxy_agent: Annotated[str | None, typer.Option(help="URL of the MPTCP proxy's agent.")] = None,
    descriptor: Annotated[
        bool,
        typer.Option(help="Write a whole xApp descriptor with the configuration as its controls."),
    ] = False,
) -> None:
    """Write the xApp configuration that matches a simulated scenario: its E2 nodes, and each
    CPE with the identities the simulated nodes report, for `atsss xapp serve --config`."""
    loaded = _scenario(scenario, None)
    agents = {}
    for item in agent or []:
        cpe_id, sep, url = item.partition("=")
        if not sep:
            _fail(f"--agent is CPE=URL, got {item!r}")
        agents[cpe_id] = url
    try:
        deployment = scenario_deployment(loaded, period_ms, agents, proxy_agent)
    except (DeploymentError, ValueError) as error:
        _fail(str(error))
    text = dump_deployment(deployment)
    if descriptor:
        text = (
            json.dumps(
                {"name": "atsss-xapp", "version": "0.1.0", "controls": json.loads(text)}, indent=2
            )
            + "\n"
        )
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)
        err.print(f"wrote {out}", highlight=False)


@e2sim_app.command("dataset")
def dataset(
    scenario: Annotated[str, typer.Option(help="Scenario file, or the name of a shipped one.")],
    out: Annotated[Path, typer.Option(help="Output file, .csv or .parquet.")],
    duration: Annotated[
        float | None, typer.Option(help="Cut the scenario to this many seconds.")
    ] = None,
    period_ms: Annotated[int, typer.Option(help="Reporting period (one row per period).")] = 1000,
    utilisation: Annotated[
        float, typer.Option(help="Share of its capacity each station carries.")
    ] = 1.0,
    nr_pattern: Annotated[str, typer.Option(help="NR TDD pattern: 5ms or 1ms.")] = "5ms",
    own_cells: Annotated[
        bool,
        typer.Option(
            help="Each CPE in a cell of its own, the rest of the carrier reported as others' "
            "load, as `bench loop` reports it (the models' training data)."
        ),
    ] = False,
    non_idealities: Annotated[str, typer.Option(help=NON_IDEALITIES_HELP)] = "ideal",
) -> None:
    """Write KPIs with the true capacity of every period, CPE and access."""
    world = _world(
        _scenario(scenario, duration),
        period_ms,
        utilisation,
        nr_pattern,
        own_cells=own_cells,
        non_idealities=non_idealities,
    )
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("periods", total=world.ticks)
        try:
            rows = write_dataset(
                world, out, lambda done, total: progress.update(task, completed=done)
            )
        except (OSError, ValueError) as error:
            _fail(str(error))
    typer.echo(f"wrote {rows} rows to {out}")
