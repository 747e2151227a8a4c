"""The agent as a real process (uvicorn on loopback): auth, bad input, failures, restart."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest
import yaml

from agent.backends.wrr import SCHEDULER, WEIGHTS
from tests.servers import free_port

TOKEN = "s3cret-token"
GOLDEN = "0 16777482 28 0 0 0 16777738 99 0 0 0 16777994 1 0 0\n"


def write_config(tmp_path: Path, role: str = "proxy", **extra: object) -> tuple[Path, int]:
    port = free_port()
    (tmp_path / "token").write_text(TOKEN + "\n")
    config = {
        "role": role,
        "accesses": {
            "nr": {"interface": "nr1", "address": "10.1.0.2"},
            "wifi": {"interface": "wifi1", "address": "10.2.0.2"},
            "lifi": {"interface": "lifi1", "address": "10.3.0.2"},
        },
        "cpes": {"cpe-1": {"nr": "10.1.0.1", "wifi": "10.2.0.1", "lifi": "10.3.0.1"}},
        "listen": f"127.0.0.1:{port}",
        "token_file": str(tmp_path / "token"),
        "state_file": str(tmp_path / "state.json"),
        "procfs_root": str(tmp_path / "proc"),
        "backend": "wrr",
        **extra,
    }
    for relative in (WEIGHTS, SCHEDULER):
        (tmp_path / "proc" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "proc" / relative).write_text("")
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, port


@contextlib.contextmanager
def agent(
    config: Path,
    port: int,
    atsss: Sequence[str] = (sys.executable, "-m", "atsss"),
    output: list[str] | None = None,
) -> Iterator[httpx.Client]:
    """The agent as a process (``atsss``: which command line), and a client of its API;
    ``output`` gets what the process printed, once it has stopped. What it prints goes to a
    file, not a pipe: a pipe nobody reads until the end fills at 64 KiB and then holds the
    agent up at its next log line."""
    printed_to = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in the finally)
    process = subprocess.Popen(
        [*atsss, "agent", "run", "--config", str(config)],
        stdout=printed_to,
        stderr=subprocess.STDOUT,
        text=True,
    )
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if client.get("/v1/health").status_code == 200:
                    break
            if process.poll() is not None:
                printed_to.seek(0)
                raise AssertionError(printed_to.read())
            assert time.monotonic() < deadline, "agent did not start"
            time.sleep(0.1)
        yield client
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=30)
        printed_to.seek(0)
        if output is not None:
            output.append(printed_to.read())
        printed_to.close()


def put(
    client: httpx.Client, weights: object, sequence: int, headers: dict[str, str] | None = None
) -> httpx.Response:
    return client.put(
        "/v1/weights/downlink",
        json={"cpe_id": "cpe-1", "weights": weights, "sequence": sequence},
        headers=headers,
    )


def test_weights_over_http_bad_input_and_restart(tmp_path: Path) -> None:
    config, port = write_config(tmp_path)
    sysctl = tmp_path / "proc" / WEIGHTS
    with agent(config, port) as client:
        ok = put(client, {"nr": 28, "wifi": 99, "lifi": 1}, 1)
        assert ok.status_code == 200, ok.text
        assert sysctl.read_text() == GOLDEN
        assert (tmp_path / "proc" / SCHEDULER).read_text() == "roundrobin\n"

        bad = [
            (put(client, {"nr": -1}, 2), 400, "weights.nr: -1 is not an integer in 0..255"),
            (put(client, {"nr": 1000}, 2), 400, "1000 is not an integer"),
            (put(client, {"satellite": 5}, 2), 400, "unknown access"),
            (put(client, {"nr": "ten"}, 2), 422, "valid integer"),
            (put(client, {"nr": 1}, 1), 409, "sequence 1 is not after 1"),
            (
                put(client, {"nr": 1}, 2, headers={"Authorization": "Bearer wrong"}),
                401,
                "bearer token",
            ),
            (
                client.put(
                    "/v1/weights/downlink",
                    content=b"{not json",
                    headers={"Content-Type": "application/json"},
                ),
                422,
                "not valid JSON",
            ),
            (
                client.put(
                    "/v1/weights/uplink",
                    json={"cpe_id": "cpe-1", "weights": {"nr": 1}, "sequence": 2},
                ),
                400,
                "applies downlink weights",
            ),
        ]
        for response, status, text in bad:
            assert response.status_code == status, response.text
            assert text in response.json()["detail"], response.text
        assert (
            httpx.get(f"http://127.0.0.1:{port}/v1/weights/downlink?cpe_id=cpe-1").status_code
            == 401
        )
        assert sysctl.read_text() == GOLDEN  # nothing written by any of them
        current = client.get("/v1/weights/downlink", params={"cpe_id": "cpe-1"}).json()["applied"]
        assert current["weights"] == {"nr": 28, "wifi": 99, "lifi": 1}
        assert "token holder" in current["requested_by"]
        assert client.get("/v1/telemetry").json()["kernel"]["rules"][0]["dst"] == "10.1.0.1"

    sysctl.write_text("")  # a host restart loses the kernel state
    with agent(config, port) as client:
        assert sysctl.read_text() == GOLDEN
        assert (
            client.get("/v1/weights/downlink", params={"cpe_id": "cpe-1"}).json()["applied"][
                "sequence"
            ]
            == 1
        )
        assert put(client, {"nr": 50, "wifi": 50, "lifi": 1}, 2).status_code == 200


def test_failed_kernel_write_is_reported_and_the_agent_keeps_serving(tmp_path: Path) -> None:
    config, port = write_config(tmp_path)
    sysctl = tmp_path / "proc" / WEIGHTS
    with agent(config, port) as client:
        assert put(client, {"nr": 28, "wifi": 99, "lifi": 1}, 1).status_code == 200
        sysctl.unlink()
        sysctl.mkdir()  # the kernel now refuses every write
        failed = put(client, {"nr": 1, "wifi": 1, "lifi": 1}, 2)
        assert failed.status_code == 502
        assert "cannot write" in failed.json()["detail"]
        assert client.get("/v1/health").json()["status"] == "ok"
        assert (
            client.get("/v1/weights/downlink", params={"cpe_id": "cpe-1"}).json()["applied"][
                "sequence"
            ]
            == 1
        )


def test_cpe_agent_refuses_an_address_that_is_not_on_this_host(tmp_path: Path) -> None:
    config, port = write_config(
        tmp_path,
        role="cpe",
        cpes={},
        backend="dry-run",
        accesses={
            "nr": {"interface": "lo", "address": "127.0.0.1"},
            "wifi": {"interface": "x", "address": "10.254.0.1"},
        },
    )
    with agent(config, port) as client:
        ok = client.put("/v1/weights/uplink", json={"weights": {"nr": 3}, "sequence": 1})
        assert ok.status_code == 200, ok.text
        refused = client.put(
            "/v1/weights/uplink", json={"weights": {"nr": 3, "wifi": 1}, "sequence": 2}
        )
        assert refused.status_code == 400
        assert "10.254.0.1 is not an address of this host" in refused.json()["detail"]
        # Its health says what it holds: a restarted xApp learns lever and set in one call.
        health = client.get("/v1/health").json()
        assert health["cpe_id"] == "cpe-1"
        assert health["held"]["uplink"]["weights"] == {"nr": 3}
        assert health["held"]["uplink"]["sequence"] == 1


def test_bad_configuration_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump({"role": "router", "accesses": {}}))
    result = subprocess.run(
        [sys.executable, "-m", "atsss", "agent", "show", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {path}: role:")


def agent_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "atsss", "agent", *args], capture_output=True, text=True, timeout=60
    )


def apply_down(config: Path, weights: str) -> subprocess.CompletedProcess[str]:
    return agent_command(
        "apply",
        "--config",
        str(config),
        "--direction",
        "down",
        "--cpe",
        "cpe-1",
        "--weights",
        weights,
    )


@pytest.mark.parametrize("weights", ["nr=30,wifi", "nr=x"])
def test_apply_command_rejects_bad_weights_text(tmp_path: Path, weights: str) -> None:
    config, _ = write_config(tmp_path)
    result = apply_down(config, weights)
    assert result.returncode == 2
    assert "--weights is access=integer" in result.stderr


def test_apply_and_show_commands(tmp_path: Path) -> None:
    config, _ = write_config(tmp_path)
    applied = apply_down(config, "nr=28,wifi=99,lifi=1")
    assert applied.returncode == 0, applied.stderr
    assert (tmp_path / "proc" / WEIGHTS).read_text() == GOLDEN
    again = apply_down(config, "nr=5,wifi=5,lifi=1")
    assert '"sequence": 2' in again.stdout
    shown = agent_command("show", "--config", str(config))
    assert '"weight": 5' in shown.stdout


def test_tls_when_configured(tmp_path: Path) -> None:
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(tmp_path / "key.pem"),
            "-out",
            str(tmp_path / "cert.pem"),
        ],
        capture_output=True,
        check=True,
        timeout=60,
    )
    import ssl

    trust = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    config, port = write_config(
        tmp_path, tls_certificate=str(tmp_path / "cert.pem"), tls_key=str(tmp_path / "key.pem")
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "atsss", "agent", "run", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                response = httpx.get(
                    f"https://127.0.0.1:{port}/v1/health",
                    verify=trust,
                    timeout=5,
                )
                if response.status_code == 200:
                    break
            assert time.monotonic() < deadline, "agent did not start with TLS"
            time.sleep(0.2)
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=5)
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_backend_detection(tmp_path: Path) -> None:
    from agent.backends.detect import detect_kernel

    assert detect_kernel(tmp_path) == "dry-run"
    (tmp_path / "sys/net/mptcp").mkdir(parents=True)
    (tmp_path / "sys/net/mptcp/enabled").write_text("1\n")
    assert detect_kernel(tmp_path) == "mainline"
    (tmp_path / WEIGHTS).write_text("")
    assert detect_kernel(tmp_path) == "wrr"


def test_counter_probe_reads_the_interface_counters(tmp_path: Path) -> None:
    import threading

    from agent.probes import counter_probe

    counter = tmp_path / "class/net/wifi0/statistics/rx_bytes"
    counter.parent.mkdir(parents=True)
    counter.write_text("0")

    def traffic() -> None:  # 12.5 MB over the probe's second: 100 Mbit/s
        time.sleep(0.2)
        counter.write_text(str(12_500_000))

    threading.Thread(target=traffic).start()
    result = counter_probe("wifi", "wifi0", seconds=1.0, sysfs=tmp_path)
    assert result.mbps == pytest.approx(100.0)
    assert result.bytes == 0
    assert result.method == "counters"
