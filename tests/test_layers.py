"""The house stays as drawn in README's "How it is built": no package imports one above it.

Every ``import`` and ``from … import`` in a package's modules counts, at module level or inside
a function, since a lazy import is a dependency all the same. ``atsss`` assembles the command
lines by module name (importlib), so it has no static edges and may mount any package.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Which of our packages each package may import (besides itself).
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "kpm": frozenset({"core"}),
    "agent": frozenset({"core"}),
    "models": frozenset({"core"}),
    "e2sim": frozenset({"core", "kpm"}),
    "xapp": frozenset({"core", "kpm", "models"}),
    "bench": frozenset({"core", "kpm", "models", "e2sim", "agent", "xapp"}),
    "atsss": frozenset({"core"}),
}
OURS = frozenset(ALLOWED)

# Third-party packages the base and the agent may use: the base dependencies and the agent
# extra of pyproject.toml, so that `pip install '.[agent]'` runs every `atsss agent` command.
BASE_THIRD_PARTY = frozenset({"numpy", "pydantic", "pydantic_core", "yaml", "typer", "rich"})
AGENT_THIRD_PARTY = BASE_THIRD_PARTY | {"fastapi", "starlette", "uvicorn"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def top_level_imports(package: str) -> dict[str, set[str]]:
    """Per module of ``package`` (path relative to the checkout), the top-level names it imports."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        found[str(path.relative_to(ROOT))] = {m.split(".")[0] for m in imported_modules(path)}
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    wrong = [
        f"{module} imports {name}"
        for module, names in top_level_imports(package).items()
        for name in sorted(names & OURS - {package} - ALLOWED[package])
    ]
    assert not wrong, "layer violations:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    ("package", "allowed"), [("core", BASE_THIRD_PARTY), ("agent", AGENT_THIRD_PARTY)]
)
def test_the_base_and_the_agent_need_only_their_own_dependencies(
    package: str, allowed: frozenset[str]
) -> None:
    stdlib = sys.stdlib_module_names
    wrong = [
        f"{module} imports {name}"
        for module, names in top_level_imports(package).items()
        for name in sorted(names - OURS - stdlib - allowed - {"__future__"})
    ]
    assert not wrong, "imports outside the installed extra:\n" + "\n".join(wrong)


def test_the_rule_catches_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from xapp.domain import Cpe\n    import e2sim.world\n")
    assert {m.split(".")[0] for m in imported_modules(module)} == {"xapp", "e2sim"}
