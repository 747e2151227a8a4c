"""E2 configuration: which E2 node serves which access, what to measure and how often."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.e2_naming import DEFAULT_STYLE, NamingStyle
from kpm.catalogue import load_catalogue
from kpm.versions import KpmVersion

DEFAULT_SUBMGR_URL = "http://service-ricplt-submgr-http.ricplt:8088/ric/v1"


class E2NodeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    node: str = Field(min_length=1, description="E2 node name (the RIC's MEID)")
    access: str = Field(description="access this node serves: nr, wifi or lifi")
    ran_function_id: int = Field(default=2, ge=0, le=4095)
    kpm_version: KpmVersion | None = Field(
        default=None, description="None: learn it from the RAN function OID at E2 setup"
    )
    measurements: tuple[str, ...] = Field(min_length=1)
    report_period_ms: int = Field(default=1000, ge=1, le=3_600_000)
    granularity_ms: int | None = Field(default=None, ge=1, le=3_600_000)
    report: Literal["per-ue", "cell"] = "per-ue"

    @model_validator(mode="after")
    def _known_measurements(self) -> E2NodeConfig:
        catalogue = load_catalogue()
        for name in self.measurements:
            entry = catalogue.get(name)
            if entry is None:
                raise ValueError(f"node {self.node}: measurement {name!r} is not in the catalogue")
            if entry.access != self.access:
                raise ValueError(
                    f"node {self.node}: {name} is a {entry.access} measurement, not {self.access}"
                )
        return self

    @property
    def granularity(self) -> int:
        return self.granularity_ms or self.report_period_ms


class E2Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: tuple[E2NodeConfig, ...]
    submgr_url: str = DEFAULT_SUBMGR_URL
    client_host: str = Field(default="service-ricxapp-atsss-http.ricxapp", min_length=1)
    http_port: int = Field(default=8080, ge=1, le=65535)
    rmr_port: int = Field(default=4560, ge=1, le=65535)
    node_naming: NamingStyle = DEFAULT_STYLE

    def node(self, name: str) -> E2NodeConfig | None:
        for node in self.nodes:
            if node.node == name:
                return node
        return None
