"""`atsss ctl …`: the operator API from the command line, a thin client printing tables or JSON.

Where the xApp is: ``--url`` or ATSSS_URL (default http://127.0.0.1:8080); the bearer token:
``--token-file`` or ATSSS_TOKEN_FILE.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.table import Table

from core.console import fail, out

ctl_app = typer.Typer(
    help="Talk to a running xApp's operator API: state, CPEs, overrides, audit.",
    no_args_is_help=True,
)
override_app = typer.Typer(help="List, set and delete overrides.", no_args_is_help=True)
ctl_app.add_typer(override_app, name="override")

Url = Annotated[str | None, typer.Option(help="The xApp's HTTP address (ATSSS_URL).")]
TokenFile = Annotated[
    Path | None, typer.Option(help="File holding the bearer token (ATSSS_TOKEN_FILE).")
]
Json = Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")]


def _call(
    method: str,
    path: str,
    url: str | None,
    token_file: Path | None,
    **kwargs: Any,
) -> Any:
    base = url or os.environ.get("ATSSS_URL", "http://127.0.0.1:8080")
    token_path = token_file or (
        Path(os.environ["ATSSS_TOKEN_FILE"]) if os.environ.get("ATSSS_TOKEN_FILE") else None
    )
    headers = {}
    if token_path is not None:
        try:
            headers["Authorization"] = f"Bearer {token_path.read_text().strip()}"
        except OSError as error:
            fail(f"--token-file {token_path}: {error.strerror}")
    try:
        response = httpx.request(
            method, base.rstrip("/") + path, headers=headers, timeout=10, **kwargs
        )
    except httpx.HTTPError as error:
        fail(f"cannot reach the xApp at {base}: {error}")
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        fail(f"{response.status_code}: {detail}")
    return response.json()


def _weights(found: dict[str, int] | None) -> str:
    return "-" if not found else " ".join(f"{a}={w}" for a, w in found.items())


@ctl_app.command("state")
def state(
    url: Url = None,
    token_file: TokenFile = None,
    as_json: Json = False,
    offset: Annotated[int, typer.Option(min=0)] = 0,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 50,
) -> None:
    """The CPEs with their weights in force and how many overrides each has."""
    page = _call("GET", "/v1/cpes", url, token_file, params={"offset": offset, "limit": limit})
    if as_json:
        typer.echo(json.dumps(page, indent=2))
        return
    table = Table("CPE", "accesses", "downlink", "uplink", "overrides")
    for item in page["items"]:
        table.add_row(
            item["cpe_id"],
            ", ".join(item["accesses"]),
            _weights(item["weights"].get("downlink")),
            _weights(item["weights"].get("uplink")),
            str(item["overrides"]),
        )
    table.caption = f"{len(page['items'])} of {page['total']} CPEs from {offset}"
    out.print(table)


@ctl_app.command("fleet")
def fleet(
    url: Url = None,
    token_file: TokenFile = None,
    as_json: Json = False,
    problem: Annotated[
        str | None,
        typer.Option(
            help="Only the CPEs with this problem (e.g. agent-failing, reports-stale), "
            "or 'steered', or 'overridden'."
        ),
    ] = None,
    search: Annotated[str | None, typer.Option(help="Part of the CPE id.")] = None,
    sort: Annotated[
        str, typer.Option(help="attention (what needs it first), cpe_id or weights_age.")
    ] = "attention",
    offset: Annotated[int, typer.Option(min=0)] = 0,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 50,
    snapshot: Annotated[
        int | None,
        typer.Option(min=1, help="Continue the rows of an earlier page (its caption names it)."),
    ] = None,
) -> None:
    """Every CPE: steered or not and why, its weights and their age, overrides; the CPEs that
    need attention first, with the whole fleet's counts."""
    params: dict[str, Any] = {"offset": offset, "limit": limit, "sort": sort}
    if snapshot is not None:
        params["snapshot"] = snapshot
    if problem:
        params["problem"] = problem
    if search:
        params["search"] = search
    page = _call("GET", "/v1/fleet", url, token_file, params=params)
    if as_json:
        typer.echo(json.dumps(page, indent=2))
        return
    table = Table("CPE", "state", "reports s", "nodes", "agents up/down", "uplink", "downlink")
    for row in page["items"]:
        ages = [a for a in row["reports_age_s"].values() if a is not None]
        directions = row["directions"]
        table.add_row(
            row["cpe_id"],
            "steered" if row["steered"] else ", ".join(row["problems"]),
            f"{max(ages):g}" if ages else "never",
            f"{row['nodes']['active']}/{row['nodes']['total']}",
            " / ".join(
                directions[d]["agent"]["state"] if d in directions else "-"
                for d in ("uplink", "downlink")
            ),
            _weights(directions.get("uplink", {}).get("weights")),
            _weights(directions.get("downlink", {}).get("weights")),
        )
    counts = page["summary"]
    problems = ", ".join(f"{p} {counts[p]}" for p in page["problems"] if counts.get(p))
    table.caption = (
        f"{len(page['items'])} of {page['total']} from {offset}; fleet: {counts['cpes']} CPEs,"
        f" {counts['steered']} steered"
        + (f"; {problems}" if problems else "")
        # the next page: --offset … --snapshot N reads the same rows
        + f" (snapshot {page['snapshot']})"
    )
    out.print(table)


@ctl_app.command("cpe")
def cpe(
    cpe_id: Annotated[str, typer.Argument(help="The CPE's id.")],
    url: Url = None,
    token_file: TokenFile = None,
    as_json: Json = False,
) -> None:
    """What the xApp believes and does for one CPE: estimates, weights, last push, overrides."""
    found = _call("GET", f"/v1/cpes/{cpe_id}", url, token_file)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    for direction, view in found["directions"].items():
        table = Table("access", "estimate Mbit/s", "10–90 % Mbit/s", "source", "age s", "weight")
        weights = view["weights_in_force"] or {}
        for access, estimate in view["estimates"].items():
            if estimate is None:
                table.add_row(access, "-", "-", "-", "-", str(weights.get(access, "-")))
                continue
            bound = " (lower bound)" if estimate["lower_bound"] else ""
            table.add_row(
                access,
                f"{estimate['capacity_mbps']:.1f}{bound}",
                f"{estimate['p10_mbps']:.1f}–{estimate['p90_mbps']:.1f}",
                estimate["source"],
                f"{estimate['age_s']:.1f}",
                str(weights.get(access, "-")),
            )
        push = view["last_push"] or {}
        table.title = (
            f"{cpe_id} {direction}: {view['steering']['mode']}, estimator {view['estimator_mode']}"
            + (", frozen" if view["frozen"] else "")
        )
        table.caption = f"last push: {push.get('result', 'none')} {push.get('reason', '')}".strip()
        out.print(table)
    for override in found["overrides"]:
        out.print(_override_line(override))


def _override_line(override: dict[str, Any]) -> str:
    detail = {
        "weights": _weights(override["weights"]),
        "exclude": ", ".join(override["excluded"]),
        "steering": (override["steering"] or {}).get("mode", ""),
        "estimator": override["estimator"] or "",
        "freeze": "",
    }[override["kind"]]
    expiry = (
        "" if override["expires_at_s"] is None else f", expires at {override['expires_at_s']:.0f}"
    )
    directions = "/".join(override["directions"])
    return (
        f"{override['id']}  {override['cpe_id']}  {override['kind']} {detail}  "
        f"[{directions}] by {override['set_by']}: {override['reason']}{expiry}"
    )


@override_app.command("list")
def override_list(
    cpe_id: Annotated[str | None, typer.Option("--cpe", help="Only this CPE's.")] = None,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: Json = False,
) -> None:
    """The overrides in force."""
    params = {} if cpe_id is None else {"cpe_id": cpe_id}
    found = _call("GET", "/v1/overrides", url, token_file, params=params)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    for override in found:
        out.print(_override_line(override), highlight=False)
    if not found:
        out.print("no overrides")


@override_app.command("set")
def override_set(
    cpe_id: Annotated[str, typer.Argument(help="The CPE's id.")],
    kind: Annotated[str, typer.Option(help="weights, exclude, steering, estimator or freeze.")],
    reason: Annotated[str, typer.Option(help="Why (kept in the audit log).")],
    direction: Annotated[
        list[str] | None, typer.Option(help="downlink and/or uplink (default both).")
    ] = None,
    weights: Annotated[str | None, typer.Option(help="weights: nr=30,wifi=100,lifi=1")] = None,
    exclude: Annotated[str | None, typer.Option(help="exclude: accesses, e.g. lifi")] = None,
    mode: Annotated[str | None, typer.Option(help="steering: a TS 24.193 mode")] = None,
    preferred: Annotated[str | None, typer.Option(help="steering: access order")] = None,
    estimator: Annotated[str | None, typer.Option(help="estimator: fused, kpi-only, …")] = None,
    expires_in: Annotated[float | None, typer.Option(help="Seconds until it expires.")] = None,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: Json = False,
) -> None:
    """Set an override; it takes effect at the xApp's next decision."""
    body: dict[str, Any] = {"kind": kind, "reason": reason}
    if direction:
        body["directions"] = direction
    if weights is not None:
        try:
            body["weights"] = {
                a.strip(): int(w)
                for a, _, w in (item.partition("=") for item in weights.split(","))
            }
        except ValueError:
            fail(f"--weights is access=integer,…, got {weights!r}")
    if exclude is not None:
        body["excluded"] = [a.strip() for a in exclude.split(",") if a.strip()]
    if mode is not None:
        body["steering"] = {"mode": mode}
        if preferred:
            body["steering"]["preferred"] = [a.strip() for a in preferred.split(",")]
    if estimator is not None:
        body["estimator"] = estimator
    if expires_in is not None:
        body["expires_in_s"] = expires_in
    made = _call("POST", f"/v1/cpes/{cpe_id}/overrides", url, token_file, json=body)
    typer.echo(json.dumps(made, indent=2) if as_json else f"set {made['id']}")


@override_app.command("delete")
def override_delete(
    override_id: Annotated[str, typer.Argument(help="The override's id.")],
    reason: Annotated[str, typer.Option(help="Why (kept in the audit log).")],
    url: Url = None,
    token_file: TokenFile = None,
) -> None:
    """Delete an override; its effect ends at the next decision."""
    _call("DELETE", f"/v1/overrides/{override_id}", url, token_file, params={"reason": reason})
    typer.echo(f"deleted {override_id}")


@ctl_app.command("audit")
def audit(
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 20,
    cpe_id: Annotated[str | None, typer.Option("--cpe", help="Only this CPE's.")] = None,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: Json = False,
) -> None:
    """Every change: who, when, what and why; newest first."""
    params: dict[str, Any] = {"limit": limit}
    if cpe_id is not None:
        params["cpe_id"] = cpe_id
    entries = _call("GET", "/v1/audit", url, token_file, params=params)
    if as_json:
        typer.echo(json.dumps(entries, indent=2))
        return
    import datetime

    table = Table("when (UTC)", "who", "action", "what", "CPE", "why")
    for entry in entries:
        when = datetime.datetime.fromtimestamp(entry["at_s"], datetime.UTC)
        table.add_row(
            when.strftime("%Y-%m-%d %H:%M:%S"),
            entry["who"],
            entry["action"],
            entry["what"],
            entry.get("cpe_id") or "",
            entry["why"],
        )
    out.print(table)
