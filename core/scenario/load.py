"""Reading scenario files: YAML to a checked ``Scenario``, or one clear ``ScenarioError`` line."""

from __future__ import annotations

import types
import typing
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from core.domain import (
    AccessCatalogue,
    AccessIdentity,
    AccessTechnology,
    Cpe,
    SteeringRule,
    SteeringThresholds,
)
from core.scenario.measured import resolve_measured
from core.scenario.model import Scenario, ScenarioCpe
from core.scenario.schema import ScenarioSpec


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message is one line naming file, key and expectation."""

    exit_code = 2  # the command line's: a mistake in what it was given


class MeasurementMissingError(ScenarioError):
    """A scenario driven by a measurement file that is not on this machine."""

    exit_code = 1  # nothing wrong with the command: this machine lacks a dataset


def shipped_scenarios() -> dict[str, Path]:
    """The scenarios that come with the package, by name (file name without ``.yaml``)."""
    folder = resources.files("core.scenario") / "shipped"
    return {
        Path(entry.name).stem: Path(str(entry))
        for entry in folder.iterdir()
        if entry.name.endswith(".yaml")
    }


def resolve_scenario_path(name_or_path: str) -> Path:
    """A file path as given, or the path of a shipped scenario of that name."""
    path = Path(name_or_path)
    if path.exists():
        return path
    shipped = shipped_scenarios()
    if name_or_path in shipped:
        return shipped[name_or_path]
    raise ScenarioError(
        f"{name_or_path}: no such file, and no shipped scenario of that name "
        f"(shipped: {', '.join(sorted(shipped))})"
    )


# A scenario is a page of YAML; these bound what a file can make the loader do.
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_YAML_VALUES = 1_000_000  # after expanding aliases (a "billion laughs" file expands to 10^9)


def load_scenario(name_or_path: str) -> Scenario:
    path = resolve_scenario_path(name_or_path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ScenarioError(f"{path}: {size} bytes; a scenario has at most {MAX_FILE_BYTES}")
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ScenarioError(f"{path}: cannot read: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {error.start})") from None
    try:
        _check_size(yaml.compose(text, Loader=yaml.SafeLoader), path)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" line {where.line + 1}" if where is not None else ""
        raise ScenarioError(f"{path}:{line} is not valid YAML: {_short(error)}") from error
    except RecursionError:
        raise ScenarioError(f"{path}: nested too deeply to be a scenario") from None
    return parse_scenario(data, source=str(path), base=path.parent)


def _check_size(root: yaml.Node | None, path: Path) -> None:
    """Count the values the document stands for, aliases expanded, without expanding them."""
    counted: dict[int, int] = {}

    def values(node: yaml.Node) -> int:
        known = counted.get(id(node))
        if known is not None:
            return known
        counted[id(node)] = 1  # a node that contains itself counts once
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(values(item) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(values(key) + values(item) for key, item in node.value)
        counted[id(node)] = min(total, MAX_YAML_VALUES + 1)
        return counted[id(node)]

    if root is not None and values(root) > MAX_YAML_VALUES:
        raise ScenarioError(
            f"{path}: stands for more than {MAX_YAML_VALUES} values once its aliases are "
            "expanded; a scenario is far smaller"
        )


def _short(error: object, limit: int = 300) -> str:
    text = str(error)
    return text if len(text) <= limit else text[:limit] + "…"


def parse_scenario(data: Any, source: str = "<scenario>", base: Path | None = None) -> Scenario:
    """``base``: where the scenario's measurement files are looked up first."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a mapping at the top level")
    data = resolve_measured(
        data,
        base,
        lambda message: ScenarioError(f"{source}: {message}"),
        missing=lambda message: MeasurementMissingError(f"{source}: {message}"),
    )
    try:
        spec = ScenarioSpec.model_validate(data)
    except ValidationError as error:
        raise ScenarioError(f"{source}: {_describe(error)}") from None
    return _build(spec, source)


def _build(spec: ScenarioSpec, source: str) -> Scenario:
    catalogue = AccessCatalogue().extended(
        AccessTechnology(t.name, t.label) for t in spec.access_technologies
    )
    expanded: list[ScenarioCpe] = []
    seen: set[str] = set()
    for i, template in enumerate(spec.cpes):
        for access in template.accesses:
            if access not in catalogue.names:
                raise ScenarioError(
                    f"{source}: cpes[{i}].accesses.{access}: unknown access {access!r}; expected "
                    f"one of {', '.join(catalogue.names)} (add more under access_technologies)"
                )
        rule = SteeringRule(
            mode=template.steering.mode,
            preferred=tuple(template.steering.preferred),
            thresholds=SteeringThresholds(
                rtt_ms=template.steering.thresholds.rtt_ms,
                loss_rate_permille=template.steering.thresholds.loss_rate_permille,
            ),
        )
        rng = np.random.default_rng([spec.seed, i])
        for index in range(template.count):
            try:
                cpe_id = template.id.format(index=index)
            except (KeyError, IndexError, ValueError) as error:
                raise ScenarioError(
                    f"{source}: cpes[{i}].id: {template.id!r} is not a valid pattern ({error}); "
                    "expected text with an optional '{index}' or '{index:04d}'"
                ) from None
            if cpe_id in seen:
                raise ScenarioError(f"{source}: cpes[{i}].id: CPE id {cpe_id!r} is used twice")
            seen.add(cpe_id)
            scales = {
                access: float(rng.uniform(*path.scale))
                if path.scale[0] < path.scale[1]
                else path.scale[0]
                for access, path in template.accesses.items()
            }
            expanded.append(
                ScenarioCpe(
                    cpe=Cpe(cpe_id, {a: AccessIdentity(access=a) for a in template.accesses}),
                    paths=dict(template.accesses),
                    capacity_scale=scales,
                    rule=rule,
                )
            )
    return Scenario(
        name=spec.name,
        description=spec.description.strip(),
        duration_s=spec.duration_s,
        seed=spec.seed,
        catalogue=catalogue,
        cpes=tuple(expanded),
        source=source,
        node_measurements={
            access: frozenset(node.measurements) for access, node in spec.nodes.items()
        },
    )


def _describe(error: ValidationError) -> str:
    """The first validation error as 'key: what was expected, got what' (one line)."""
    details = error.errors()
    first = details[0]
    more = f" (and {len(details) - 1} more problems)" if len(details) > 1 else ""
    return f"{_key(first)}: {_expectation(first)}{more}"


def _key(detail: ErrorDetails) -> str:
    parts: list[str] = []
    for item in detail["loc"]:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in {"value", "points"} and parts and detail["type"] != "extra_forbidden":
            continue  # written by the user as a shorthand: name the series, not its inner form
        else:
            parts.append(("." if parts else "") + item)
    return "".join(parts) or "top level"


def _expectation(detail: ErrorDetails) -> str:
    kind = detail["type"]
    ctx = detail.get("ctx", {})
    got = detail.get("input")
    if kind == "extra_forbidden":
        allowed = _allowed_keys(detail["loc"][:-1])
        return f"unknown key; expected one of: {', '.join(allowed)}"
    if kind == "missing":
        return "required key is missing"
    if kind in {"greater_than_equal", "greater_than", "less_than_equal", "less_than"}:
        op = {
            "greater_than_equal": "≥",
            "greater_than": ">",
            "less_than_equal": "≤",
            "less_than": "<",
        }[kind]
        bound = next(iter(ctx.values()))
        return f"expected a value {op} {bound}, got {_short(repr(got), 80)}"
    if kind == "value_error":
        return _short(str(ctx.get("error", detail["msg"])))
    return f"{detail['msg'].rstrip('.').lower()}, got {_short(repr(got), 80)}"


def _allowed_keys(loc: tuple[int | str, ...]) -> list[str]:
    model: Any = ScenarioSpec
    for item in loc:
        model = _step_into(model, item)
        if model is None:
            return []
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _step_into(annotation: Any, item: int | str) -> Any:
    """The type one step below ``annotation`` along a validation error's location."""
    for candidate in _union_members(annotation):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            if isinstance(item, str) and item in candidate.model_fields:
                return candidate.model_fields[item].annotation
            continue
        origin = typing.get_origin(candidate)
        args = typing.get_args(candidate)
        if origin is list and isinstance(item, int):
            return args[0]
        if origin is dict and isinstance(item, str):
            return args[1]
    return None


def _union_members(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) in {typing.Union, types.UnionType}:
        return typing.get_args(annotation)
    return (annotation,)
