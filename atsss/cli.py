"""The ``atsss`` command line: one entry point that mounts each package's own command line.

Each package keeps its commands in its own ``cli`` module; this one only assembles them. An
installation may hold only some parts (the agent alone on a CPE, ``pip install '.[agent]'``):
a part whose dependencies are missing still shows in ``--help`` and says what to install,
instead of breaking every other command.

Errors a user can fix (a bad scenario, a bad option) print one line on stderr and exit with 2;
nothing here prints a traceback for them.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from typing import Any

import typer

from core.console import LOG_LEVEL_VARIABLE, fail

app = typer.Typer(
    name="atsss",
    help="ATSSS weight control xApp: keeps MPTCP WRR weights proportional to path capacity.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)

OWN_PACKAGES = frozenset({"atsss", "core", "kpm", "e2sim", "agent", "models", "xapp", "bench"})
FULL_INSTALL = "pip install 'atsss-xapp[xapp]'"

# (module, attribute, name): a Typer group mounted as `atsss NAME …`
GROUPS: tuple[tuple[str, str, str], ...] = (
    ("bench.cli", "bench_app", "bench"),
    ("core.cli", "scenario_app", "scenario"),
    ("kpm.cli", "kpm_app", "kpm"),
    ("e2sim.cli", "e2sim_app", "e2sim"),
    ("agent.cli", "agent_app", "agent"),
    ("agent.cli", "testbed_app", "testbed"),
    ("models.cli", "train_app", "train"),
    ("xapp.cli", "xapp_app", "xapp"),
    ("xapp.operator.ctl", "ctl_app", "ctl"),
)
# (module, function, name): a single command mounted as `atsss NAME …`
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("bench.cli", "demo", "demo"),
    ("xapp.cli", "weights", "weights"),
)


@app.callback()
def configure_logging() -> None:
    """Log to stderr at the level in ATSSS_LOG_LEVEL (default WARNING; INFO shows every weight
    push and probe with its reason)."""
    level = os.environ.get(LOG_LEVEL_VARIABLE, "WARNING").upper()
    if level not in logging.getLevelNamesMapping():
        fail(f"{LOG_LEVEL_VARIABLE} must be one of DEBUG, INFO, WARNING, ERROR; got {level!r}")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _load(module: str, attribute: str) -> Any | str:
    """The attribute, or the name of the missing third-party package that keeps it away."""
    try:
        return getattr(importlib.import_module(module), attribute)
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        if not missing or missing in OWN_PACKAGES:
            raise  # our own code is broken: that is a bug, not a partial installation
        return missing


def _unavailable(name: str, missing: str) -> Callable[[], None]:
    def unavailable() -> None:
        fail(f"`atsss {name}` needs {missing}, which is not installed here: {FULL_INSTALL}")

    return unavailable


# A part that is not installed takes any arguments, so that `atsss kpm catalogue` says what is
# missing instead of "no such command".
ANY_ARGUMENTS = {"allow_extra_args": True, "ignore_unknown_options": True}


def _assemble() -> None:
    for module, attribute, name in GROUPS + COMMANDS:
        loaded = _load(module, attribute)
        if isinstance(loaded, str):
            app.command(
                name, help=f"Not installed here (needs {loaded}).", context_settings=ANY_ARGUMENTS
            )(_unavailable(name, loaded))
        elif (module, attribute, name) in GROUPS:
            app.add_typer(loaded, name=name)
        else:
            app.command(name)(loaded)


_assemble()


def main() -> None:
    app()
