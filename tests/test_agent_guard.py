"""The agent meets every request with the token first and a body cap, and keeps its audit log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.test_agent_api import agent, write_config

BIG = 1024 * 1024


def test_a_wrong_token_is_refused_before_the_body_is_read(tmp_path: Path) -> None:
    config, port = write_config(tmp_path)
    with (
        agent(config, port) as client,
        httpx.Client(base_url=str(client.base_url), timeout=10) as stranger,
    ):
        # Garbage body, wrong token: 401 (before: 422, the body parsed first).
        answer = stranger.put(
            "/v1/weights/downlink", content=b"{not json", headers={"Authorization": "Bearer x"}
        )
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == "Bearer"
        no_token = stranger.put("/v1/weights/downlink", content=b"x" * BIG)
        assert no_token.status_code == 401
        assert stranger.get("/v1/health").status_code == 200  # open to probes


def test_a_body_beyond_the_cap_is_413_declared_or_chunked(tmp_path: Path) -> None:
    config, port = write_config(tmp_path)
    with agent(config, port) as client:
        weights = {f"access-{i}": 1 for i in range(20_000)}  # valid JSON, ~400 kB
        body = {"cpe_id": "cpe-1", "weights": weights, "sequence": 1}
        assert client.put("/v1/weights/downlink", json=body).status_code == 413

        def chunks() -> Iterator[bytes]:  # no Content-Length: the cap holds while reading
            for _ in range(64):
                yield b" " * 4096
            yield b"{}"

        assert client.put("/v1/weights/downlink", content=chunks()).status_code == 413
        ok = {"cpe_id": "cpe-1", "weights": {"nr": 1, "wifi": 2, "lifi": 1}, "sequence": 1}
        assert client.put("/v1/weights/downlink", json=ok).status_code == 200


def test_every_change_is_in_the_audit_log_by_default(tmp_path: Path) -> None:
    config, port = write_config(tmp_path)
    printed: list[str] = []
    with agent(config, port, output=printed) as client:
        body = {"cpe_id": "cpe-1", "weights": {"nr": 30, "wifi": 100, "lifi": 1}, "sequence": 3}
        assert client.put("/v1/weights/downlink", json=body).status_code == 200
    assert "applied downlink weights" in printed[0]
    assert "sequence 3" in printed[0]


def test_a_proxy_wants_the_cpe_named_and_sequences_are_bounded(tmp_path: Path) -> None:
    config, port = write_config(tmp_path)
    with agent(config, port) as client:
        unnamed = client.put("/v1/weights/downlink", json={"weights": {"nr": 1}, "sequence": 1})
        assert unnamed.status_code == 422
        assert "cpe_id" in unnamed.json()["detail"]
        assert client.get("/v1/weights/downlink").status_code == 422
        huge = client.put(
            "/v1/weights/downlink",
            content=b'{"cpe_id": "cpe-1", "weights": {"nr": 1}, "sequence": ' + b"9" * 4299 + b"}",
            headers={"content-type": "application/json"},
        )
        assert huge.status_code == 422
        assert client.get("/v1/weights/downlink", params={"cpe_id": "cpe-1"}).status_code == 404
