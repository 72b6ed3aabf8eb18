"""Driving a consumer in-process with channels' `WebsocketCommunicator`.

    async with open_socket(application, "/ws/agent/", headers=[(b"authorization", b"Bearer ...")]) as socket:
        await socket.receive_json_from(timeout=5)

`open_socket` connects, asserts the consumer accepted, and always disconnects
(as Channels' own tests do), whatever the block raises. `refused_socket` connects
one the consumer must refuse and returns the close code it was refused with.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from channels.testing import WebsocketCommunicator

__all__ = ["open_socket", "refused_socket"]

Headers = Iterable[tuple[bytes, bytes]]


@asynccontextmanager
async def open_socket(application, path: str, *, headers: Headers = ()) -> AsyncIterator[WebsocketCommunicator]:
    """A connected socket on `path`, disconnected when the block ends."""
    communicator = WebsocketCommunicator(application, path, headers=list(headers))
    connected, code = await communicator.connect()
    try:
        assert connected, f"{path} refused the socket (close code {code})"
        yield communicator
    finally:
        await communicator.disconnect()


async def refused_socket(application, path: str, *, headers: Headers = ()) -> int:
    """Connect a socket that must be refused; the close code it was refused with (1000 if none was given)."""
    communicator = WebsocketCommunicator(application, path, headers=list(headers))
    try:
        connected, code = await communicator.connect()
    finally:
        await communicator.disconnect()
    assert not connected, f"{path} accepted a socket it must refuse"
    return code
