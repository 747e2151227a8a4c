"""Replicas that agree: two `xapp serve` processes on one real Redis serve one operator state
(overrides and run-time CPEs changed through either are listed by both within a period; of two
conflicting overrides exactly one wins), and SDL's stalls neither hold the HTTP server nor
leave a change the API refused to go into force later."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from bench.live_system import (
    TOKEN,
    Agent,
    PersistentRedis,
    Xapp,
    agent_process,
    persistent_redis,
    start_simulator,
    start_xapp,
    wait_until,
    write_xapp_config,
)
from bench.replicas import run_replicas
from tests.test_operator_api import OPERATOR, api, tokens_file
from tests.test_xapp_serve import FOUR_CPES, controlled
from xapp.operator.api import STATE_AGE_HEADER
from xapp.ownership import assigned_replica

pytestmark = pytest.mark.slow

PERIOD_S = 1.0  # paper-static's nodes report every second


@contextlib.contextmanager
def two_replicas(tmp_path: Path, store: PersistentRedis) -> Iterator[tuple[Xapp, Xapp]]:
    with agent_process(tmp_path, "proxy", "proxy", ["cpe-1"]) as proxy:
        config = write_xapp_config(
            tmp_path,
            "paper-static",
            {},
            proxy.url,
            directions=["downlink"],
            operator_api={"tokens_file": str(tokens_file(tmp_path))},
        )
        env = {"DBAAS_SERVICE_HOST": "127.0.0.1", "DBAAS_SERVICE_PORT": str(store.port)}
        a = start_xapp(tmp_path, config, {**env, "HOSTNAME": "replica-a"}, name="xapp-a")
        b = None
        try:
            b = start_xapp(tmp_path, config, {**env, "HOSTNAME": "replica-b"}, name="xapp-b")
            yield a, b
        finally:
            for xapp in (a, b):
                if xapp is not None and xapp.process.poll() is None:
                    xapp.process.kill()
                    xapp.process.wait()


def seen_within(check: Any, seconds: float, what: str) -> float:
    """How long until ``check()`` holds (asked every 20 ms), failing past ``seconds``."""
    started = time.monotonic()
    wait_until(check, seconds, what, interval_s=0.02)
    return time.monotonic() - started


def race_freezes(
    through_a: httpx.Client, through_b: httpx.Client, round_: int
) -> dict[str, httpx.Response]:
    """The same freeze on cpe-1 through both replicas at once."""
    barrier = threading.Barrier(2)
    answers: dict[str, httpx.Response] = {}

    def freeze(name: str, client: httpx.Client) -> None:
        barrier.wait()
        answers[name] = client.post(
            "/v1/cpes/cpe-1/overrides", json={"kind": "freeze", "reason": f"{name} {round_}"}
        )

    racers = [
        threading.Thread(target=freeze, args=("a", through_a)),
        threading.Thread(target=freeze, args=("b", through_b)),
    ]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=30)
    return answers


def override_ids(xapp: Xapp) -> set[str]:
    with api(xapp) as client:
        return {o["id"] for o in client.get("/v1/overrides").json()}


def cpe_ids(xapp: Xapp) -> set[str]:
    with api(xapp) as client:
        return {c["cpe_id"] for c in client.get("/v1/cpes").json()["items"]}


def test_two_replicas_serve_one_operator_state(tmp_path: Path) -> None:
    with persistent_redis(tmp_path / "redis") as store, two_replicas(tmp_path, store) as (a, b):
        delays = []
        with api(a) as through_a, api(b) as through_b:
            # an override set through one replica is listed, and deleted, through the other
            made = through_a.post(
                "/v1/cpes/cpe-1/overrides", json={"kind": "freeze", "reason": "maintenance"}
            )
            assert made.status_code == 201, made.text
            override_id = made.json()["id"]
            delays.append(seen_within(lambda: override_id in override_ids(b), 10, "B lists it"))
            gone = through_b.delete(f"/v1/overrides/{override_id}", params={"reason": "done"})
            assert gone.status_code == 200, gone.text
            delays.append(seen_within(lambda: not override_ids(a), 10, "A drops it"))

            # conflicting overrides through the two at once: exactly one is stored
            for round_ in range(5):
                answers = race_freezes(through_a, through_b, round_)
                codes = sorted(r.status_code for r in answers.values())
                assert codes == [201, 409], {n: r.text for n, r in answers.items()}
                winner = next(r for r in answers.values() if r.status_code == 201).json()
                loser = next(r for r in answers.values() if r.status_code == 409).json()
                assert winner["id"] in loser["detail"], "the 409 names the winner"
                for xapp in (a, b):
                    wait_until(
                        lambda x=xapp, w=winner["id"]: override_ids(x) == {w},  # type: ignore[misc]
                        10,
                        "both list the one that won",
                    )
                # cleared through the replica that did not store it
                other = through_b if winner["reason"].startswith("a") else through_a
                cleared = other.delete(
                    f"/v1/overrides/{winner['id']}", params={"reason": "next round"}
                )
                assert cleared.status_code == 200, cleared.text
                wait_until(lambda: not override_ids(a) and not override_ids(b), 10, "cleared")

            # a CPE added through one replica is controlled by both; removed through the other
            new = {"id": "cpe-7", "accesses": {"nr": {"ue_id": "gnb-du:7"}}}
            added = through_a.post("/v1/cpes", json={"cpe": new, "reason": "new customer"})
            assert added.status_code == 201, added.text
            delays.append(seen_within(lambda: "cpe-7" in cpe_ids(b), 10, "B lists cpe-7"))
            frozen = through_b.post(
                "/v1/cpes/cpe-7/overrides", json={"kind": "freeze", "reason": "new, held"}
            )
            assert frozen.status_code == 201, "B takes overrides on a CPE added through A"
            cleared = through_b.delete(
                f"/v1/overrides/{frozen.json()['id']}", params={"reason": "go"}
            )
            assert cleared.status_code == 200
            removed = through_b.delete("/v1/cpes/cpe-7", params={"reason": "contract ended"})
            assert removed.status_code == 200, removed.text
            delays.append(seen_within(lambda: "cpe-7" not in cpe_ids(a), 10, "A drops cpe-7"))
        print(f"a change through one replica seen by the other after {max(delays):.2f} s at most")
        assert max(delays) <= PERIOD_S, delays
        for xapp in (a, b):
            code, _ = xapp.terminate_within(5)
            assert code == 0


def test_sdl_stalls_hold_neither_the_http_server_nor_a_refused_change(tmp_path: Path) -> None:
    with persistent_redis(tmp_path / "redis") as store, two_replicas(tmp_path, store) as (a, _):
        headers = {"Authorization": f"Bearer {OPERATOR}"}
        streams: list[httpx.Response] = []
        clients = [httpx.Client(base_url=a.http_url, headers=headers, timeout=30) for _ in range(4)]
        with contextlib.ExitStack() as stack:
            for client in clients:
                stack.enter_context(client)
                stream = stack.enter_context(
                    client.stream("GET", "/v1/events", params={"cpe_id": "cpe-1", "period_s": 0.2})
                )
                assert stream.status_code == 200
                streams.append(stream)
            with api(a) as alice:
                fresh = alice.get("/v1/overrides").headers[STATE_AGE_HEADER]
            assert float(fresh) < 1.0, "a quarter period old at most while SDL answers"
            redis_pid = store.processes[-1].pid
            os.kill(redis_pid, signal.SIGSTOP)
            try:
                # the change SDL cannot take gets 503 ...
                with api(a) as alice:
                    refused = alice.post(
                        "/v1/cpes/cpe-1/overrides",
                        json={"kind": "freeze", "reason": "while SDL stalls"},
                        timeout=30,
                    )
                assert refused.status_code == 503, refused.text
                # reads go on from memory, saying how old what they serve is
                with api(a) as alice:
                    listed = alice.get("/v1/overrides")
                assert listed.status_code == 200
                assert listed.json() == []
                assert float(listed.headers[STATE_AGE_HEADER]) >= 1.0
                # ... and the liveness probe answers all along, event streams open
                slowest = 0.0
                for _ in range(20):
                    began = time.monotonic()
                    alive = httpx.get(f"{a.http_url}/ric/v1/health/alive", timeout=1.0)
                    assert alive.status_code == 200
                    slowest = max(slowest, time.monotonic() - began)
                    time.sleep(0.05)
                print(f"liveness answered within {slowest * 1000:.0f} ms while SDL was frozen")
            finally:
                os.kill(redis_pid, signal.SIGCONT)
        # Redis runs what it had buffered when it resumes: the refused change must refuse itself
        client = redis.Redis(port=store.port)
        wait_until(lambda: client.ping(), 10, "Redis back")
        time.sleep(2 * PERIOD_S)  # a buffered write would have run by now; nothing to wait for
        stored = [k for k in client.keys("*") if b"operator/override/" in k]
        assert stored == [], "a change answered 503 went into the store after all"
        assert override_ids(a) == set()
        client.close()


def test_an_import_cut_by_a_redis_kill_is_stored_whole_or_not_at_all(tmp_path: Path) -> None:
    """3,000 CPEs imported through one replica, Redis killed (kill -9, its append-only file
    fsynced at every write) at three moments of the import: each time the store holds all of
    them or none, an import answered 201 is stored, and both replicas control what it holds."""
    with persistent_redis(tmp_path / "redis") as store, two_replicas(tmp_path, store) as (a, b):
        expected = {"cpe-1"}
        for attempt, kill_after_s in enumerate((0.3, 1.2, 2.2)):
            first = 100 + attempt * 3000
            cpes: list[dict[str, Any]] = [
                {"id": f"cpe-{n}", "accesses": {"wifi": {"station_mac": mac(n)}}}
                for n in range(first, first + 3000)
            ]
            answer = import_while_redis_dies(a, store, cpes, kill_after_s)
            client = redis.Redis(port=store.port)
            stored = {
                bytes(k).decode().rsplit("/", 1)[1]
                for k in client.keys("*")
                if b"operator/cpe/" in k
            }
            client.close()
            this = {c["id"] for c in cpes}
            print(f"killed after {kill_after_s} s: {answer}; {len(stored & this)} of 3000 stored")
            assert len(stored & this) in (0, len(this)), "an import stored in part"
            if answer == 201:
                assert stored >= this, "an import acknowledged and not stored"
            expected |= this & stored
            for xapp in (a, b):
                wait_until(
                    lambda x=xapp, e=frozenset(expected): cpe_ids_all(x) == e,  # type: ignore[misc]
                    60,
                    "each replica controls what the store holds",
                )


def import_while_redis_dies(
    xapp: Xapp, store: PersistentRedis, cpes: list[dict[str, Any]], kill_after_s: float
) -> int | str:
    """Import ``cpes`` and kill Redis that long after the request went; Redis is up again on
    its own data when this returns. The answer's status, or the error."""
    answer: dict[str, int | str] = {}

    def run() -> None:
        with api(xapp) as alice:
            try:
                reply = alice.post(
                    "/v1/cpes/import", json={"cpes": cpes, "reason": "migration"}, timeout=90
                )
                answer["status"] = reply.status_code
            except httpx.HTTPError as error:
                answer["status"] = repr(error)

    importer = threading.Thread(target=run)
    importer.start()
    time.sleep(kill_after_s)  # the moment of the kill is the point of the test, not a wait
    store.kill()
    importer.join(timeout=120)
    store.start()
    return answer.get("status", "no answer")


def mac(n: int) -> str:
    return f"02:00:00:{n >> 8:02x}:{n & 255:02x}:01"


def cpe_ids_all(xapp: Xapp) -> set[str]:
    found: set[str] = set()
    with api(xapp) as client:
        offset = 0
        while True:
            page = client.get("/v1/cpes", params={"offset": offset, "limit": 500}).json()
            found |= {c["cpe_id"] for c in page["items"]}
            offset += 500
            if offset >= page["total"]:
                return found


APPLIED = re.compile(r"applied downlink weights .* for (\S+) \(sequence \d+, owner epoch (\d+)\)")


def test_a_replica_stopped_past_its_lease_cannot_overwrite_its_successor(tmp_path: Path) -> None:
    """Replica A is stopped (SIGSTOP) past its leases; B takes A's CPEs over and pushes; A
    resumes. The proxy agent's log shows, per CPE, owner epochs that never go back: no set of
    A's lands after B's first, not even one A had under way when it stopped (replayed here
    as the network would deliver it late)."""
    scenario = tmp_path / "four.yaml"
    scenario.write_text(FOUR_CPES)
    ids = [f"cpe-{n}" for n in range(4)]
    with (
        persistent_redis(tmp_path / "redis") as store,
        agent_process(tmp_path, "proxy", "proxy", ids) as proxy,
    ):
        env = {"DBAAS_SERVICE_HOST": "127.0.0.1", "DBAAS_SERVICE_PORT": str(store.port)}
        config = write_xapp_config(tmp_path, str(scenario), {}, proxy.url, directions=["downlink"])
        a = start_xapp(tmp_path, config, {**env, "HOSTNAME": "replica-a"}, name="xapp-a")
        b = start_xapp(tmp_path, config, {**env, "HOSTNAME": "replica-b"}, name="xapp-b")
        simulators = [start_simulator(tmp_path, str(scenario), x.e2_port, 110) for x in (a, b)]
        try:
            share_a = {
                c for c in ids if assigned_replica(c, ["replica-a", "replica-b"]) == "replica-a"
            }
            assert share_a
            wait_until(lambda: controlled(a.log(), "replica-a") == share_a, 30, "A's share")
            wait_until(lambda: all(held_epoch(proxy, c) for c in share_a), 30, "A's first pushes")
            a_epochs = {c: held_epoch(proxy, c) for c in share_a}
            os.kill(a.process.pid, signal.SIGSTOP)
            try:
                wait_until(lambda: controlled(b.log(), "replica-b") == set(ids), 20, "take-over")
                wait_until(
                    lambda: all(held_epoch(proxy, c) > a_epochs[c] for c in share_a),
                    30,
                    "B's pushes for the CPEs it took over",
                )
                # a set A had under way, delivered late: refused, B's stays in force
                late = next(iter(sorted(share_a)))
                held = proxy.weights("downlink", late)
                assert held is not None
                refused = httpx.put(
                    f"{proxy.url}/v1/weights/downlink",
                    json={
                        "cpe_id": late,
                        "weights": {"nr": 1, "wifi": 1, "lifi": 1},
                        "sequence": (held["applied"]["sequence"] + 1) % 2**31,
                        "requested_by": "xapp",
                        "epoch": a_epochs[late],
                    },
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    timeout=10,
                )
                assert refused.status_code == 409, refused.text
                assert "another xApp replica has taken this CPE over" in refused.text
            finally:
                os.kill(a.process.pid, signal.SIGCONT)
            # A is back: it takes its share back (under newer epochs still) and pushes
            mark = len(a.log())
            wait_until(
                lambda: any(f"pushed {c} downlink" in a.log()[mark:] for c in share_a),
                30,
                "A pushing again",
            )
            for xapp in (a, b):
                code, _ = xapp.terminate_within(5)
                assert code == 0
        finally:
            for simulator in simulators:
                simulator.kill()
                simulator.wait()
            for xapp in (a, b):
                if xapp.process.poll() is None:
                    xapp.process.kill()
                    xapp.process.wait()
    seen: dict[str, int] = {}
    lines = 0
    for match in APPLIED.finditer((tmp_path / "proxy.log").read_text()):
        cpe_id, epoch = match.group(1), int(match.group(2))
        assert epoch >= seen.get(cpe_id, 0), f"an earlier owner's set landed for {cpe_id}"
        seen[cpe_id] = epoch
        lines += 1
    assert lines >= 2 * len(share_a)


def held_epoch(agent: Agent, cpe_id: str) -> int:
    held = agent.weights("downlink", cpe_id)
    return 0 if held is None else int(held["applied"].get("epoch", 0))


def test_the_replicas_bench_runs_and_finds_every_cpe_leased(tmp_path: Path) -> None:
    """`atsss bench replicas`, small: its looks and overrides are what its figures say."""
    result = run_replicas(tmp_path, cpes=120, replicas=2, checks=3, overrides=4)
    assert result.checks == 3
    assert result.looks_all_leased == 3, result
    assert sum(result.share.values()) == 120
    assert all(count > 0 for count in result.share.values())
    assert result.overrides_lost == 0, result.notes
    assert result.override_p99_s is not None
