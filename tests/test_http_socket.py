"""The xApp's HTTP socket: connections accepted on it send without Nagle's delay.

Before: the socket was made with protocol 0, asyncio did not set TCP_NODELAY on its
connections, and every keep-alive request to the xApp waited about 40 ms for the client's
delayed ACK between the response's headers and body (`atsss bench api` prints the latency).
"""

from __future__ import annotations

import asyncio
import socket

from xapp.service import http_listening_socket


def test_connections_accepted_on_the_http_socket_have_nodelay() -> None:
    async def accepted_nodelay() -> int:
        listening = http_listening_socket("127.0.0.1", 0)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

        server = await asyncio.get_running_loop().create_server(Probe, sock=listening)
        port = listening.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(seen, timeout=10)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(accepted_nodelay()) != 0
