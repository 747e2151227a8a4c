"""The deployment configuration: which E2 nodes, which CPEs, which agents, how to control them.

It is the ``controls`` section of the xApp descriptor (``xapp-descriptor.json``), so the RIC's
``CONFIG_FILE`` / ``XAPP_DESCRIPTOR_PATH`` works as it is; a file holding only the section works
too. The simulator writes one for a scenario (``atsss e2sim config``) and runs from it, so both
sides read the same file. Its JSON schema is ``xapp/config.schema.json``.

Checks here are the ones that need no codec: shape, names, URLs, MACs, that every CPE is known
to some node and no two CPEs claim one identity. The xApp adds the KPI catalogue's checks.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.domain import AccessIdentity, Cpe, Direction
from core.e2_naming import DEFAULT_STYLE, NamingStyle

ACCESS_NAME = r"^[a-z][a-z0-9-]{0,31}$"
MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
KPM_VERSIONS = ("auto", "v2.03", "v3.00")
ESTIMATOR_MODES = ("fused", "kpi-only", "model-only", "probe-only")
DEFAULT_SUBMGR_URL = "http://service-ricplt-submgr-http.ricplt:8088/ric/v1"
DEFAULT_APPMGR_URL = "http://service-ricplt-appmgr-http.ricplt:8080/ric/v1"


class DeploymentError(ValueError):
    """A configuration that cannot be used; the message is one line naming file and key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _url(value: str) -> str:
    if not re.match(r"^https?://[^\s/:]+(:\d{1,5})?(/\S*)?$", value):
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    return value.rstrip("/")


class E2Node(_Strict):
    """An E2 node as the RIC knows it, and what to subscribe to on it."""

    name: str = Field(min_length=1, description="the node's name in the RIC (its MEID)")
    access: str = Field(pattern=ACCESS_NAME, description="the access it serves: nr, wifi, lifi")
    ran_function_id: int = Field(default=2, ge=0, le=4095)
    kpm_version: Literal["auto", "v2.03", "v3.00", "flexric-v2.03", "flexric-v3.00"] = Field(
        default="auto",
        description="E2SM-KPM layout; auto: learn it from the E2 setup and the node's answers "
        "(v2.00 and v2.01 nodes can be decoded with `atsss kpm decode`, not subscribed to)",
    )
    report: Literal["per-ue", "cell"] = "per-ue"
    measurements: tuple[str, ...] = Field(min_length=1)
    report_period_ms: int = Field(default=1000, ge=10, le=3_600_000)


class AccessIdentityConfig(_Strict):
    """How the node of one access knows a CPE: its UE ID, its station MAC, its address."""

    node: str | None = Field(
        default=None, description="E2 node name; default: the only node of this access"
    )
    ue_id: str | None = Field(
        default=None, min_length=1, description="RAN UE ID as reported, e.g. gnb-du:1"
    )
    station_mac: str | None = Field(default=None, description="Wi-Fi or LiFi station MAC")
    address: str | None = Field(default=None, description="the CPE's IP address on this access")

    @field_validator("station_mac")
    @classmethod
    def _mac(cls, value: str | None) -> str | None:
        if value is not None and not MAC.match(value.lower()):
            raise ValueError(f"expected a MAC address like 02:00:00:00:00:01, got {value!r}")
        return None if value is None else value.lower()

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None:
            ipaddress.ip_address(value)
        return value

    @model_validator(mode="after")
    def _some_identity(self) -> AccessIdentityConfig:
        if self.ue_id is None and self.station_mac is None:
            raise ValueError("give ue_id or station_mac: how the node reports this CPE")
        return self


class AgentConfig(_Strict):
    """An agent's REST API (a CPE's, or the MPTCP proxy's)."""

    url: Annotated[str, Field(description="http:// or https:// base URL")]
    token_file: Path | None = Field(
        default=None, description="file holding the bearer token; default: agents.token_file"
    )
    ca_file: Path | None = Field(default=None, description="CA bundle to verify its TLS")
    secret: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$",
        description="the file in agents.secrets_folder holding its bearer token (what a CPE "
        "added through the operator API names instead of a path)",
    )

    _check_url = field_validator("url")(classmethod(lambda cls, value: _url(value)))


class CpeConfig(_Strict):
    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:-]+$")
    accesses: dict[str, AccessIdentityConfig] = Field(min_length=1)
    agent: AgentConfig | None = None


class AgentsConfig(_Strict):
    token_file: Path | None = Field(default=None, description="bearer token for every agent")
    secrets_folder: Path | None = Field(
        default=None,
        description="folder of per-agent token files that agents name by agent.secret",
    )
    run_time_urls: list[str] = Field(
        default_factory=list,
        description="where agents of CPEs added through the operator API may be: networks "
        "(10.20.0.0/16) or host names with * wildcards (*.cpe.example.net); empty: such CPEs "
        "name no agent",
    )
    proxy: AgentConfig | None = Field(default=None, description="the MPTCP proxy's agent")
    downlink_via_cpe: bool = Field(
        default=False,
        description="send downlink weights to the CPE's agent (mainline MPTCP, MP_PRIO)",
    )
    wait_s: float = Field(
        default=30.0,
        ge=0,
        description="unused since agents are asked in the background (each CPE is steered "
        "once its agent answers); accepted so that older files load",
    )


class E2Config(_Strict):
    submgr_url: str = DEFAULT_SUBMGR_URL
    appmgr_url: str = DEFAULT_APPMGR_URL
    client_host: str = Field(
        default="service-ricxapp-atsss-http.ricxapp",
        min_length=1,
        description="where the submgr sends subscription notifications",
    )
    http_port: int = Field(default=8080, ge=1, le=65535)
    rmr_port: int = Field(default=4560, ge=1, le=65535)
    quiet_periods: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="a subscribed node that sends no indication for this many of its reporting "
        "periods is marked quiet and subscribed again (delete, then subscribe, with backoff)",
    )
    node_naming: NamingStyle = Field(
        default=DEFAULT_STYLE,
        description="how nodes' names are built from their E2 setup (standalone E2 "
        "termination): o-ran-sc as the O-RAN SC E2 termination (gnb_001_001_0000019b), or "
        "plmn-hex (gnb_00f110_0000019b)",
    )
    nodes: tuple[E2Node, ...] = Field(min_length=1)

    _check_urls = field_validator("submgr_url", "appmgr_url")(
        classmethod(lambda cls, value: _url(value))
    )


class OperatorApiConfig(_Strict):
    tokens_file: Path | None = Field(
        default=None,
        description="bearer tokens and roles (viewer, operator); without it every request is "
        "refused, unless anonymous_reads",
    )
    anonymous_reads: bool = Field(
        default=False,
        description="without a tokens file, let anyone who reaches the port read (never "
        "write); off by default: the audit log, the agents' URLs and the event streams are "
        "not for everyone",
    )
    audit_max_entries: int = Field(
        default=100_000,
        ge=100,
        le=10_000_000,
        description="the audit log keeps about this many of the newest entries",
    )
    audit_max_age_days: float = Field(
        default=90.0, gt=0, le=3650, description="and none older than this"
    )
    models_folder: Path | None = Field(
        default=None,
        description="where models the operator API may load live, one folder per model "
        "(`atsss train --out <models_folder>/<name>`); unset: only the shipped models",
    )


class PolicySettings(_Strict):
    max_weight: int = Field(default=100, ge=1, le=255)
    min_gain: float = Field(
        default=0.01, ge=0, le=1, description="predicted relative gain needed to push"
    )
    max_pushes_per_s: float | None = Field(
        default=2.0,  # xapp/policy/hysteresis.py: DEFAULT_MAX_PUSHES_PER_S, tested equal
        gt=0,
        le=1000,
        description="at most this many pushes a second per CPE and direction, on average, all "
        "pushes counted (first weights, overrides, paths lost or back always go, and the pushes "
        "for a gain after them wait until the budget has refilled; the gain a push needs rises "
        "as the budget is spent); null: no limit. A 1 s period never reaches the default of 2; "
        "at 100 ms reports on a real NR trace it halves the pushes for 0.0055 of efficiency "
        "(docs/estimators.md)",
    )
    outage_stall_s: float = Field(
        default=0.45,
        ge=0,
        le=60,
        description="how long a weighted path that goes dark stalls the WRR round before it is "
        "taken out (MPTCP's detection; less where the agents react to carrier loss): the "
        "policy weighs each path's learnt risk of going dark by it",
    )


class TrainingLabelSettings(_Strict):
    every_s: float = Field(
        default=600.0,
        ge=1,
        le=86_400,
        description="keep a path's saturated period (its throughput is its capacity) as a "
        "training label at most this often",
    )
    per_path: int = Field(
        default=5,
        ge=0,
        le=1000,
        description="saturated periods kept in SDL per path, the oldest replaced (about 5 kB "
        "each); 0 keeps none",
    )


# With mainline MPTCP the CPE's backup flags are the one lever for both directions (MP_PRIO
# carries them to the proxy): one set steers both, so only one direction can be controlled.
ONE_LEVER_FOR_BOTH = (
    "with downlink_via_cpe (mainline MPTCP), the CPE's backup flags steer both directions at "
    "once; control one of them (directions: [downlink] or [uplink])"
)


class ExplorationSettings(_Strict):
    """How a path known only from below (its node reports no resource KPIs) is given more share
    until it shows its capacity (docs/estimators.md, "Paths known only from below")."""

    enabled: bool = True
    step: float = Field(
        default=0.25, gt=0, le=4, description="the first raise asks for this much more than carried"
    )
    max_step: float = Field(
        default=1.0, gt=0, le=4, description="each raise kept up with doubles the step, up to this"
    )
    pause_s: float = Field(
        default=10.0, ge=0, le=3600, description="after a raise the path could not keep up with"
    )

    @model_validator(mode="after")
    def _steps(self) -> ExplorationSettings:
        if self.max_step < self.step:
            raise ValueError(f"max_step ({self.max_step}) must be ≥ step ({self.step})")
        return self


class Deployment(_Strict):
    """The whole configuration (the descriptor's ``controls``)."""

    e2: E2Config
    cpes: tuple[CpeConfig, ...] = Field(min_length=1)
    agents: AgentsConfig = AgentsConfig()
    directions: tuple[Direction, ...] = Field(
        default=(Direction.DOWNLINK, Direction.UPLINK), min_length=1
    )
    estimator: Literal["fused", "kpi-only", "model-only", "probe-only"] = "fused"
    policy: PolicySettings = PolicySettings()
    training_labels: TrainingLabelSettings = TrainingLabelSettings()
    exploration: ExplorationSettings = ExplorationSettings()
    operator_api: OperatorApiConfig = OperatorApiConfig()
    sdl_namespace: str = Field(default="atsss", min_length=1, max_length=64)

    @model_validator(mode="after")
    def _consistent(self) -> Deployment:
        if self.agents.downlink_via_cpe and len(set(self.directions)) > 1:
            raise ValueError(f"directions: {ONE_LEVER_FOR_BOTH}")
        names = [n.name for n in self.e2.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"e2.nodes: a node name appears twice ({_first_repeat(names)})")
        ids = [c.id for c in self.cpes]
        if len(set(ids)) != len(ids):
            raise ValueError(f"cpes: the id {_first_repeat(ids)!r} appears twice")
        owner: dict[tuple[str, str], str] = {}
        for index, cpe in enumerate(self.cpes):
            for access, identity in cpe.accesses.items():
                node = self.node_for(access, identity)
                where = f"cpes.{index}.accesses.{access}"
                if node is None:
                    raise ValueError(
                        f"{where}: no E2 node serves {access!r}"
                        if identity.node is None
                        else f"{where}.node: {identity.node!r} is not one of e2.nodes"
                    )
                if identity.node is None and sum(n.access == access for n in self.e2.nodes) > 1:
                    raise ValueError(f"{where}.node: several nodes serve {access!r}; name one")
                if node.access != access:
                    raise ValueError(
                        f"{where}.node: {node.name} serves {node.access}, not {access}"
                    )
                for key in _keys(identity):
                    other = owner.setdefault((node.name, key), cpe.id)
                    if other != cpe.id:
                        raise ValueError(
                            f"{where}: {key} on {node.name} is already the identity of {other}"
                        )
        return self

    def node_for(self, access: str, identity: AccessIdentityConfig) -> E2Node | None:
        for node in self.e2.nodes:
            if identity.node is not None and node.name == identity.node:
                return node
            if identity.node is None and node.access == access:
                return node
        return None

    def domain_cpes(self) -> list[Cpe]:
        """The CPEs as the control loop knows them."""
        cpes = []
        for cpe in self.cpes:
            accesses = {}
            for access, identity in cpe.accesses.items():
                node = self.node_for(access, identity)
                accesses[access] = AccessIdentity(
                    access,
                    e2_node_id=None if node is None else node.name,
                    ue_id=identity.ue_id,
                    station_mac=identity.station_mac,
                    local_ip=identity.address,
                )
            cpes.append(Cpe(cpe.id, accesses))
        return cpes


def _keys(identity: AccessIdentityConfig) -> list[str]:
    keys = [] if identity.ue_id is None else [f"ue_id {identity.ue_id}"]
    return keys + ([] if identity.station_mac is None else [f"MAC {identity.station_mac}"])


def _first_repeat(items: list[str]) -> str:
    seen: set[str] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return ""


def controls_of(document: Any) -> Any:
    """The ``controls`` section of a descriptor, or the document itself if it is only that."""
    if isinstance(document, dict) and "controls" in document and "e2" not in document:
        return document["controls"]
    return document


def parse_deployment(document: Any, source: str) -> Deployment:
    try:
        return Deployment.model_validate(controls_of(document))
    except ValidationError as error:
        raise DeploymentError(f"{source}: {_one_line(error)}") from None


def load_deployment(path: Path) -> Deployment:
    """Read a descriptor or a controls file (JSON or YAML); errors name the file and the key."""
    try:
        text = path.read_text()
    except OSError as error:
        raise DeploymentError(f"{path}: cannot read: {error.strerror}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise DeploymentError(f"{path}: not JSON or YAML{where}") from None
    return parse_deployment(document, str(path))


def dump_deployment(deployment: Deployment) -> str:
    return json.dumps(deployment.model_dump(mode="json", exclude_defaults=True), indent=2) + "\n"


def deployment_schema() -> dict[str, Any]:
    schema = Deployment.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    # An $id of its own keeps its "#/$defs/…" references resolvable when the onboarder puts it
    # in place of the descriptor schema's "controls".
    schema["$id"] = "https://atsss-xapp.example/schemas/controls.schema.json"
    schema["title"] = "ATSSS xApp controls"
    return schema


def _one_line(error: ValidationError) -> str:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"])
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    message = message.removeprefix("Value error, ")
    found = first.get("input")
    if first["type"] in ("literal_error", "enum") and found is not None:
        message += f", got {found!r}"
    return f"{location}: {message}" if location else message
