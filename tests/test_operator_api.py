"""The operator API against the running service: real uvicorn in `atsss xapp serve`, real Redis,
the simulator and dry-run agents as processes."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from bench.live_system import (
    Agent,
    Xapp,
    agent_process,
    persistent_redis,
    start_simulator,
    start_xapp,
    wait_until,
    write_xapp_config,
)
from tests.servers import redis_server

pytestmark = pytest.mark.slow

OPERATOR = "operator-token-0123456789"
VIEWER = "viewer-token-0123456789ab"


def tokens_file(folder: Path) -> Path:
    path = folder / "tokens.yaml"
    secret = folder / "alice-secret"
    secret.write_text(OPERATOR + "\n")
    path.write_text(
        yaml.safe_dump(
            [
                {"name": "alice", "role": "operator", "token_file": str(secret)},
                {"name": "victor", "role": "viewer", "token": VIEWER},
            ]
        )
    )
    return path


def api(xapp: Xapp, token: str | None = OPERATOR) -> httpx.Client:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=xapp.http_url, headers=headers, timeout=10)


def held(agent: Agent, cpe_id: str = "cpe-1") -> dict[str, int] | None:
    found = agent.weights("downlink", cpe_id)
    return None if found is None else dict(found["applied"]["weights"])


def test_overrides_roles_audit_and_durability(tmp_path: Path) -> None:
    with (
        persistent_redis(tmp_path / "redis") as redis,
        agent_process(tmp_path, "proxy", "proxy", ["cpe-1"]) as proxy,
    ):
        config = write_xapp_config(
            tmp_path,
            "paper-static",
            {},
            proxy.url,
            directions=["downlink"],
            operator_api={"tokens_file": str(tokens_file(tmp_path))},
        )
        env = {"DBAAS_SERVICE_HOST": "127.0.0.1", "DBAAS_SERVICE_PORT": str(redis.port)}
        xapp = start_xapp(tmp_path, config, env)
        simulator = start_simulator(tmp_path, "paper-static", xapp.e2_port, 90)
        second = None
        try:
            wait_until(lambda: held(proxy) is not None, 20, "the xApp's first weights")
            with api(xapp, None) as anonymous, api(xapp, VIEWER) as viewer, api(xapp) as alice:
                body = {
                    "kind": "weights",
                    "directions": ["downlink"],
                    "weights": {"nr": 3, "wifi": 2, "lifi": 1},
                    "reason": "maintenance on the Wi-Fi AP",
                }
                assert anonymous.post("/v1/cpes/cpe-1/overrides", json=body).status_code == 401
                refused = viewer.post("/v1/cpes/cpe-1/overrides", json=body)
                assert refused.status_code == 403, refused.text
                assert viewer.get("/v1/cpes/cpe-1").status_code == 200

                made = alice.post("/v1/cpes/cpe-1/overrides", json=body)
                assert made.status_code == 201, made.text
                pinned = made.json()
                assert pinned["set_by"] == "alice"
                wait_until(lambda: held(proxy) == {"nr": 3, "wifi": 2, "lifi": 1}, 5, "pinned")
                state = alice.get("/v1/cpes/cpe-1").json()
                assert state["overrides"][0]["id"] == pinned["id"]
                assert state["directions"]["downlink"]["weights_in_force"] == body["weights"]
                assert state["directions"]["downlink"]["at_agent"]["weights"] == body["weights"]
                nodes = alice.get("/v1/nodes").json()
                assert [n["reporting"] for n in nodes] == [True, True, True], nodes
                (agent,) = alice.get("/v1/agents", params={"check": True}).json()
                assert agent["role"] == "proxy"
                assert agent["health"]["reachable"] is True
                assert agent["last_push"]["result"] == "applied"

                clash = alice.post(
                    "/v1/cpes/cpe-1/overrides",
                    json={"kind": "freeze", "directions": ["downlink"], "reason": "hold"},
                )
                assert clash.status_code == 409
                assert pinned["id"] in clash.json()["detail"]

                bad = alice.post(
                    "/v1/cpes/cpe-1/overrides",
                    json={**body, "weights": {"nr": 300, "wifi": 1, "lifi": 1}},
                )
                assert bad.status_code == 422
                assert "weights.nr" in bad.json()["detail"]
                unknown = alice.post(
                    "/v1/cpes/cpe-1/overrides",
                    json={"kind": "exclude", "excluded": ["5g"], "reason": "x"},
                )
                assert unknown.status_code == 422
                assert "5g" in unknown.json()["detail"]

                # Durability: restart the xApp, then Redis; the override stays, and acts.
                xapp.terminate_within(5)
                second = start_xapp(tmp_path, config, env, e2_port=xapp.e2_port, name="xapp-2")
                redis.restart()
            with api(second) as alice:
                wait_until(lambda: alice.get("/v1/overrides").status_code == 200, 20, "the API")
                # The nodes reconnect to the restarted xApp at their own pace; the 3 s override
                # below must not expire before the loop hears from them again.
                wait_until(
                    lambda: all(n["reporting"] for n in alice.get("/v1/nodes").json()),
                    20,
                    "the nodes reporting to the restarted xApp",
                )
                kept = alice.get("/v1/overrides").json()
                assert [o["id"] for o in kept] == [pinned["id"]]
                expiring = {
                    "kind": "exclude",
                    "directions": ["downlink"],
                    "excluded": ["nr"],
                    "reason": "gNB maintenance, 3 s",
                    "expires_in_s": 3,
                }
                removed = alice.delete(f"/v1/overrides/{pinned['id']}", params={"reason": "done"})
                assert removed.status_code == 200, removed.text
                made = alice.post("/v1/cpes/cpe-1/overrides", json=expiring)
                assert made.status_code == 201, made.text
                wait_until(lambda: (held(proxy) or {}).get("nr") == 0, 10, "nr excluded")
                wait_until(lambda: alice.get("/v1/overrides").json() == [], 10, "the expiry")
                # NR carries a fifth of the capacity: the loop takes it back at once (a path as
                # small as LiFi's 12 Mbit/s may stay out on the loop's own judgement)
                wait_until(lambda: (held(proxy) or {}).get("nr", 0) > 0, 10, "nr back")
                actions = [(e["who"], e["action"]) for e in alice.get("/v1/audit").json()]
                assert actions[:4] == [
                    ("xapp", "expired"),
                    ("alice", "set"),
                    ("alice", "deleted"),
                    ("alice", "set"),
                ], actions
                entry = alice.get("/v1/audit", params={"limit": 1}).json()[0]
                assert entry["before"]["excluded"] == ["nr"]
                assert entry["after"] is None
            code, _ = second.terminate_within(5)
            assert code == 0
        finally:
            simulator.kill()
            simulator.wait()
            for process in (xapp, second):
                if process is not None and process.process.poll() is None:
                    process.process.kill()
                    process.process.wait()


def test_writes_get_503_while_redis_is_down_and_reads_carry_on(tmp_path: Path) -> None:
    with (
        redis_server() as redis_port,
        agent_process(tmp_path, "proxy", "proxy", ["cpe-1"]) as proxy,
    ):
        config = write_xapp_config(
            tmp_path,
            "paper-static",
            {},
            proxy.url,
            directions=["downlink"],
            operator_api={"tokens_file": str(tokens_file(tmp_path))},
        )
        env = {"DBAAS_SERVICE_HOST": "127.0.0.1", "DBAAS_SERVICE_PORT": str(redis_port)}
        xapp = start_xapp(tmp_path, config, env)
        try:
            with api(xapp) as alice:
                assert alice.get("/v1/cpes").json()["total"] == 1
                # Stop Redis under the xApp: kill the server the fixture started.
                subprocess.run(["pkill", "-f", f"redis-server.*:{redis_port}"], check=False)
                subprocess.run(["pkill", "-f", f"redis-server.*--port {redis_port}"], check=False)
                time.sleep(0.5)
                answer = alice.post(
                    "/v1/cpes/cpe-1/overrides",
                    json={"kind": "freeze", "reason": "hold still"},
                )
                assert answer.status_code == 503, answer.text
                assert alice.get("/v1/overrides").json() == []
                assert alice.get("/v1/cpes/cpe-1").status_code == 200
                assert httpx.get(f"{xapp.http_url}/ric/v1/health/ready").status_code == 503
        finally:
            xapp.terminate_within(5)


def test_cpes_changed_at_run_time_and_models_reloaded(tmp_path: Path) -> None:
    with (
        redis_server() as redis_port,
        agent_process(tmp_path, "proxy", "proxy", ["cpe-1"]) as proxy,
    ):
        config = write_xapp_config(
            tmp_path,
            "paper-static",
            {},
            proxy.url,
            directions=["downlink"],
            operator_api={"tokens_file": str(tokens_file(tmp_path))},
        )
        env = {"DBAAS_SERVICE_HOST": "127.0.0.1", "DBAAS_SERVICE_PORT": str(redis_port)}
        xapp = start_xapp(tmp_path, config, env)
        second = None
        try:
            with api(xapp) as alice, api(xapp, VIEWER) as viewer:
                new = {"id": "cpe-7", "accesses": {"nr": {"ue_id": "gnb-du:7"}}}
                made = alice.post("/v1/cpes", json={"cpe": new, "reason": "new customer"})
                assert made.status_code == 201, made.text
                clash = alice.post(
                    "/v1/cpes",
                    json={
                        "cpe": {"id": "cpe-8", "accesses": {"nr": {"ue_id": "gnb-du:1"}}},
                        "reason": "typo",
                    },
                )
                assert clash.status_code == 409
                assert "already the identity of cpe-1" in clash.json()["detail"]
                bulk = [
                    {
                        "id": f"cpe-{n}",
                        "accesses": {"wifi": {"station_mac": f"02:00:00:00:01:{n:02x}"}},
                    }
                    for n in (20, 21)
                ]
                assert (
                    alice.post(
                        "/v1/cpes/import", json={"cpes": bulk, "reason": "batch"}
                    ).status_code
                    == 201
                )
                assert viewer.post("/v1/cpes", json={"cpe": new, "reason": "x"}).status_code == 403
                gone = alice.delete("/v1/cpes/cpe-1", params={"reason": "contract ended"})
                assert gone.status_code == 200, gone.text
                ids = [c["cpe_id"] for c in alice.get("/v1/cpes").json()["items"]]
                assert sorted(ids) == ["cpe-20", "cpe-21", "cpe-7"]

                models = {m["access"]: m for m in alice.get("/v1/models").json()}
                assert set(models) == {"nr", "wifi", "lifi"}
                assert models["nr"]["model"] == "nr"
                missing = alice.post(
                    "/v1/models/reload",
                    json={"access": "nr", "model": "none", "reason": "try"},
                )
                assert missing.status_code == 409
                reloaded = alice.post(
                    "/v1/models/reload", json={"access": "nr", "reason": "back to the shipped one"}
                )
                assert reloaded.status_code == 200, reloaded.text
                actions = [e["action"] for e in alice.get("/v1/audit").json()]
                assert actions[:4] == ["model loaded", "cpe removed", "cpe added", "cpe added"]
            xapp.terminate_within(5)
            second = start_xapp(tmp_path, config, env, name="xapp-2")
            with api(second) as alice:
                ids = [c["cpe_id"] for c in alice.get("/v1/cpes").json()["items"]]
                assert sorted(ids) == ["cpe-20", "cpe-21", "cpe-7"], "run-time CPEs lost on restart"
            code, _ = second.terminate_within(5)
            assert code == 0
        finally:
            for process in (xapp, second):
                if process is not None and process.process.poll() is None:
                    process.process.kill()
                    process.process.wait()
