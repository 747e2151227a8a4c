"""docs/deploy.md says only what works: its values file renders with the chart into objects the
Kubernetes API accepts and a descriptor the xApp loads; its helm, kubectl and docker lines name
what the chart makes; its `atsss`, `curl` and secret lines run, against a running xApp configured
with the controls the chart renders from those values."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import yaml

from bench.live_system import start_xapp
from tests.test_chart import CHART, CUSTOM_KINDS, KUBERNETES, by_kind, helm
from xapp.config import load_xapp_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "deploy.md").read_text()
BLOCK = re.compile(r"^```(\w+)(?: (\S+))?\n(.*?)^```", re.MULTILINE | re.DOTALL)
BLOCKS = [(m.group(1), m.group(2), m.group(3)) for m in BLOCK.finditer(GUIDE)]
SECRETS_MOUNT = "/etc/atsss/secrets/"  # where the chart mounts the Secret


def named(name: str) -> str:
    (body,) = [b for _, n, b in BLOCKS if n == name]
    return body


def shell_lines(first_word: str) -> list[str]:
    return [
        line.strip()
        for lang, _, body in BLOCKS
        if lang == "sh"
        for line in body.splitlines()
        if line.strip().split(" ", 1)[0].rpartition("/")[2] == first_word
    ]


def sh_block_with(text: str) -> str:
    (body,) = [b for lang, _, b in BLOCKS if lang == "sh" and text in b]
    return body


def rendered(tmp_path: Path) -> tuple[list[dict[str, Any]], str, str]:
    """The objects `helm install` would make, as `helm template` renders them, the release
    name and the namespace, all from the guide's own install line and values file."""
    (install,) = shell_lines("helm")[:1]
    words = shlex.split(install)
    assert words[1] == "install", install
    release, chart = words[2], ROOT / words[3]
    assert chart == CHART
    namespace = words[words.index("--namespace") + 1]
    values = tmp_path / words[words.index("-f") + 1]
    values.write_text(named("my-values.yaml"))
    done = subprocess.run(
        [helm(), "template", release, str(chart), "--namespace", namespace, "-f", str(values)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d], release, namespace


def test_the_guide_s_values_render_valid_objects_and_a_descriptor_the_xapp_loads(
    tmp_path: Path,
) -> None:
    objects, release, namespace = rendered(tmp_path)
    for obj in objects:
        if obj["kind"] not in CUSTOM_KINDS:
            kubernetes_validate.validate(obj, KUBERNETES, strict=True)
    values = yaml.safe_load(named("my-values.yaml"))
    (deployment,) = by_kind(objects, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    image = f"{values['image']['repository']}:{values['image']['tag']}"
    assert container["image"] == image
    # the image the guide builds and pushes is the one the values name, at the chart's version
    for line in shell_lines("docker"):
        assert image in shlex.split(line), line
    chart_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert values["image"]["tag"] == chart_version
    # the Secret the guide makes is the one the pod mounts, with the keys the chart reads
    assert not by_kind(objects, "Secret")
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert any(v.get("secret", {}).get("secretName") == "atsss-secrets" for v in volumes)
    (create_secret,) = [line for line in shell_lines("kubectl") if "create secret" in line]
    words = shlex.split(create_secret)
    assert words[words.index("-n") + 1] == namespace
    assert "atsss-secrets" in words
    keys = {w.split("=", 1)[1] for w in words if w.startswith("--from-file=")}
    assert {"agent-token", "operator-tokens.yaml"} <= keys
    # the rollout the guide waits for is the Deployment the chart makes
    (rollout,) = [line for line in shell_lines("kubectl") if "rollout status" in line]
    assert f"deployment/{deployment['metadata']['name']}" in rollout
    # every helm line works on the same release, chart and namespace
    for line in shell_lines("helm"):
        words = shlex.split(line)
        assert words[1] in ("install", "upgrade", "history", "rollback"), line
        assert words[2] == release, line
        assert words[words.index("--namespace") + 1] == namespace, line
    # the descriptor in the ConfigMap loads, with the guide's CPE and agents
    config_map = by_kind(objects, "ConfigMap")[0]
    path = tmp_path / "config-file.json"
    path.write_text(config_map["data"]["config-file.json"])
    loaded = load_xapp_config(path)
    assert [c.id for c in loaded.cpes] == ["cpe-1"]
    assert loaded.agents.run_time_urls == ["*.cpe.example.net"]
    # the agent's files the guide installs are in the repository
    for line in sh_block_with("agent show").splitlines():
        for word in shlex.split(line):
            if word.startswith(("examples/", "deploy/")):
                assert (ROOT / word).is_file(), word


def run_block(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_guide_s_command_lines_run_against_a_running_xapp(tmp_path: Path) -> None:
    objects, _, _ = rendered(tmp_path)
    bin_dir = str(Path(sys.executable).parent)  # this virtualenv's `atsss`
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    # the secrets, made as the guide makes them (kubectl aside: there is no cluster here)
    secrets = "\n".join(
        line for line in sh_block_with("create secret").splitlines() if "kubectl" not in line
    )
    made = run_block(secrets, tmp_path, env)
    assert made.returncode == 0, made.stderr
    tokens = tmp_path / "operator-tokens.yaml"
    tokens.write_text(tokens.read_text().replace(SECRETS_MOUNT, f"{tmp_path}/"))
    # the controls the chart renders, with the Secret where this test keeps it
    descriptor = json.loads(by_kind(objects, "ConfigMap")[0]["data"]["config-file.json"])
    controls = json.dumps(descriptor["controls"]).replace(SECRETS_MOUNT, f"{tmp_path}/")
    config = tmp_path / "controls.json"
    config.write_text(controls)
    xapp = start_xapp(tmp_path, config)
    try:
        live = {**env, "ATSSS_URL": xapp.http_url}
        # the agent's own check, on the example configuration with the dry-run backend
        agent_config = tmp_path / "agent.yaml"
        example = yaml.safe_load((ROOT / "examples" / "agent" / "cpe.yaml").read_text())
        example.update(backend="dry-run", token_file=str(tmp_path / "agent-token"))
        agent_config.write_text(yaml.safe_dump(example))
        (show,) = [line for line in shell_lines("atsss") if "agent show" in line]
        # the agent's virtualenv is this one (tests/test_agent_install.py installs it alone)
        show = show.replace("/opt/atsss-agent/bin/atsss", "atsss")
        shown = run_block(
            show.replace("/etc/atsss-agent/agent.yaml", str(agent_config)), tmp_path, live
        )
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["backend"] == "dry-run"
        # "check that it steers": every line, pointed at this xApp instead of a port-forward
        check = sh_block_with("export ATSSS_URL").replace("http://127.0.0.1:8080", xapp.http_url)
        checked = run_block(check, tmp_path, live)
        assert checked.returncode == 0, checked.stderr
        assert "cpe-1" in checked.stdout
        assert '"node":"gnb_001_001_00000001"' in checked.stdout
        # "more CPEs": the guide's body, its curl line and the fleet's search
        (tmp_path / "cpe-2.json").write_text(named("cpe-2.json"))
        more = "export ATSSS_TOKEN_FILE=operator-token\n" + sh_block_with("--data @cpe-2.json")
        added = run_block(more, tmp_path, live)
        assert added.returncode == 0, added.stderr
        assert '"id":"cpe-2"' in added.stdout.replace(" ", "")
        operator = (tmp_path / "operator-token").read_text().strip()
        listed = httpx.get(
            f"{xapp.http_url}/v1/fleet",
            params={"search": "cpe-2"},
            headers={"Authorization": f"Bearer {operator}"},
            timeout=10,
        ).json()
        assert [r["cpe_id"] for r in listed["items"]] == ["cpe-2"]
    finally:
        xapp.terminate_within(10)
