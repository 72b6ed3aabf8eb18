"""Against a real daphne process: a revoked token's socket and a deactivated
reviewer's socket are closed by the server (the close message travels through
the shared Redis channel layer from the process that made the change), and
`ws/reviewer/` refuses the server's host on another port as its Origin."""

from __future__ import annotations

import asyncio

import pytest
import websockets

from agents.models import AgentToken
from agents.services import issue_token, revoke_token
from tests.live import DaphneServer, free_port

from .conftest import cookie_header, session_cookies

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HANG = 10  # seconds; bounds a hang only


@pytest.fixture
def server(services_up, django_db_blocker):
    with django_db_blocker.unblock():
        started = DaphneServer()
    yield started
    started.stop()


async def _closed_code(socket) -> int:
    with pytest.raises(websockets.ConnectionClosed) as closed:
        while True:
            await asyncio.wait_for(socket.recv(), HANG)
    return closed.value.rcvd.code if closed.value.rcvd else -1


def test_revoking_a_token_closes_the_agents_live_socket(server, agent):
    issued = issue_token(agent)
    row = AgentToken.objects.get(prefix=issued.secret.split("_")[1])

    async def scenario() -> int:
        async with websockets.connect(
            f"{server.ws_url}/ws/agent/",
            open_timeout=HANG,
            additional_headers={"Authorization": f"Bearer {issued.secret}"},
        ) as socket:
            await socket.send('{"type": "ping"}')
            assert "pong" in await asyncio.wait_for(socket.recv(), HANG)
            await asyncio.to_thread(revoke_token, row)
            return await _closed_code(socket)

    assert asyncio.run(scenario()) == 4001


def test_deactivating_a_reviewer_closes_their_live_socket(server, people):
    alice = people["alice"]
    headers = {"Cookie": cookie_header(session_cookies(alice))}

    def deactivate() -> None:
        alice.is_active = False
        alice.save()

    async def scenario() -> int:
        async with websockets.connect(
            f"{server.ws_url}/ws/reviewer/", origin=server.url, additional_headers=headers, open_timeout=HANG
        ) as socket:
            await socket.send('{"type": "ping"}')
            assert "pong" in await asyncio.wait_for(socket.recv(), HANG)
            await asyncio.to_thread(deactivate)
            return await _closed_code(socket)

    assert asyncio.run(scenario()) == 4001


def test_the_same_host_on_another_port_is_not_the_servers_origin(server, people):
    headers = {"Cookie": cookie_header(session_cookies(people["bob"]))}
    other_port = f"http://127.0.0.1:{free_port()}"

    async def scenario() -> None:
        with pytest.raises(websockets.InvalidStatus):
            await websockets.connect(
                f"{server.ws_url}/ws/reviewer/", origin=other_port, additional_headers=headers, open_timeout=HANG
            )

    asyncio.run(scenario())
