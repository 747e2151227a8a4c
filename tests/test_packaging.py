"""The packaging files conform to what the O-RAN SC platform checks."""

import copy
import json
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT.parent / "shared" / "reference" / "osc" / "xapp-descriptor.schema.json"


def test_descriptor_conforms_to_the_onboarder_schema() -> None:
    assert SCHEMA.exists(), f"{SCHEMA} is missing: ../shared/ must sit beside the checkout"
    schema = json.loads(SCHEMA.read_text())
    # The onboarder puts the xApp's own controls schema in place of this placeholder.
    schema = copy.deepcopy(schema)
    schema["properties"]["controls"] = json.loads(
        (ROOT / "xapp" / "config.schema.json").read_text()
    )
    descriptor = json.loads((ROOT / "xapp-descriptor.json").read_text())
    jsonschema.validate(descriptor, schema)
    assert descriptor["version"] == _project_version()


def _project_version() -> str:
    for line in (ROOT / "pyproject.toml").read_text().splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise AssertionError("no version in pyproject.toml")


def test_top_level_layout_is_the_agreed_one() -> None:
    for name in (
        "atsss",
        "core",
        "xapp",
        "bench",
        "kpm",
        "e2sim",
        "agent",
        "models",
        "charts",
        "Dockerfile",
        "xapp-descriptor.json",
        "pyproject.toml",
    ):
        assert (ROOT / name).exists(), name


def test_every_path_the_dockerfile_copies_from_the_checkout_exists() -> None:
    copied = [
        line.split()[1:-1]
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ") and "--from=" not in line
    ]
    assert copied, "the Dockerfile copies nothing from the checkout"
    for sources in copied:
        for source in sources:
            assert (ROOT / source).exists(), f"Dockerfile copies {source}, which does not exist"


def test_the_image_build_has_every_file_the_wheel_build_reads() -> None:
    """pip builds the wheel inside the image from what the Dockerfile copied: the readme and
    the licence files pyproject names must be among them, or the build fails."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    copied = {
        source
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ") and "--from=" not in line
        for source in line.split()[1:-1]
    }
    needed = {project["readme"], *project["license-files"]}
    assert needed <= copied, needed - copied


def test_the_xapp_loads_the_descriptor_and_its_controls_follow_the_shipped_schema() -> None:
    from xapp.config import SCHEMA_PATH, load_xapp_config

    descriptor = json.loads((ROOT / "xapp-descriptor.json").read_text())
    jsonschema.validate(descriptor["controls"], json.loads(SCHEMA_PATH.read_text()))
    deployment = load_xapp_config(ROOT / "xapp-descriptor.json")
    assert deployment.e2.rmr_port == 4560
    assert {n.access for n in deployment.e2.nodes} == {"nr", "wifi", "lifi"}


def test_the_example_configurations_load() -> None:
    from xapp.config import load_xapp_config

    examples = sorted(p for p in (ROOT / "examples").glob("*") if p.is_file())
    assert examples
    for path in examples:
        assert load_xapp_config(path).cpes, path


def test_the_descriptor_names_the_message_types_the_rmr_adapter_handles_and_sends() -> None:
    from xapp.e2 import messages
    from xapp.e2.rmr_adapter import HANDLED_TYPES

    names = {value: name for name, value in vars(messages).items() if name.startswith("RIC_")}
    descriptor = json.loads((ROOT / "xapp-descriptor.json").read_text())
    (rmr,) = [p for p in descriptor["messaging"]["ports"] if p["name"] == "rmrdata"]
    handled = {names[t] for t in HANDLED_TYPES}
    assert set(rmr["rxMessages"]) == handled
    assert rmr["txMessages"] == ["RIC_HEALTH_CHECK_RESP"], "answers go back by return-to-sender"


def test_hadolint_passes_on_the_dockerfile() -> None:
    import shutil
    import subprocess
    import sys

    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    done = subprocess.run(
        [hadolint, "--config", str(ROOT / ".hadolint.yaml"), str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_agent_examples_load_and_the_systemd_unit_runs_the_agent_with_one() -> None:
    from agent.config import load_config

    for name, role in (("cpe.yaml", "cpe"), ("proxy.yaml", "proxy")):
        assert load_config(ROOT / "examples" / "agent" / name).role == role
    unit = (ROOT / "deploy" / "agent" / "atsss-agent.service").read_text()
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert exec_start.split("=", 1)[1].split()[1:] == [
        "agent",
        "run",
        "--config",
        "/etc/atsss-agent/agent.yaml",
    ]
    assert "[Install]" in unit
