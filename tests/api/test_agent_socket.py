"""`ws/agent/`: token-authenticated, no Origin needed, only the agent's own requests."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.utils import timezone

from agents.models import AgentToken
from agents.services import issue_token, revoke_token
from approvals import services
from approvals.states import Kind
from controlplane.asgi import application
from tests.api.conftest import bearer
from tests.sockets import open_socket, refused_socket

pytestmark = pytest.mark.django_db(transaction=True)


def _submit(agent):
    return services.submit(
        services.Submission(kind=Kind.ACTION, action_type="update_document", params={"text": "v2"}), agent=agent
    )


def test_the_socket_pushes_the_agents_own_decisions(agent, rival_agent, token, people):
    mine, theirs = _submit(agent), _submit(rival_agent)

    async def scenario() -> list[dict]:
        async with open_socket(
            application, "/ws/agent/", headers=[(b"authorization", f"Bearer {token}".encode())]
        ) as socket:
            await sync_to_async(services.reject)(
                theirs.pk, revision=1, actor=services.Person(people["alice"]), feedback="theirs"
            )
            await sync_to_async(services.reject)(
                mine.pk, revision=1, actor=services.Person(people["alice"]), feedback="mine"
            )
            # Pushes arrive in order: had the rival's decision leaked, it would come first.
            received = [await socket.receive_json_from(timeout=5)]
            # And nothing else is queued for this agent: the next thing it hears answers its ping.
            await socket.send_json_to({"type": "ping"})
            received.append(await socket.receive_json_from(timeout=5))
        return received

    change, pong = async_to_sync(scenario)()
    assert change["event"] == "request.changed" and change["request_id"] == str(mine.pk)
    assert change["state"] == "rejected" and change["resume_data"] == {"action": "rejected", "feedback": "mine"}
    assert pong == {"event": "pong"}


def test_a_token_query_parameter_works_too(agent, token):
    async def scenario() -> None:
        async with open_socket(application, f"/ws/agent/?token={token}") as socket:
            await socket.send_json_to({"type": "ping"})
            assert await socket.receive_json_from(timeout=5) == {"event": "pong"}

    async_to_sync(scenario)()


@pytest.mark.parametrize("path", ["/ws/agent/", "/ws/agent/?token=cp_x_y"])
def test_no_or_a_bad_token_is_refused(db, path):
    assert async_to_sync(refused_socket)(application, path) == 4001


def test_a_token_without_read_scope_is_refused(agent):
    secret = issue_token(agent, scopes=["submit"]).secret
    assert async_to_sync(refused_socket)(application, f"/ws/agent/?token={secret}") == 4003


# --- The socket follows its token ----------------------------------------------------------------

BEARER_TIMEOUT = 5  # bounds a hang only


def _bearer(secret: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {secret}".encode())]


def _issued(agent):
    issued = issue_token(agent)
    return issued.secret, AgentToken.objects.get(agent=agent, prefix=issued.secret.split("_")[1])


def test_revoking_the_token_closes_its_socket(agent):
    secret, row = _issued(agent)

    async def scenario() -> dict:
        async with open_socket(application, "/ws/agent/", headers=_bearer(secret)) as socket:
            await sync_to_async(revoke_token)(row)
            return await socket.receive_output(timeout=BEARER_TIMEOUT)

    assert async_to_sync(scenario)() == {"type": "websocket.close", "code": 4001}
    assert bearer(secret).get("/api/v1/requests/").status_code == 401  # what REST says too


def test_deactivating_the_agent_closes_its_sockets(agent):
    secret, _ = _issued(agent)

    async def scenario() -> dict:
        async with open_socket(application, "/ws/agent/", headers=_bearer(secret)) as socket:
            agent.is_active = False
            await sync_to_async(agent.save)()
            return await socket.receive_output(timeout=BEARER_TIMEOUT)

    assert async_to_sync(scenario)()["type"] == "websocket.close"


def test_a_socket_whose_close_message_was_dropped_closes_at_its_next_recheck(agent, settings):
    settings.SOCKET_RECHECK_SECONDS = 0.1
    secret, row = _issued(agent)

    async def scenario() -> dict:
        async with open_socket(application, "/ws/agent/", headers=_bearer(secret)) as socket:
            # An update sends no signal: as if the close message had been lost.
            await sync_to_async(AgentToken.objects.filter(pk=row.pk).update)(revoked_at=timezone.now())
            return await socket.receive_output(timeout=BEARER_TIMEOUT)

    assert async_to_sync(scenario)() == {"type": "websocket.close", "code": 4001}


def test_a_revoked_token_hears_no_decision_even_before_its_recheck(agent, people):
    secret, row = _issued(agent)
    mine = _submit(agent)

    async def scenario() -> dict:
        async with open_socket(application, "/ws/agent/", headers=_bearer(secret)) as socket:
            await sync_to_async(AgentToken.objects.filter(pk=row.pk).update)(revoked_at=timezone.now())
            await sync_to_async(services.approve)(mine.pk, revision=1, actor=services.Person(people["alice"]))
            return await socket.receive_output(timeout=BEARER_TIMEOUT)

    assert async_to_sync(scenario)() == {"type": "websocket.close", "code": 4001}
