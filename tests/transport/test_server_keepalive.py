"""A server pings every connection it accepted (`kraft.transport.channels.SERVER_KEEPALIVE_MS`)
and closes one whose client stopped answering: a connection its client abandoned while a
partition dropped the FIN does not stay open for hours, one descriptor per cut.

The client here is a raw socket speaking just enough HTTP/2 (the preface, SETTINGS and its
acknowledgement, PING acknowledgements) to answer the server's first pings and then fall
silent, as a host behind a cut does; the keepalive is shortened so the test is fast."""

from __future__ import annotations

import asyncio
import struct

import grpc

from kraft.transport.channels import bind, server_options

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_SETTINGS, _PING, _GOAWAY = 0x4, 0x6, 0x7
_ACK = 0x1
ANSWERED = 3
"""Pings answered before falling silent: a connection without calls stays watched."""


def _frame(kind: int, flags: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags, 0) + payload


async def _silent_client(port: int) -> tuple[int, bool]:
    """Answer `ANSWERED` pings, then none; (pings answered, whether the server closed)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_PREFACE + _frame(_SETTINGS, 0))
    answered = 0
    try:
        while True:
            header = await reader.readexactly(9)
            length = int.from_bytes(header[:3], "big")
            kind, flags = header[3], header[4]
            payload = await reader.readexactly(length)
            if kind == _SETTINGS and not flags & _ACK:
                writer.write(_frame(_SETTINGS, _ACK))
            elif kind == _PING and not flags & _ACK and answered < ANSWERED:
                writer.write(_frame(_PING, _ACK, payload))
                answered += 1
            elif kind == _GOAWAY:
                return answered, True
    except (asyncio.IncompleteReadError, ConnectionError):
        return answered, True
    finally:
        writer.close()


def test_a_server_closes_a_connection_whose_client_stopped_answering_its_pings() -> None:
    async def main() -> tuple[int, bool]:
        server = grpc.aio.server(options=server_options(keepalive_ms=100, keepalive_timeout_ms=300))
        port = bind(server, "127.0.0.1:0")
        await server.start()
        try:
            return await asyncio.wait_for(_silent_client(port), 10)
        finally:
            await server.stop(None)

    answered, closed = asyncio.run(main())
    assert answered == ANSWERED
    assert closed
