"""Where a module has a C core with a pure-Python twin (the fast E2 reader, the robust policy):
the core, if `pip install` could build it (a compiler was there). ``ATSSS_PURE_PYTHON=1`` leaves
every core out, to compare the twins or to rule a core out of a problem."""

from __future__ import annotations

import importlib
import os
from typing import Any


def compiled_core(module: str) -> Any:
    """The extension module ``module``, or None where it was not built or is left out."""
    if os.environ.get("ATSSS_PURE_PYTHON", "") == "1":
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
