"""The Helm chart: lints strictly, renders objects valid against the Kubernetes API schemas
(kubernetes-validate, offline), names its Services as the O-RAN SC onboarder does, and hands the
xApp a descriptor it accepts. Helm comes from `go install` (scripts/setup.sh)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from xapp.config import SCHEMA_PATH, load_xapp_config

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "atsss-xapp"
ONBOARDER_SCHEMA = ROOT.parent / "shared" / "reference" / "osc" / "xapp-descriptor.schema.json"
KUBERNETES = "1.30.0"
CUSTOM_KINDS = {"ServiceMonitor"}  # Prometheus Operator's CRD: no schema in kubernetes-validate


def helm() -> str:
    found = shutil.which("helm")
    if found:
        return found
    gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True).stdout.strip()
    candidate = Path(gopath or Path.home() / "go") / "bin" / "helm"
    assert candidate.exists(), "helm is missing: scripts/setup.sh installs it with go install"
    return str(candidate)


def render(*values: str, namespace: str = "ricxapp") -> list[dict[str, Any]]:
    argv = [helm(), "template", "atsss", str(CHART), "--namespace", namespace]
    for value in values:
        argv += ["--set", value]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def test_helm_lint_strict() -> None:
    done = subprocess.run(
        [helm(), "lint", "--strict", str(CHART)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


NON_DEFAULT = (
    "replicaCount=2",
    "serviceMonitor.enabled=true",
    "networkPolicy.enabled=true",
    "networkPolicy.httpFromNamespaces={monitoring}",
    "podDisruptionBudget.enabled=true",
    "secrets.existingSecret=my-secrets",
)


@pytest.mark.parametrize("values", [(), NON_DEFAULT], ids=["default", "non-default"])
def test_rendered_objects_are_valid_kubernetes(values: tuple[str, ...]) -> None:
    objects = render(*values)
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "Service", "ConfigMap"} <= kinds
    if values:
        assert {"ServiceMonitor", "NetworkPolicy", "PodDisruptionBudget"} <= kinds
        assert "Secret" not in kinds, "an existing secret is used, none made"
        assert by_kind(objects, "Deployment")[0]["spec"]["replicas"] == 2
    else:
        assert "Secret" in kinds
    for obj in objects:
        if obj["kind"] in CUSTOM_KINDS:
            assert obj["apiVersion"] == "monitoring.coreos.com/v1"
            continue
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)


def test_services_are_named_as_the_onboarder_names_them() -> None:
    for namespace, override, name in (
        ("ricxapp", "", "atsss-xapp"),
        ("xapps", "atsss", "atsss"),
    ):
        values = (f"nameOverride={override}",) if override else ()
        services = {
            s["metadata"]["name"]: s
            for s in by_kind(render(*values, namespace=namespace), "Service")
        }
        assert set(services) == {
            f"service-{namespace}-{name}-rmr",
            f"service-{namespace}-{name}-http",
        }
        rmr_ports = {
            p["name"]: p["port"]
            for p in services[f"service-{namespace}-{name}-rmr"]["spec"]["ports"]
        }
        assert rmr_ports == {"rmrdata": 4560, "rmrroute": 4561}


def test_the_deployment_is_locked_down_and_probed() -> None:
    deployment = by_kind(render(), "Deployment")[0]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["livenessProbe"]["httpGet"]["path"] == "/ric/v1/health/alive"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ric/v1/health/ready"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DBAAS_SERVICE_HOST"] == "service-ricplt-dbaas-tcp.ricplt"
    assert env["DBAAS_SERVICE_PORT"] == "6379"
    assert env["RMR_SRC_ID"] == "service-ricxapp-atsss-xapp-rmr.ricxapp"
    assert env["RMR_RTG_SVC"] == "service-ricplt-rtmgr-rmr.ricplt:4561"
    assert env["XAPP_DESCRIPTOR_PATH"] == "/opt/ric/config"
    assert container["args"] == ["xapp", "serve", "--e2", "ric"]


def test_a_changed_configuration_rolls_the_pods() -> None:
    def checksum(*values: str) -> str:
        annotations = by_kind(render(*values), "Deployment")[0]["spec"]["template"]["metadata"]
        return str(annotations["annotations"]["checksum/config"])

    assert checksum() == checksum()
    assert checksum() != checksum("controls.estimator=kpi-only")


def test_the_rendered_descriptor_is_valid_and_the_xapp_loads_it(tmp_path: Path) -> None:
    config_map = by_kind(render(), "ConfigMap")[0]
    descriptor = json.loads(config_map["data"]["config-file.json"])
    schema = copy.deepcopy(json.loads(ONBOARDER_SCHEMA.read_text()))
    schema["properties"]["controls"] = json.loads(SCHEMA_PATH.read_text())
    jsonschema.validate(descriptor, schema)
    path = tmp_path / "config-file.json"
    path.write_text(json.dumps(descriptor))
    deployment = load_xapp_config(path)
    assert deployment.e2.client_host == "service-ricxapp-atsss-xapp-http.ricxapp"
    assert str(deployment.agents.token_file) == "/etc/atsss/secrets/agent-token"
    assert os.path.basename(str(deployment.operator_api.tokens_file)) == "operator-tokens.yaml"


def _selects(service: dict[str, Any], pod_labels: dict[str, str]) -> bool:
    return all(pod_labels.get(k) == v for k, v in service["spec"]["selector"].items())


def test_the_submgr_s_notification_reaches_a_pod_that_is_not_ready() -> None:
    """The submgr posts its notification to ClientEndpoint.Host, which the chart sets to the
    http Service; a Service routes to not-ready pods only with publishNotReadyAddresses. The
    E2 termination's RMR traffic goes through the rmr Service, likewise."""
    objects = render()
    deployment = by_kind(objects, "Deployment")[0]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    config_map = by_kind(objects, "ConfigMap")[0]
    e2 = json.loads(config_map["data"]["config-file.json"])["controls"]["e2"]
    services = {s["metadata"]["name"]: s for s in by_kind(objects, "Service")}

    http = services[e2["client_host"].split(".")[0]]
    assert e2["client_host"].split(".")[1] == "ricxapp", "the Service's namespace"
    assert http["spec"].get("publishNotReadyAddresses") is True
    assert _selects(http, pod_labels)
    (port,) = [p for p in http["spec"]["ports"] if p["port"] == e2["http_port"]]
    assert container_ports[port["targetPort"]] == e2["http_port"]

    rmr = services["service-ricxapp-atsss-xapp-rmr"]
    assert rmr["spec"].get("publishNotReadyAddresses") is True
    assert _selects(rmr, pod_labels)
    # And readiness itself is the xApp's own (RMR, SDL, registration), not the subscriptions.
    assert container["readinessProbe"]["httpGet"]["path"] == "/ric/v1/health/ready"
