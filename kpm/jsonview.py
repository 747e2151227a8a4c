"""JSON views of E2AP messages (dataclasses) and back, for the command line and logs."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from kpm import e2ap

MESSAGE_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        e2ap.E2SetupRequest,
        e2ap.E2SetupResponse,
        e2ap.SubscriptionRequest,
        e2ap.SubscriptionResponse,
        e2ap.SubscriptionFailure,
        e2ap.SubscriptionDeleteRequest,
        e2ap.SubscriptionDeleteResponse,
        e2ap.Indication,
    )
}


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_jsonable(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.compare
        }
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, tuple | list):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def message_to_json(message: e2ap.E2apMessage) -> dict[str, Any]:
    return {"type": type(message).__name__, "fields": to_jsonable(message)}


def message_from_json(raw: Any) -> e2ap.E2apMessage:
    if not isinstance(raw, dict) or "type" not in raw or "fields" not in raw:
        raise ValueError('an E2AP message in JSON is {"type": "<message>", "fields": {...}}')
    cls = MESSAGE_TYPES.get(raw["type"])
    if cls is None:
        raise ValueError(
            f"unknown E2AP message type {raw['type']!r}; known: {', '.join(MESSAGE_TYPES)}"
        )
    built: e2ap.E2apMessage = _build(cls, raw["fields"], raw["type"])
    return built


def _build(cls: type[Any], raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an object")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if not f.compare:
            continue
        if f.name not in raw:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{where}: missing field {f.name!r}")
            continue
        kwargs[f.name] = _convert(hints[f.name], raw[f.name], f"{where}.{f.name}")
    return cls(**kwargs)


def _convert(hint: Any, raw: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return None if raw is None else _convert(options[0], raw, where)
    if hint is bytes:
        try:
            return bytes.fromhex(raw)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: expected hex bytes") from error
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(raw, list):
            raise ValueError(f"{where}: expected a list")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], item, f"{where}[{i}]") for i, item in enumerate(raw))
        return tuple(
            _convert(a, item, f"{where}[{i}]")
            for i, (a, item) in enumerate(zip(args, raw, strict=True))
        )
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _build(hint, raw, where)
    if hint in (int, str) and not isinstance(raw, hint):
        raise ValueError(f"{where}: expected {hint.__name__}")
    return raw
