"""What an agent might try through the gateway, and what it gets.

Every HTTP request is authenticated on its own, so a token revoked (or an agent
deactivated) in the middle of a session stops the next request; names are matched
against the upstream's own listing, so no spelling reaches a hidden tool; arguments
are the only thing forwarded; and an oversized body is refused before it is read.
"""

from __future__ import annotations

import json

import httpx2
import pytest
from mcp import MCPError

from agents.mcp_gateway.config import Upstream
from agents.mcp_gateway.upstreams import UpstreamError, UpstreamPool
from agents.models import AgentToken
from agents.services import issue_token, revoke_token
from approvals.emergency import set_emergency_stop
from approvals.models import ApprovalRequest

from .test_gateway import _post, gateway, run, text_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]


def test_a_token_revoked_mid_session_stops_the_next_request(gateway_server, agent, gateway_rules, upstream_calls):
    secret = issue_token(agent).secret

    async def scenario():
        async with gateway(gateway_server, secret, mode="legacy") as client:
            await client.list_tools()
            await _in_thread(lambda: revoke_token(AgentToken.objects.get(prefix=secret.split("_")[1])))
            with pytest.raises(MCPError):  # the SDK's word for an HTTP error answer
                await client.call_tool("demo.echo", {"text": "after revocation"})

    run(scenario())

    answer = _post(gateway_server, {"Authorization": f"Bearer {secret}"})
    assert (answer.status_code, answer.json()["code"]) == (401, "token_revoked")
    assert upstream_calls() == []
    assert not ApprovalRequest.objects.exists()


def test_a_deactivated_agent_is_refused(gateway_server, agent, token):
    agent.is_active = False
    agent.save()

    answer = _post(gateway_server, {"Authorization": f"Bearer {token}"})

    assert (answer.status_code, answer.json()["code"]) == (401, "agent_inactive")


@pytest.mark.parametrize(
    "name", ["DEMO.delete_everything", "demo.Delete_Everything", "demo.delete_everything ", "demo", "other.echo"]
)
def test_no_spelling_of_a_name_reaches_a_tool_the_listing_does_not_offer(
    gateway_server, token, gateway_rules, upstream_calls, name
):
    async def call():
        async with gateway(gateway_server, token) as client:
            return await client.call_tool(name, {"confirm": True})

    result = run(call())

    assert result.is_error and "no tool" in text_of(result)
    assert upstream_calls() == []


def test_the_agents_own_stop_holds_its_low_calls(gateway_server, agent, token, gateway_rules, upstream_calls):
    set_emergency_stop(on=True, agent=agent, reason="this agent only")

    async def call():
        async with gateway(gateway_server, token) as client:
            return await client.call_tool("demo.echo", {"text": "hello"})

    result = run(call())

    assert "emergency stop" in text_of(result) and upstream_calls() == []


def test_only_the_arguments_are_forwarded_never_the_clients_meta(gateway_server, token, gateway_rules, upstream_calls):
    async def call():
        async with gateway(gateway_server, token) as client:
            return await client.call_tool("demo.echo", {"text": "plain"}, meta={"progressToken": "x", "evil": "1"})

    assert text_of(run(call())) == "echo: plain"
    assert upstream_calls() == [("echo", {"text": "plain"})]


def test_an_oversized_body_is_refused_before_it_is_read(gateway_server, token, settings):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "demo.echo"}}
    body["params"]["arguments"] = {"text": "x" * (settings.API_MAX_BODY_BYTES + 1)}

    answer = httpx2.post(
        f"{gateway_server.url}/mcp/",
        content=json.dumps(body),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        timeout=30,
    )

    assert answer.status_code == 413


def test_an_http_upstream_off_the_outbound_allow_list_is_never_called(settings):
    settings.OUTBOUND_URL_ALLOWLIST = ["https://tools.example.com"]
    pool = UpstreamPool((Upstream("metadata", "http", url="http://169.254.169.254/mcp/"),))

    async def listing():
        import anyio

        async with anyio.create_task_group() as group:
            pool.group = group
            try:
                await pool.list_tools("metadata")
            except UpstreamError as refused:
                return refused
            finally:
                pool.close()

    assert "is not on the outbound allow-list" in str(run(listing()))


async def _in_thread(fn, *args):
    import asyncio

    return await asyncio.to_thread(fn, *args)


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_only_post_is_served_so_no_stream_hangs_open(gateway_server, token, method):
    answer = httpx2.request(
        method,
        f"{gateway_server.url}/mcp/",
        headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"},
        timeout=10,
    )

    assert (answer.status_code, answer.json()["code"], answer.headers["allow"]) == (405, "method_not_allowed", "POST")


def test_a_stdio_upstream_gets_none_of_the_servers_secrets(gateway_server, token, gateway_rules):
    """Only the variables its `env` names (and the SDK's minimal defaults) reach the upstream."""

    async def call():
        async with gateway(gateway_server, token) as client:
            return await client.call_tool("demo.environment", {})

    names = set(run(call()).structured_content["result"])

    assert "DEMO_UPSTREAM_CALLS_FILE" in names
    assert not names & {"DATABASE_URL", "SECRET_KEY", "AUDIT_SIGNING_KEY", "AUDIT_HMAC_KEY", "REDIS_URL"}
