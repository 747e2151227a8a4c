"""`atsss e2sim …`: run the KPM simulator against an xApp, or write a training dataset."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import Progress

from core.scenario.load import ScenarioError, load_scenario
from core.scenario.model import Scenario
from core.standards.nr import PATTERNS
from e2sim.dataset import write_dataset
from e2sim.runner import RunStats, SimRunner
from e2sim.world import SimWorld
from kpm.versions import parse_version

e2sim_app = typer.Typer(
    help="KPM simulator of 5G NR, Wi-Fi and LiFi access nodes.", no_args_is_help=True
)
err = Console(stderr=True, width=110)


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _scenario(name: str, duration_s: float | None) -> Scenario:
    try:
        scenario = load_scenario(name)
    except ScenarioError as error:
        _fail(str(error))
    if duration_s is not None:
        if duration_s <= 0:
            _fail(f"--duration must be > 0 s, got {duration_s}")
        scenario = scenario.cut(duration_s)
    return scenario


def _world(
    scenario: Scenario, period_ms: int, utilisation: float, nr_pattern: str, scale: float = 1.0
) -> SimWorld:
    if nr_pattern not in PATTERNS:
        _fail(f"--nr-pattern is one of {', '.join(PATTERNS)}, not {nr_pattern!r}")
    try:
        return SimWorld(scenario, period_ms / 1000.0, utilisation, nr_pattern, capacity_scale=scale)
    except (ScenarioError, ValueError) as error:
        _fail(str(error))


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
        str, typer.Option(help="E2SM-KPM version the nodes speak: v3.00 or v2.03.")
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
) -> None:
    """Connect one E2 node per access to the xApp and report every period."""
    try:
        version = parse_version(kpm_version)
    except ValueError as error:
        _fail(str(error))
    world = _world(_scenario(scenario, duration), period_ms, utilisation, nr_pattern, scale)
    with contextlib.ExitStack() as stack:
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
) -> None:
    """Write KPIs with the true capacity of every period, CPE and access."""
    world = _world(_scenario(scenario, duration), period_ms, utilisation, nr_pattern)
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("periods", total=world.ticks)
        try:
            rows = write_dataset(
                world, out, lambda done, total: progress.update(task, completed=done)
            )
        except (OSError, ValueError) as error:
            _fail(str(error))
    typer.echo(f"wrote {rows} rows to {out}")
