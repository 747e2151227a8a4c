"""Console output shared by the command lines: tables on stdout, one-line errors on stderr."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

# The environment variable that sets the log level of every command (default WARNING).
LOG_LEVEL_VARIABLE = "ATSSS_LOG_LEVEL"

# Tables are wider than 80 columns; pipes and CI logs get 110 rather than rich's default 80.
out = Console(width=max(110, Console().size.width))
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """A mistake the user can fix: one line on stderr, no traceback; exit code 2 (a usage or
    input mistake) unless told (1: something this machine lacks, such as a dataset)."""
    err.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)
