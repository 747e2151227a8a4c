"""Many CPE agents in one process, for fleet benchmarks: each a real agent (``agent.api``'s app
over a ``WeightService`` with the dry-run backend) under its own path prefix, ``/a/<cpe id>``,
or a hostile one that misbehaves the way agents on customer premises do.

Kinds (the xApp reaches each as ``http://HOST:PORT/a/<cpe id>``):

- ``good``: a real agent;
- ``wrong-token``: a real agent whose token is not the xApp's (every call 401);
- ``hung``: reads the request and never answers;
- ``trickle``: answers 200 and then its body one byte every 1.5 s;
- ``endless``: answers 200 and then a body that never ends;
- ``event-flood``: a real agent whose ``/v1/events`` answers at once, each time, with 50,000
  carrier flips;
- ``down``: not served here at all (the xApp is given a closed port for it).

Run as ``python -m bench.agent_host CONFIG.json``; it prints its port on stdout once it listens,
and answers ``GET /host/weights`` with what every good agent holds (the bench's ground truth).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import tempfile
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastapi.routing
import uvicorn

from agent.api import create_app
from agent.backends.dry_run import DryRunBackend
from agent.config import AgentConfig
from agent.service import WeightService

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

KINDS = ("good", "wrong-token", "hung", "trickle", "endless", "event-flood", "down")
HOSTILE = tuple(k for k in KINDS if k != "good")
FLOOD_EVENTS = 50_000


@dataclass
class Instance:
    cpe_id: str
    kind: str
    token: str
    config: AgentConfig
    app: Any = None
    service: WeightService | None = None


@dataclass
class AgentHost:
    instances: dict[str, Instance]
    flood_body: bytes = field(default=b"")

    def __post_init__(self) -> None:
        events = [
            {
                "sequence": n,
                "access": "lifi",
                "event": "carrier lost" if n % 2 else "carrier back",
                "result": "flap",
                "at_s": 0.0,
                "carrier_up": n % 2 == 0,
            }
            for n in range(1, FLOOD_EVENTS + 1)
        ]
        self.flood_body = json.dumps(
            {"instance": "flood", "latest": FLOOD_EVENTS, "events": events}
        ).encode()

    def real_app(self, instance: Instance) -> Any:
        if instance.app is None:
            instance.service = WeightService(instance.config, DryRunBackend())
            instance.app = create_app(instance.service, instance.token)
        return instance.app

    def held(self) -> dict[str, Any]:
        """What each good agent holds (None: nothing yet)."""
        found: dict[str, Any] = {}
        for cpe_id, instance in self.instances.items():
            if instance.kind != "good":
                continue
            applied = None if instance.service is None else instance.service.applied(cpe_id)
            found[cpe_id] = None if applied is None else applied.__dict__
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if path == "/host/weights":
            # ?cpe_id=X: that CPE's alone (the bench polls one often while an override travels).
            query = scope.get("query_string", b"").decode()
            held = self.held()
            if query.startswith("cpe_id="):
                wanted = query.removeprefix("cpe_id=")
                held = {wanted: held.get(wanted)}
            await _answer(send, 200, json.dumps(held).encode())
            return
        _, prefix, cpe_id, rest = [*path.split("/", 3), "", "", ""][:4]
        instance = self.instances.get(cpe_id) if prefix == "a" else None
        if instance is None:
            await _answer(send, 404, b'{"detail": "no such agent here"}')
            return
        kind = instance.kind
        if kind in ("hung", "trickle", "endless"):
            await _until_disconnected(_HOSTILE[kind](send), receive)
        elif kind == "event-flood" and rest.startswith("v1/events"):
            await _answer(send, 200, self.flood_body)
        else:
            inner = dict(scope, path="/" + rest, raw_path=("/" + rest).encode())
            await self.real_app(instance)(inner, receive, send)


async def _hung(send: Send) -> None:
    await asyncio.Event().wait()  # never answers


async def _trickle(send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    for byte in b'{"status": "ok", "lever": "weights"}':
        await asyncio.sleep(1.5)
        await send({"type": "http.response.body", "body": bytes([byte]), "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def _endless(send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    chunk = b"x" * 65536
    while True:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await asyncio.sleep(0.001)


_HOSTILE: dict[str, Callable[[Send], Awaitable[None]]] = {
    "hung": _hung,
    "trickle": _trickle,
    "endless": _endless,
}


async def _until_disconnected(behaviour: Awaitable[None], receive: Receive) -> None:
    """Misbehave until the client gives up (then stop: the server would not tell us)."""
    task = asyncio.ensure_future(behaviour)
    while not task.done():
        message = await receive()
        if message["type"] == "http.disconnect":
            task.cancel()
            break
    with contextlib.suppress(asyncio.CancelledError, OSError):
        await task


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def instance_config(cpe_id: str, state_dir: Path) -> AgentConfig:
    """A CPE agent on loopback (the dry-run backend takes loopback's address for every access)."""
    return AgentConfig.model_validate(
        {
            "role": "cpe",
            "cpe_id": cpe_id,
            "accesses": {
                access: {"interface": f"{access}0", "address": "127.0.0.1"}
                for access in ("nr", "wifi", "lifi")
            },
            "state_file": str(state_dir / f"{cpe_id}.json"),
            "backend": "dry-run",
            "watch_carrier": False,
        }
    )


def load_host(document: dict[str, Any], state_dir: Path) -> AgentHost:
    instances = {
        cpe_id: Instance(cpe_id, spec["kind"], spec["token"], instance_config(cpe_id, state_dir))
        for cpe_id, spec in document["instances"].items()
        if spec["kind"] != "down"
    }
    host = AgentHost(instances)
    for instance in instances.values():  # now, not on the event loop at the first request
        if instance.kind in ("good", "wrong-token", "event-flood"):
            _warm(host.real_app(instance))
    return host


def _warm(app: Any) -> None:
    """FastAPI reads an endpoint's source (to name it in error messages) at the endpoint's first
    request, once per endpoint function: a millisecond or so, nothing for one agent, but a
    thousand agents' apps in one process would spend seconds of the run's first moments on it.
    Done here, before the port is told. Private to FastAPI: where it is gone, nothing to do."""
    extract = getattr(fastapi.routing, "_extract_endpoint_context", None)
    if extract is None:
        return
    for route in app.routes:
        endpoint = getattr(route, "endpoint", None)
        if isinstance(route, fastapi.routing.APIRoute) and endpoint is not None:
            extract(route.dependant.call or endpoint)


def main() -> None:
    document = json.loads(Path(sys.argv[1]).read_text())
    state_dir = Path(tempfile.mkdtemp(prefix="atsss-agent-host-"))
    # Every real agent made (and warmed) before the port is told: a thousand apps take seconds
    # of CPU that would otherwise fall on the first seconds of the run the bench measures.
    host = load_host(document, state_dir)
    sock = socket.create_server(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(
        host, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, backlog=4096
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
