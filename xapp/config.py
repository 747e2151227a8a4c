"""The xApp's configuration: the deployment file (core.deployment) checked against what this xApp
can do (the KPI catalogue, the KPM codecs), found where the RIC puts it, and turned into the
settings of its parts.

Where the file is: ``--config``, else ``CONFIG_FILE``, else ``XAPP_DESCRIPTOR_PATH`` (a file, or
the folder the RIC mounts the descriptor in, holding ``config-file.json``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from core.deployment import Deployment, DeploymentError, deployment_schema, load_deployment
from kpm.catalogue import load_catalogue
from kpm.versions import parse_version
from xapp.e2.config import E2NodeConfig, E2Settings

SCHEMA_PATH = Path(__file__).with_name("config.schema.json")
DESCRIPTOR_FILE_NAME = "config-file.json"


def config_path(explicit: Path | None) -> Path:
    if explicit is not None:
        return explicit
    if os.environ.get("CONFIG_FILE"):
        return Path(os.environ["CONFIG_FILE"])
    descriptor = os.environ.get("XAPP_DESCRIPTOR_PATH")
    if descriptor:
        path = Path(descriptor)
        return path / DESCRIPTOR_FILE_NAME if path.is_dir() else path
    raise DeploymentError(
        "no configuration: give --config FILE, or set CONFIG_FILE or XAPP_DESCRIPTOR_PATH"
    )


def load_xapp_config(path: Path) -> Deployment:
    """The deployment in ``path``, with every measurement in the catalogue for its access."""
    deployment = load_deployment(path)
    catalogue = load_catalogue()
    for index, node in enumerate(deployment.e2.nodes):
        for position, name in enumerate(node.measurements):
            entry = catalogue.get(name)
            where = f"{path}: e2.nodes.{index}.measurements.{position}"
            if entry is None:
                raise DeploymentError(f"{where}: {name!r} is not in the KPI catalogue")
            if entry.access != node.access:
                raise DeploymentError(f"{where}: {name} is a {entry.access} measurement")
    return deployment


def e2_settings(deployment: Deployment) -> E2Settings:
    e2 = deployment.e2
    return E2Settings(
        nodes=tuple(
            E2NodeConfig(
                node=node.name,
                access=node.access,
                ran_function_id=node.ran_function_id,
                kpm_version=None if node.kpm_version == "auto" else parse_version(node.kpm_version),
                measurements=node.measurements,
                report_period_ms=node.report_period_ms,
                report=node.report,
            )
            for node in e2.nodes
        ),
        submgr_url=e2.submgr_url,
        client_host=e2.client_host,
        http_port=e2.http_port,
        rmr_port=e2.rmr_port,
        node_naming=e2.node_naming,
    )


def reporting_period_s(deployment: Deployment) -> float:
    """The control period: the shortest reporting period of the nodes."""
    return min(node.report_period_ms for node in deployment.e2.nodes) / 1000


def controls_schema() -> dict[str, Any]:
    return deployment_schema()


def controls_schema_text() -> str:
    return json.dumps(controls_schema(), indent=2, sort_keys=True) + "\n"
