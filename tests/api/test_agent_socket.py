"""`ws/agent/`: token-authenticated, no Origin needed, only the agent's own requests."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator

from agents.services import issue_token
from approvals import services
from approvals.states import Kind
from controlplane.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def _submit(agent):
    return services.submit(services.Submission(kind=Kind.ACTION, action_type="update_document",
                                               params={"text": "v2"}), agent=agent)


async def _connect(path: str, headers=None) -> tuple[WebsocketCommunicator, bool, int | None]:
    communicator = WebsocketCommunicator(application, path, headers=headers or [])
    connected, code = await communicator.connect()
    return communicator, connected, code


def test_the_socket_pushes_the_agents_own_decisions(agent, rival_agent, token, people):
    mine, theirs = _submit(agent), _submit(rival_agent)

    async def scenario() -> list[dict]:
        socket, connected, _ = await _connect("/ws/agent/", [(b"authorization", f"Bearer {token}".encode())])
        assert connected
        await sync_to_async(services.reject)(theirs.pk, actor=services.Person(people["alice"]), feedback="theirs")
        await sync_to_async(services.reject)(mine.pk, actor=services.Person(people["alice"]), feedback="mine")
        received = [await socket.receive_json_from(timeout=5)]
        assert await socket.receive_nothing(timeout=0.3)
        await socket.send_json_to({"type": "ping"})
        received.append(await socket.receive_json_from(timeout=5))
        await socket.disconnect()
        return received

    change, pong = async_to_sync(scenario)()
    assert change["event"] == "request.changed" and change["request_id"] == str(mine.pk)
    assert change["state"] == "rejected" and change["resume_data"] == {"action": "rejected", "feedback": "mine"}
    assert pong == {"event": "pong"}


def test_a_token_query_parameter_works_too(agent, token):
    async def scenario() -> bool:
        socket, connected, _ = await _connect(f"/ws/agent/?token={token}")
        await socket.disconnect()
        return connected

    assert async_to_sync(scenario)()


@pytest.mark.parametrize("path", ["/ws/agent/", "/ws/agent/?token=cp_x_y"])
def test_no_or_a_bad_token_is_refused(db, path):
    async def scenario():
        socket, connected, code = await _connect(path)
        await socket.disconnect()
        return connected, code

    assert async_to_sync(scenario)() == (False, 4001)


def test_a_token_without_read_scope_is_refused(agent):
    secret = issue_token(agent, scopes=["submit"]).secret

    async def scenario():
        socket, connected, code = await _connect(f"/ws/agent/?token={secret}")
        await socket.disconnect()
        return connected, code

    assert async_to_sync(scenario)() == (False, 4003)
