"""`atsss scenario …`: list the shipped scenarios and check scenario files."""

from __future__ import annotations

import re
from typing import Annotated

import typer
from rich.table import Table

from core.console import fail, out
from core.scenario.load import (
    MeasurementMissingError,
    ScenarioError,
    load_scenario,
    shipped_scenarios,
)

scenario_app = typer.Typer(help="List and check scenario files.", no_args_is_help=True)


@scenario_app.command("list")
def scenario_list() -> None:
    """The scenarios shipped with the xApp, and whether each can run here: those driven by
    measured traces need the dataset (ATSSS_DATASETS, or the checkout's sibling datasets folder;
    see NOTICE)."""
    table = Table("name", "runs here", "CPEs", "duration s", "description")
    for name, path in sorted(shipped_scenarios().items()):
        try:
            loaded = load_scenario(str(path))
        except MeasurementMissingError as error:
            trace = re.search(r"trace (\S+) not found", str(error))
            needs = trace.group(1) if trace else "its measurement file"
            why = f"needs {needs} (see NOTICE; set ATSSS_DATASETS)"
            table.add_row(name, "no", "", "", why)
            continue
        first_line = loaded.description.splitlines()[0] if loaded.description else ""
        table.add_row(name, "yes", str(len(loaded.cpes)), f"{loaded.duration_s:g}", first_line)
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
            fail(str(error), error.exit_code)
        out.print(
            f"ok: {loaded.source}: {loaded.name}, {len(loaded.cpes)} CPE(s), "
            f"accesses {', '.join(loaded.access_names)}, {loaded.duration_s:g} s"
        )
