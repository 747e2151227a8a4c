"""The agent's configuration file (YAML): which interface and addresses belong to which access."""

from __future__ import annotations

from ipaddress import IPv4Address
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.domain import Direction


class AgentConfigError(ValueError):
    """A configuration file that cannot be used; the message names the file and the key."""


class AccessConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    interface: str = Field(min_length=1, max_length=15)
    address: IPv4Address  # this host's address on the access
    peer_address: IPv4Address | None = None  # the other end's address (probes, telemetry)


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["cpe", "proxy"]
    accesses: dict[str, AccessConfig] = Field(min_length=1)
    # proxy only: the CPEs it serves, access → that CPE's address (downlink rules match them)
    cpes: dict[str, dict[str, IPv4Address]] = Field(default_factory=dict)
    cpe_id: str = "cpe-1"  # cpe only: the id the xApp knows this CPE by
    listen: str = "127.0.0.1:8700"
    token_file: Path | None = None
    tls_certificate: Path | None = None  # PEM; with tls_key, the API is served over HTTPS
    tls_key: Path | None = None
    state_file: Path = Path("/var/lib/atsss-agent/state.json")
    backend: Literal["auto", "wrr", "mainline", "dry-run"] = "auto"
    procfs_root: Path = Path("/proc")
    sysfs_root: Path = Path("/sys")  # module parameters (the WRR kernel's cwnd_limited)
    probe_server: IPv4Address | None = None  # the proxy's iperf3 server
    # Dry-run only: answer probes from the simulator's ground truth (`e2sim run --truth`), in
    # place of iperf3 over paths that a dry-run host does not have (the live benches).
    probe_truth: Path | None = None
    # Rules (CPE × access) this agent writes at most: a CPE needs its accesses' few; a proxy
    # three per CPE it serves (30,000 for 10,000 CPEs).
    max_rules: int = Field(default=64, ge=1, le=100_000)
    xapp_url: str | None = None
    # When an access's carrier comes back: give it the xApp's weight again at once (restore),
    # or keep it on standby until the xApp's next set (wait).
    carrier_return: Literal["restore", "wait"] = "restore"
    watch_carrier: bool = True  # react to carrier loss on the access interfaces

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ValueError(f"expected HOST:PORT with a port in 1..65535, got {value!r}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> AgentConfig:
        if (self.tls_certificate is None) != (self.tls_key is None):
            raise ValueError("tls_certificate and tls_key go together")
        if self.probe_truth is not None and self.backend != "dry-run":
            raise ValueError("probe_truth answers probes on the dry-run backend only")
        if self.role == "cpe" and self.cpes:
            raise ValueError("cpes: only a proxy lists the CPEs it serves")
        for cpe_id, addresses in self.cpes.items():
            unknown = sorted(set(addresses) - set(self.accesses))
            if unknown:
                raise ValueError(f"cpes.{cpe_id}: unknown access {', '.join(unknown)}")
        return self

    @property
    def direction(self) -> Direction:
        """The CPE's kernel sends uplink; the proxy's sends downlink."""
        return Direction.UPLINK if self.role == "cpe" else Direction.DOWNLINK

    def cpe_addresses(self, cpe_id: str) -> dict[str, IPv4Address]:
        if self.role == "cpe":
            if cpe_id != self.cpe_id:
                raise KeyError(f"this agent is CPE {self.cpe_id!r}, not {cpe_id!r}")
            return {name: access.address for name, access in self.accesses.items()}
        if cpe_id not in self.cpes:
            raise KeyError(f"this proxy does not serve CPE {cpe_id!r}")
        return dict(self.cpes[cpe_id])


def load_config(path: Path) -> AgentConfig:
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as error:
        raise AgentConfigError(f"{path}: {error.strerror}") from error
    except yaml.YAMLError as error:
        raise AgentConfigError(f"{path}: not YAML: {error}") from error
    try:
        return AgentConfig.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise AgentConfigError(f"{path}: {where}: {first['msg']}") from error
