"""The operator API's front door, against `atsss xapp serve` (real uvicorn): the token is
checked before the body is read, bodies are capped, and tokens follow their files without a
restart.

Before: five parallel 100 MB imports without a token were read and parsed whole (401 after
4-5 s each, RSS 226 → 866 MB); a token removed from the tokens file, or a rotated secret,
kept working until the xApp restarted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import httpx
import yaml

from bench.live_system import rss_mb, start_xapp, wait_until, write_xapp_config
from models.runtime import SHIPPED

OPERATOR = "operator-token-0123456789"
ROTATED = "operator-token-rotated-9876"
VIEWER = "viewer-token-0123456789ab"


def _post_huge(port: int, token: str | None, declared: int) -> bytes:
    """POST headers declaring ``declared`` bytes, then 1 MB of them; the answer's status line."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        sock.sendall(
            (
                f"POST /v1/cpes/import HTTP/1.1\r\nHost: x\r\n{auth}"
                f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
            ).encode()
        )
        with contextlib.suppress(OSError):  # the server may have answered and closed: wanted
            sock.sendall(b"[" + b" " * (1 << 20))
        answer = b""
        while b"\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        return answer.split(b"\r\n", 1)[0]


def test_token_first_body_cap_and_tokens_that_follow_their_files(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("agent-token-0123456789\n")
    secret = tmp_path / "alice-secret"
    secret.write_text(OPERATOR + "\n")
    tokens = tmp_path / "tokens.yaml"
    entries = [
        {"name": "alice", "role": "operator", "token_file": str(secret)},
        {"name": "victor", "role": "viewer", "token": VIEWER},
    ]
    tokens.write_text(yaml.safe_dump(entries))
    models = tmp_path / "models"
    (models / "good").mkdir(parents=True)
    for name in ("nr.card.json", "nr.estimate.onnx", "nr.lower.onnx", "nr.upper.onnx"):
        shutil.copy(SHIPPED / name, models / "good" / name)
    (models / "big").mkdir()
    with (models / "big" / "nr.card.json").open("wb") as big:
        big.truncate(2 << 30)  # 2 GB, sparse
    (models / "link").mkdir()
    (models / "link" / "nr.card.json").symlink_to("/etc/passwd")
    config = write_xapp_config(
        tmp_path,
        "paper-static",
        {},
        None,
        operator_api={"tokens_file": str(tokens), "models_folder": str(models)},
    )
    xapp = start_xapp(tmp_path, config)
    port = int(xapp.http_url.rsplit(":", 1)[1])
    try:
        before = rss_mb(xapp.process.pid)
        statuses: list[bytes] = []
        threads = [
            threading.Thread(target=lambda: statuses.append(_post_huge(port, None, 100 << 20)))
            for _ in range(5)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert statuses == [b"HTTP/1.1 401 Unauthorized"] * 5
        assert _post_huge(port, "not-a-known-token-at-all", 100 << 20).startswith(b"HTTP/1.1 401")
        # With a good token the cap answers before the body is read as well.
        assert _post_huge(port, OPERATOR, 100 << 20).startswith(b"HTTP/1.1 413")
        assert rss_mb(xapp.process.pid) - before < 50

        def status(token: str) -> int:
            headers = {"Authorization": f"Bearer {token}"}
            return httpx.get(f"{xapp.http_url}/v1/cpes", headers=headers, timeout=10).status_code

        assert status(VIEWER) == 200
        assert status(OPERATOR) == 200

        # Models by name only, from the models folder; every refusal reads the same.
        def reload(name: str) -> httpx.Response:
            return httpx.post(
                f"{xapp.http_url}/v1/models/reload",
                json={"access": "nr", "model": name, "reason": "test"},
                headers={"Authorization": f"Bearer {OPERATOR}"},
                timeout=30,
            )

        before = rss_mb(xapp.process.pid)
        refusals = {}
        for name in ("/dev/zero", "../../etc/passwd", "big", "link", "unknown"):
            answer = reload(name)
            assert answer.status_code == 409, (name, answer.text)
            refusals[name] = answer.json()["detail"].replace(repr(name), "NAME")
        assert len(set(refusals.values())) == 1, refusals
        assert "/" not in next(iter(refusals.values())).replace("'", "")
        assert rss_mb(xapp.process.pid) - before < 50
        assert reload("good").status_code == 200
        assert "no usable" not in reload("good").text
        # The viewer is removed from the tokens file: refused within seconds, no restart.
        tokens.write_text(yaml.safe_dump(entries[:1]))
        os.utime(tokens, (time.time() + 2, time.time() + 2))  # a new mtime whatever the clock
        wait_until(lambda: status(VIEWER) == 401, 5, "the removed token refused")
        assert status(OPERATOR) == 200
        # A rotated secret (the file behind token_file rewritten): the new token, not the old.
        secret.write_text(ROTATED + "\n")
        os.utime(secret, (time.time() + 4, time.time() + 4))
        wait_until(lambda: status(ROTATED) == 200, 5, "the rotated token accepted")
        assert status(OPERATOR) == 401
        # A tokens file that no longer reads refuses everyone rather than opening the API.
        tokens.write_text("not: [a list")
        os.utime(tokens, (time.time() + 6, time.time() + 6))
        wait_until(lambda: status(ROTATED) == 401, 5, "every token refused")
        assert httpx.get(f"{xapp.http_url}/v1/cpes", timeout=10).status_code == 401
        assert "every token refused until fixed" in xapp.log()
    finally:
        xapp.terminate_within(30)


def test_without_tokens_nothing_is_read_unless_the_deployment_says_so(tmp_path: Path) -> None:
    """Before: with no tokens file anyone reaching the port read the audit log (who, why), the
    agents' URLs and the event streams."""
    (tmp_path / "token").write_text("agent-token-0123456789\n")
    config = write_xapp_config(tmp_path, "paper-static", {}, None)
    xapp = start_xapp(tmp_path, config)
    try:
        for path in ("/v1/cpes", "/v1/audit", "/v1/agents"):
            answer = httpx.get(xapp.http_url + path, timeout=10)
            assert answer.status_code == 401, path
            assert "anonymous_reads" in answer.json()["detail"]
        assert httpx.get(xapp.http_url + "/ric/v1/health/alive", timeout=10).status_code == 200
        # The deployment allows anonymous reads: reads open at the next reload, writes never.
        document = json.loads(config.read_text())
        document["operator_api"] = {"anonymous_reads": True}
        config.write_text(json.dumps(document))
        os.utime(config, (time.time() + 2, time.time() + 2))
        wait_until(
            lambda: httpx.get(xapp.http_url + "/v1/cpes", timeout=10).status_code == 200,
            10,
            "anonymous reads allowed",
        )
        written = httpx.post(
            xapp.http_url + "/v1/cpes/cpe-1/overrides",
            json={"kind": "freeze", "directions": ["downlink"], "reason": "x"},
            timeout=10,
        )
        assert written.status_code == 401
    finally:
        xapp.terminate_within(30)
