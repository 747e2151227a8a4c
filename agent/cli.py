"""`atsss agent …` and `atsss testbed …`."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from agent.backends.base import BackendError
from agent.backends.detect import make_backend
from agent.carrier import CarrierWatcher
from agent.config import AgentConfig, AgentConfigError, load_config
from agent.host import local_addresses
from agent.service import ApplyFailedError, UpdateRejectedError, WeightService, WeightUpdate
from agent.testbed import ACCESSES, Testbed, TestbedError
from core.console import LOG_LEVEL_VARIABLE
from core.domain import Direction
from core.sequence import next_after

agent_app = typer.Typer(
    help="The CPE / MPTCP proxy agent that writes weights to the kernel.", no_args_is_help=True
)
testbed_app = typer.Typer(
    help="A CPE and a proxy in network namespaces, three shaped paths (root).", no_args_is_help=True
)


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _config(path: Path) -> AgentConfig:
    try:
        return load_config(path)
    except AgentConfigError as error:
        _fail(str(error))


def _service(
    config: AgentConfig,
    backend: str | None,
    procfs_root: Path | None,
    sysfs_root: Path | None = None,
) -> WeightService:
    if procfs_root is not None:
        config = config.model_copy(update={"procfs_root": procfs_root})
    if sysfs_root is not None:
        config = config.model_copy(update={"sysfs_root": sysfs_root})
    try:
        chosen = make_backend(config, backend)
    except ValueError as error:
        _fail(str(error))
    local = local_addresses() if config.role == "cpe" else set()
    return WeightService(config, chosen, lambda address: address in local)


def _weights(text: str) -> dict[str, int]:
    weights: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        try:
            weights[name.strip()] = int(value)
        except ValueError:
            _fail(f"--weights is access=integer,…; {part!r} is not")
        if not sep:
            _fail(f"--weights is access=integer,…; {part!r} is not")
    return weights


BackendOption = Annotated[
    str | None, typer.Option(help="wrr, mainline, dry-run (default: the config's, else auto).")
]
ProcfsOption = Annotated[
    Path | None, typer.Option(help="Read and write kernel files under this root (tests).")
]
SysfsOption = Annotated[
    Path | None, typer.Option(help="Read and write module parameters under this root (tests).")
]


@agent_app.command("apply")
def apply(
    config: Annotated[Path, typer.Option(help="Agent configuration file (YAML).")],
    direction: Annotated[str, typer.Option(help="up (on the CPE) or down (on the proxy).")],
    weights: Annotated[str, typer.Option(help="e.g. nr=30,wifi=100,lifi=1")],
    cpe: Annotated[
        str | None, typer.Option(help="CPE id (proxy only; default: the config's).")
    ] = None,
    sequence: Annotated[
        int | None, typer.Option(help="Sequence number (default: one past the state file's).")
    ] = None,
    backend: BackendOption = None,
    procfs_root: ProcfsOption = None,
    sysfs_root: SysfsOption = None,
) -> None:
    """Apply one weight set now, exactly as the REST API would (validation, read-back, rollback)."""
    loaded = _config(config)
    service = _service(loaded, backend, procfs_root, sysfs_root)
    wanted = {"up": Direction.UPLINK, "down": Direction.DOWNLINK}.get(direction)
    if wanted is None:
        _fail(f"--direction is up or down, not {direction!r}")
    restored = {a.cpe_id: a for a in service.restore()} if loaded.state_file.exists() else {}
    cpe_id = cpe or loaded.cpe_id
    next_sequence = next_after(restored[cpe_id].sequence if cpe_id in restored else None)
    update = WeightUpdate(
        cpe_id,
        wanted,
        _weights(weights),
        sequence if sequence is not None else next_sequence,
        "atsss agent apply",
    )
    try:
        applied = service.apply(update)
    except (UpdateRejectedError, ApplyFailedError, BackendError) as error:
        _fail(str(error))
    typer.echo(json.dumps({"applied": applied.__dict__, "backend": service.backend.name}))


@agent_app.command("show")
def show(
    config: Annotated[Path, typer.Option(help="Agent configuration file (YAML).")],
    backend: BackendOption = None,
    procfs_root: ProcfsOption = None,
    sysfs_root: SysfsOption = None,
) -> None:
    """What the kernel holds now, as JSON."""
    service = _service(_config(config), backend, procfs_root, sysfs_root)
    try:
        typer.echo(json.dumps(service.backend.describe(), indent=1, default=str))
    except BackendError as error:
        _fail(str(error))


@agent_app.command("run")
def run(
    config: Annotated[Path, typer.Option(help="Agent configuration file (YAML).")],
    backend: BackendOption = None,
    procfs_root: ProcfsOption = None,
    sysfs_root: SysfsOption = None,
) -> None:
    """Serve the REST API; reapply the last good weights first."""
    import uvicorn

    from agent.api import create_app, read_token

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if LOG_LEVEL_VARIABLE not in os.environ:
        # The audit log: every change of weights, at INFO, even though the command line's
        # default level (set before this command runs) is WARNING.
        logging.getLogger("agent").setLevel(logging.INFO)
    loaded = _config(config)
    service = _service(loaded, backend, procfs_root, sysfs_root)
    try:
        token = read_token(loaded.token_file)
    except (OSError, ValueError) as error:
        _fail(f"token file: {error}")
    try:
        service.restore()
    except ApplyFailedError as error:
        logging.getLogger("agent").error("could not reapply the last weights: %s", error)
    watcher = None
    if loaded.watch_carrier:
        watcher = CarrierWatcher(
            {access: a.interface for access, a in loaded.accesses.items()},
            lambda access, up: service.set_carrier(access, up),
            service.config.sysfs_root,
        )
        watcher.check()
        watcher.start()
    host, _, port = loaded.listen.rpartition(":")
    certificate = str(loaded.tls_certificate) if loaded.tls_certificate else None
    key = str(loaded.tls_key) if loaded.tls_key else None
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(service, token),
            host=host,
            port=int(port),
            log_level="warning",
            ssl_certfile=certificate,
            ssl_keyfile=key,
            # Held long polls end within a second of SIGTERM instead of at their timeout.
            timeout_graceful_shutdown=1,
        )
    )
    _serve_until_signalled(server)
    if watcher is not None:
        watcher.stop()


def _serve_until_signalled(server: Any) -> None:
    """Serve in a thread, stop on SIGTERM or SIGINT, return (exit 0). Run in the main thread,
    uvicorn would raise the signal again once it stopped, ending the process with it."""
    import signal
    import threading

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    thread = threading.Thread(target=server.run, name="http", daemon=True)
    thread.start()
    while not stop.wait(0.2):
        if not thread.is_alive():  # it could not start (the port taken, say)
            raise typer.Exit(1)
    server.should_exit = True
    thread.join(timeout=3)


def _testbed(prefix: str) -> Testbed:
    return Testbed(prefix=prefix)


@testbed_app.command("up")
def up(prefix: Annotated[str, typer.Option(help="Namespace name prefix.")] = "atsss") -> None:
    """Create the two namespaces, three veth paths, routing and MPTCP endpoints."""
    testbed = _testbed(prefix)
    try:
        testbed.up()
    except TestbedError as error:
        _fail(str(error))
    typer.echo(
        f"namespaces {testbed.cpe_ns} and {testbed.proxy_ns}; proxy address {testbed.server}"
    )


@testbed_app.command("down")
def down(prefix: Annotated[str, typer.Option(help="Namespace name prefix.")] = "atsss") -> None:
    """Remove the namespaces (and with them everything in them)."""
    _testbed(prefix).down()


@testbed_app.command("shape")
def shape(
    rates: Annotated[
        str | None, typer.Option(help="Downlink Mbit/s, e.g. nr=34.2,wifi=119,lifi=1.21")
    ] = None,
    uplink: Annotated[
        str | None, typer.Option(help="Uplink Mbit/s (default: as downlink).")
    ] = None,
    scenario: Annotated[
        str | None, typer.Option(help="Take the rates from this scenario...")
    ] = None,
    at: Annotated[float, typer.Option(help="...at this time (s), for its first CPE.")] = 0.0,
    scale: Annotated[
        float, typer.Option(help="Multiply every rate (e.g. 0.1 for a slow box).")
    ] = 1.0,
    prefix: Annotated[str, typer.Option(help="Namespace name prefix.")] = "atsss",
) -> None:
    """Shape the three paths with htb (replacing earlier shaping)."""
    if (rates is None) == (scenario is None):
        _fail("give either --rates or --scenario")
    if scenario is not None:
        downlink, up_rates = _scenario_rates(scenario, at)
    else:
        assert rates is not None
        downlink = {k: float(v) for k, v in _weights_float(rates).items()}
        up_rates = _weights_float(uplink) if uplink else downlink
    unknown = sorted(set(downlink) - set(ACCESSES))
    if unknown:
        _fail(f"unknown access {', '.join(unknown)}; the testbed has {', '.join(ACCESSES)}")
    try:
        _testbed(prefix).shape(
            {k: v * scale for k, v in downlink.items()}, {k: v * scale for k, v in up_rates.items()}
        )
    except TestbedError as error:
        _fail(str(error))
    typer.echo(json.dumps({"downlink_mbps": downlink, "uplink_mbps": up_rates, "scale": scale}))


def _weights_float(text: str) -> dict[str, float]:
    out = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            _fail(f"rates are access=Mbit/s,…; {part!r} is not")
    return out


def _scenario_rates(name: str, at_s: float) -> tuple[dict[str, float], dict[str, float]]:
    from core.scenario.load import ScenarioError, load_scenario
    from core.scenario.truth import sample_truth

    try:
        loaded = load_scenario(name)
        rates = []
        for direction in (Direction.DOWNLINK, Direction.UPLINK):
            truth = sample_truth(loaded, direction, 0.1)
            tick = truth.tick_at(at_s)
            rates.append(
                {a: float(truth.capacity_mbps[tick, 0, i]) for i, a in enumerate(truth.accesses)}
            )
    except ScenarioError as error:
        _fail(str(error), error.exit_code)
    return rates[0], rates[1]
