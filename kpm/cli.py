"""`atsss kpm …`: decode and encode E2SM-KPM and E2AP bytes, list the KPI catalogue."""

from __future__ import annotations

import json
import string
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from kpm import dialects, e2ap, jsonview
from kpm.catalogue import load_catalogue
from kpm.codec import KpmPdu, codec_for
from kpm.errors import CodecError
from kpm.reports import decode_header
from kpm.versions import DEFAULT_VERSION, KpmVersion, parse_version, service_model_name

kpm_app = typer.Typer(
    help="Decode and encode E2SM-KPM (v2.00–v3.00, FlexRIC's layouts) and E2AP bytes; list "
    "the KPI catalogue.",
    no_args_is_help=True,
)


class Layer(StrEnum):
    E2AP = "e2ap"
    HEADER = "header"
    MESSAGE = "message"
    ACTION = "action"
    TRIGGER = "trigger"
    RANFUNCTION = "ranfunction"


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _read_input(source: str) -> str | bytes:
    if source.startswith("@"):
        path = Path(source[1:])
        try:
            return path.read_bytes()
        except OSError as error:
            _fail(f"cannot read {path}: {error.strerror}")
    return source


def _bytes_from(source: str) -> bytes:
    raw = _read_input(source)
    text = raw.decode("ascii", errors="replace") if isinstance(raw, bytes) else raw
    cleaned = "".join(text.split()).removeprefix("0x")
    if cleaned and all(c in string.hexdigits for c in cleaned):
        if len(cleaned) % 2:
            _fail(f"odd number of hex digits ({len(cleaned)})")
        return bytes.fromhex(cleaned)
    if isinstance(raw, bytes):
        return raw  # a binary file
    _fail("input is neither hex digits nor @FILE")


def _version_option(text: str) -> KpmVersion | None:
    if text == "auto":
        return None
    try:
        return parse_version(text)
    except ValueError as error:
        _fail(str(error))


def _kpm_json(version: KpmVersion, pdu: KpmPdu, value: Any) -> Any:
    return json.loads(codec_for(version).to_json(pdu, value))


def _decode_kpm(layer: Layer, data: bytes, version: KpmVersion | None) -> dict[str, Any]:
    pdu = KpmPdu(layer.value)
    if pdu == KpmPdu.HEADER:
        detection = decode_header(data, version)
        found = detection.header.version
        value = codec_for(found).decode(pdu, data)
        return {
            "as": layer.value,
            "version": found.value,
            "note": detection.describe(),
            "collect_start_unix_s": detection.header.collect_start_unix_s,
            "value": _kpm_json(found, pdu, value),
        }
    reading = dialects.read(pdu, data, dialects.family(version) if version else dialects.PREFERENCE)
    if version is not None and reading.version != version:
        note = f"not valid as E2SM-KPM {version}; {reading.describe()}"
    else:
        note = reading.describe()
    return {
        "as": layer.value,
        "version": reading.version.value,
        "note": note,
        "value": _kpm_json(reading.version, pdu, reading.value),
    }


def _inner(layer: Layer, data: bytes, version: KpmVersion | None) -> dict[str, Any]:
    """An E2SM-KPM container inside an E2AP message; one that does not read is an error entry
    (the E2AP around it still shows)."""
    try:
        return _decode_kpm(layer, data, version)
    except CodecError as error:
        return {"as": layer.value, "error": {"cause": error.cause, "message": str(error)}}


def _has_errors(decoded: Any) -> bool:
    if isinstance(decoded, dict):
        return "error" in decoded or any(_has_errors(v) for v in decoded.values())
    if isinstance(decoded, list):
        return any(_has_errors(v) for v in decoded)
    return False


def _decode_e2ap(data: bytes, version: KpmVersion | None) -> dict[str, Any]:
    message = e2ap.decode(data)
    out: dict[str, Any] = {"as": "e2ap", **jsonview.message_to_json(message)}
    inner: dict[str, Any] = {}
    if isinstance(message, e2ap.Indication):
        inner["header"] = header = _inner(Layer.HEADER, message.header, version)
        found = parse_version(header["version"]) if "version" in header else version
        inner["message"] = _inner(Layer.MESSAGE, message.message, found)
    elif isinstance(message, e2ap.SubscriptionRequest):
        inner["trigger"] = _inner(Layer.TRIGGER, message.event_trigger, version)
        inner["actions"] = [_inner(Layer.ACTION, a.definition, version) for a in message.actions]
    elif isinstance(message, e2ap.E2SetupRequest):
        inner["node_name"] = message.node_name
        functions = []
        for function in message.ran_functions:
            entry: dict[str, Any] = {"ran_function_id": function.function_id, "oid": function.oid}
            service_model = service_model_name(function.oid)
            if service_model not in ("E2SM-KPM", None):
                entry["service_model"] = service_model
                functions.append(entry)
                continue
            detection = dialects.detect_from_setup(function.oid, function.definition)
            chosen = version or detection.chosen
            entry["kpm_version"] = chosen.value
            entry["kpm_layouts"] = [v.value for v in detection.candidates]
            entry["note"] = detection.note
            entry["description"] = _inner(Layer.RANFUNCTION, function.definition, chosen)
            functions.append(entry)
        inner["ran_functions"] = functions
    if inner:
        out["decoded"] = inner
    return out


@kpm_app.command("decode")
def decode(
    data: Annotated[str, typer.Argument(help="Hex digits, or @FILE (hex text or raw bytes).")],
    layer: Annotated[Layer, typer.Option("--as", help="What the bytes are.")] = Layer.E2AP,
    version: Annotated[
        str,
        typer.Option(
            help="auto, or a layout: v3.00, v2.03, flexric-v3.00, flexric-v2.03, v2.01, v2.00. "
            "auto names the layout the bytes read cleanly in, and any other that fits too."
        ),
    ] = "auto",
) -> None:
    """Decode bytes to JSON; with --version auto, say which E2SM-KPM layout was found.

    A PDU is shown only if it reads cleanly: every byte consumed and re-encoded to the same
    bytes. Anything else is an error that names the cause; no value is guessed. Exit status: 0
    decoded, 2 not decoded, 1 an E2AP message whose E2SM-KPM part did not decode (shown as an
    "error" entry in the JSON).
    """
    chosen = _version_option(version)
    payload = _bytes_from(data)
    try:
        result = (
            _decode_e2ap(payload, chosen)
            if layer == Layer.E2AP
            else _decode_kpm(layer, payload, chosen)
        )
    except CodecError as error:
        _fail(str(error))
    typer.echo(json.dumps(result, indent=2))
    if _has_errors(result.get("decoded")):
        typer.echo("error: the E2AP message decoded; an E2SM-KPM part in it did not", err=True)
        raise typer.Exit(1)


@kpm_app.command("encode")
def encode(
    data: Annotated[
        str, typer.Argument(help="JSON as `kpm decode` prints it (or its value), or @FILE.")
    ],
    layer: Annotated[Layer, typer.Option("--as", help="What to encode.")] = Layer.E2AP,
    version: Annotated[
        str, typer.Option(help="E2SM-KPM layout for the KPM layers (see `kpm decode`).")
    ] = "v3.00",
) -> None:
    """Encode JSON to hex bytes: the reverse of `atsss kpm decode`."""
    raw = _read_input(data)
    try:
        parsed = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        _fail(f"input is not JSON: {error}")
    chosen = _version_option(version) or DEFAULT_VERSION
    if isinstance(parsed, dict) and "as" in parsed:
        try:
            layer = Layer(parsed["as"])
            if "version" in parsed and layer != Layer.E2AP:
                chosen = parse_version(str(parsed["version"]))
        except ValueError as error:
            _fail(f"in the JSON: {error}")
    try:
        if layer == Layer.E2AP:
            encoded = e2ap.encode(jsonview.message_from_json(parsed))
        else:
            value = parsed["value"] if isinstance(parsed, dict) and "value" in parsed else parsed
            codec = codec_for(chosen)
            pdu = KpmPdu(layer.value)
            encoded = codec.encode(pdu, codec.from_json(pdu, json.dumps(value)))
    except (CodecError, ValueError, TypeError, KeyError, AttributeError) as error:
        _fail(str(error))
    typer.echo(encoded.hex())


@kpm_app.command("catalogue")
def catalogue(
    access: Annotated[str | None, typer.Option(help="Only this access: nr, wifi or lifi.")] = None,
) -> None:
    """List the measurements the xApp understands, with units and valid ranges."""
    table = Table(title="KPI catalogue")
    for column in ("measName", "access", "unit", "scope", "direction", "role", "range"):
        table.add_column(column)
    for m in load_catalogue().measurements:
        if access is None or m.access == access:
            table.add_row(
                m.name, m.access, m.unit, m.scope, m.direction, m.role, f"{m.min:g}..{m.max:g}"
            )
    Console(width=120).print(table)
