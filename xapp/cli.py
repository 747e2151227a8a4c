"""`atsss xapp …` and `atsss weights`: run the xApp, export its data, compute weights."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from core.console import err, fail, out
from core.domain import Direction
from core.fluid import aggregate_mbps
from core.scenario.model import Scenario
from xapp.policy.baselines import proportional_weights, round_robin_weights
from xapp.policy.optimal import optimal_weights

if TYPE_CHECKING:
    from xapp.live import LiveControl

xapp_app = typer.Typer(help="Run the xApp.", no_args_is_help=True)


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
        mbps = parsed[name.strip()]
        if not sep or not name.strip() or not math.isfinite(mbps) or mbps < 0:
            fail(f"capacities: {item!r} is not ACCESS=MBPS with a finite MBPS ≥ 0")
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
    and with `--agent` run the control loop that keeps the agents' weights right. State goes
    to SDL when DBAAS_SERVICE_HOST/PORT name one, else it stays in memory."""
    from core.scenario.load import ScenarioError, load_scenario
    from xapp.live import LiveSetupError
    from xapp.standalone import ReceivedStats, run_standalone

    try:
        loaded = load_scenario(scenario)
    except ScenarioError as error:
        fail(str(error), error.exit_code)
    host, port = _host_port("--listen", listen)
    if not 1 <= period_ms <= 3_600_000:
        fail(f"--period-ms must be in 1..3600000, got {period_ms}")
    if samples is not None and not samples.parent.is_dir():
        fail(f"--samples: no directory {samples.parent}")
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
        out_file = samples.open("w") if samples is not None else None
    except OSError as error:
        fail(f"--samples: cannot write {samples}: {error.strerror or error}")
    try:
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(out_file) if out_file is not None else None
            if control is not None:
                stack.callback(control.stop)
            stats = run_standalone(
                loaded,
                host,
                port,
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
    from core.scenario.e2_identities import e2_cpes
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
    from xapp.adapters.sdl_store import SdlUnavailableError
    from xapp.service import make_store

    # As `xapp serve`: SDL when DBAAS_SERVICE_HOST names one (weights in force, overrides,
    # probe records for `xapp export-dataset`), memory otherwise.
    try:
        store, in_sdl = make_store("atsss")
        if in_sdl:
            store.check()  # type: ignore[attr-defined]
    except SdlUnavailableError as error:
        fail(str(error))
    return LiveControl(cpes, settings, store=store)


@xapp_app.command("export-dataset")
def xapp_export_dataset(
    out_file: Annotated[Path, typer.Option("--out", help="CSV or .parquet file to write.")],
    namespace: Annotated[str, typer.Option(help="SDL namespace of the xApp.")] = "atsss",
) -> None:
    """Write the probe results and the saturated periods the xApp stored in SDL, each with the
    KPIs of its moment, as a training dataset for `atsss train --data` (SDL found through
    DBAAS_SERVICE_HOST/PORT)."""
    from xapp.adapters.probe_records import write_dataset
    from xapp.adapters.sdl_store import SdlStateStore, SdlUnavailableError

    try:
        store = SdlStateStore(namespace=namespace)
        try:
            store.check()
            records = store.load_probe_records()
            saturated = store.load_saturated_periods()
        finally:
            store.close()
    except SdlUnavailableError as error:
        fail(str(error))
    except Exception as error:  # ricsdl's own error types, after the check passed
        fail(f"SDL: {error}")
    if not records and not saturated:
        fail(f"no probe records and no saturated periods in SDL namespace {namespace!r}")
    labelled = write_dataset(records, out_file, saturated)
    err.print(
        f"{len(records)} probe records and {len(saturated)} saturated periods → {labelled} "
        f"labelled rows in {out_file}",
        highlight=False,
    )


@xapp_app.command("serve")
def xapp_serve(
    config: Annotated[
        Path | None,
        typer.Option(
            help="Descriptor or controls file (JSON or YAML). Default: CONFIG_FILE, else "
            "XAPP_DESCRIPTOR_PATH."
        ),
    ] = None,
    e2: Annotated[
        str,
        typer.Option(
            help="ric (RMR and the submgr), standalone (E2 nodes connect over TCP), or auto: "
            "ric where the RMR library is installed."
        ),
    ] = "auto",
    listen: Annotated[
        str, typer.Option(help="Standalone: E2 address to listen on, HOST:PORT (port 0: any).")
    ] = "127.0.0.1:36421",
    http: Annotated[
        str | None,
        typer.Option(help="HTTP address, HOST:PORT. Default: 0.0.0.0 and e2.http_port."),
    ] = None,
    log_format: Annotated[
        str,
        typer.Option(
            help="json (one mdclog-shaped object a line, as a RIC's log collectors read), text, "
            "or auto: json in RIC mode, text standalone."
        ),
    ] = "auto",
) -> None:
    """Run the xApp until SIGTERM: E2 in, weights out to the agents, health and metrics over
    HTTP. SIGHUP or an edit of the configuration file reloads it without a restart."""
    import logging
    import os

    from core.deployment import DeploymentError
    from core.logs import use_format
    from xapp.config import config_path, load_xapp_config
    from xapp.e2.rmr_adapter import rmr_library_available
    from xapp.service import ServeOptions, ServiceError, XappService

    if "ATSSS_LOG_LEVEL" not in os.environ:  # a service logs what it does
        logging.getLogger().setLevel(logging.INFO)
    try:
        path = config_path(config)
        deployment = load_xapp_config(path)
    except DeploymentError as error:
        fail(str(error))
    if e2 not in ("auto", "ric", "standalone"):
        fail(f"--e2 is auto, ric or standalone, got {e2!r}")
    if log_format not in ("auto", "json", "text"):
        fail(f"--log-format is auto, json or text, got {log_format!r}")
    mode = e2 if e2 != "auto" else ("ric" if rmr_library_available() else "standalone")
    chosen = log_format if log_format != "auto" else ("json" if mode == "ric" else "text")
    use_format("json" if chosen == "json" else "text")
    if e2 == "auto":
        logging.getLogger("xapp").info("E2 mode: %s", mode)
    e2_host, e2_port = _host_port("--listen", listen)
    http_host, http_port = _host_port("--http", http) if http else ("0.0.0.0", None)
    options = ServeOptions(path, mode, (e2_host, e2_port), http_host, http_port)  # type: ignore[arg-type]
    try:
        service = XappService(options, deployment)
        service.start()
    except ServiceError as error:
        fail(str(error))
    service.run_until_signalled()
    # Everything that keeps state is closed by now (subscriptions, registration, SDL). A call
    # still under way to a slow agent (a probe may take 20 s) would hold the interpreter's exit,
    # which joins every worker thread: end here instead.
    logging.shutdown()
    os._exit(0)


def _host_port(option: str, text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        fail(f"{option} is HOST:PORT, got {text!r}")
    return host, int(port)


@xapp_app.command("schema")
def xapp_schema() -> None:
    """Print the JSON schema of the configuration (the descriptor's `controls`)."""
    from xapp.config import controls_schema_text

    typer.echo(controls_schema_text(), nl=False)
