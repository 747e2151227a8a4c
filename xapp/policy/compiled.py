"""The robust policy's C core (``xapp/policy/_robust_core.c``), where ``pip install`` could
build it (a compiler was there). ``optimal.py`` and ``robust.py`` hold its numpy twin, which is
also the reference the core is tested against (tests/test_policy_core.py) and what runs where
the core is missing or a shape is beyond it. ``ATSSS_PURE_PYTHON=1`` leaves the core out (to
compare, or to rule it out of a problem)."""

from __future__ import annotations

from typing import Any

from core.compiled import compiled_core

core: Any = compiled_core("xapp.policy._robust_core")

COMPILED = core is not None


def use_core(compiled: bool | None, paths: int) -> bool:
    """Whether to compute with the core: ``compiled`` None takes it where it is built and the
    shape fits; True insists (an error where it is not built)."""
    if compiled is None:
        return COMPILED and 1 <= paths <= core.MAX_PATHS
    if compiled and core is None:
        raise RuntimeError("the policy's core xapp.policy._robust_core was not built here")
    if compiled and not 1 <= paths <= core.MAX_PATHS:
        raise ValueError(f"the policy's core takes 1 to {core.MAX_PATHS} paths, not {paths}")
    return compiled
