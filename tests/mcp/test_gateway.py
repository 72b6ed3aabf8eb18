"""The MCP gateway, piece 1, end to end: the SDK's own client talks to `/mcp/` on a
real daphne, which talks to the real demo upstream over stdio.

A client lists the upstream's tools namespaced by server, the prohibited one
absent; a low call is auto-approved, claimed and completed as the agent and
returns the upstream's result; a prohibited call is refused naming its rule and
never reaches the upstream; a held call waits for reviewers; a bad token is
refused with the API's JSON error; and while the emergency stop is on, a low call
is not forwarded.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agents.models import AgentToken
from agents.services import issue_token, revoke_token
from approvals.emergency import set_emergency_stop
from approvals.models import ApprovalRequest
from approvals.states import State
from audit.models import AuditEvent

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]

# Both eras the SDK speaks: the 2025 initialize handshake, and 2026-07-28 found by probing.
ERAS = ["legacy", "auto"]


@asynccontextmanager
async def gateway(server, token: str, *, mode: str = "auto"):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60))
    async with http, Client(streamable_http_client(f"{server.url}/mcp/", http_client=http), mode=mode, cache=None) as c:
        yield c


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 120))


def text_of(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


@pytest.mark.parametrize("mode", ERAS)
def test_a_client_lists_the_upstream_tools_by_server_without_the_prohibited_one(
    gateway_server, token, gateway_rules, mode
):
    async def listing():
        async with gateway(gateway_server, token, mode=mode) as client:
            return client.protocol_version, (await client.list_tools()).tools

    version, listed = run(listing())
    tools = {tool.name: tool for tool in listed}

    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert set(tools) == {
        "demo.echo",
        "demo.add",
        "demo.send_note",
        "demo.crash",
        "demo.environment",
        "demo.slow_note",
        "demo.redefine",
    }
    assert tools["demo.add"].input_schema["properties"].keys() == {"a", "b"}
    assert tools["demo.echo"].annotations.read_only_hint is True
    assert tools["demo.echo"].description == "Say `text` back."


@pytest.mark.parametrize("mode", ERAS)
def test_a_low_call_runs_once_upstream_through_the_handshake(
    gateway_server, token, gateway_rules, upstream_calls, mode
):
    async def call():
        async with gateway(gateway_server, token, mode=mode) as client:
            return await client.call_tool("demo.add", {"a": 2, "b": 3})

    result = run(call())

    assert not result.is_error
    assert text_of(result) == "5"
    assert upstream_calls() == [("add", {"a": 2, "b": 3})]
    request = ApprovalRequest.objects.get(action_type="demo.add")
    assert request.state == State.SUCCEEDED
    assert request.resolution_code == "succeeded"
    assert request.current_params() == {"a": 2, "b": 3}
    assert request.target["mcp_server"] == "demo" and len(request.target["definition_sha256"]) == 64
    assert request.declared == {
        "readOnlyHint": True,
        "destructiveHint": True,  # the demo leaves it out: the spec's cautious default
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert set(request.result) == {"sha256", "bytes", "is_error"}  # a digest, not the body
    verbs = list(AuditEvent.objects.filter(request_id=request.pk).order_by("seq").values_list("verb", flat=True))
    assert verbs[0] == "request.submitted" and "request.execution_claimed" in verbs and verbs[-1] == "request.succeeded"


def test_a_prohibited_call_names_its_rule_and_never_reaches_the_upstream(
    gateway_server, token, gateway_rules, upstream_calls
):
    async def call():
        async with gateway(gateway_server, token) as client:
            return await client.call_tool("demo.delete_everything", {"confirm": True})

    result = run(call())

    assert result.is_error
    assert "demo_wipe_prohibited" in text_of(result) and "not run" in text_of(result)
    assert upstream_calls() == []
    assert ApprovalRequest.objects.get(action_type="demo.delete_everything").state == State.REJECTED


def test_a_held_call_waits_for_reviewers_and_is_not_run(gateway_server, token, gateway_rules, upstream_calls):
    async def call():
        async with gateway(gateway_server, token) as client:
            return await client.call_tool("demo.send_note", {"to": "dana", "text": "hi"})

    result = run(call())

    request = ApprovalRequest.objects.get(action_type="demo.send_note")
    assert request.state == State.PENDING_APPROVAL
    assert result.is_error and f"Pending approval, request {request.pk}: call again" in text_of(result)
    assert upstream_calls() == []


def test_while_the_emergency_stop_is_on_a_low_call_is_not_forwarded(
    gateway_server, token, gateway_rules, upstream_calls
):
    set_emergency_stop(on=True, reason="drill")

    async def call():
        async with gateway(gateway_server, token) as client:
            return await client.call_tool("demo.echo", {"text": "hello"})

    result = run(call())

    assert result.is_error and "emergency stop" in text_of(result)
    assert upstream_calls() == []
    assert ApprovalRequest.objects.get(action_type="demo.echo").state == State.PENDING_APPROVAL


def _post(server, headers: dict) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    base["MCP-Protocol-Version"] = "2025-11-25"
    return httpx2.post(f"{server.url}/mcp/", content=json.dumps(body), headers={**base, **headers}, timeout=30)


def test_a_bad_missing_or_revoked_token_is_refused_with_the_apis_json_error(gateway_server, agent, token):
    unknown = _post(gateway_server, {"Authorization": "Bearer cp_nope_nope"})
    missing = _post(gateway_server, {})
    revoked_secret = issue_token(agent).secret
    revoke_token(AgentToken.objects.get(prefix=revoked_secret.split("_")[1]))
    revoked = _post(gateway_server, {"Authorization": f"Bearer {revoked_secret}"})
    read_only = _post(gateway_server, {"Authorization": f"Bearer {issue_token(agent, scopes=['read']).secret}"})

    assert (unknown.status_code, unknown.json()["code"]) == (401, "invalid_token")
    assert unknown.headers["www-authenticate"].startswith("Bearer")
    assert (missing.status_code, missing.json()["code"]) == (401, "not_authenticated")
    assert (revoked.status_code, revoked.json()["code"]) == (401, "token_revoked")
    assert (read_only.status_code, read_only.json()["code"]) == (403, "insufficient_scope")
    assert _post(gateway_server, {"Authorization": f"Bearer {token}"}).status_code == 200


def test_a_foreign_host_or_a_browser_origin_is_refused_even_with_a_good_token(gateway_server, token):
    """DNS rebinding: a page on another name that resolves to this server, or any page's Origin."""
    auth = {"Authorization": f"Bearer {token}"}

    assert _post(gateway_server, {**auth, "Host": "attacker.example"}).status_code == 421
    assert _post(gateway_server, {**auth, "Origin": "http://attacker.example"}).status_code == 403


def test_an_upstream_lost_during_a_call_ends_outcome_unknown_and_is_not_called_again(
    gateway_server, token, gateway_rules, upstream_calls
):
    async def calls():
        async with gateway(gateway_server, token) as client:
            lost = await client.call_tool("demo.crash", {"text": "now"})
            after = await client.call_tool("demo.echo", {"text": "still here"})
            return lost, after

    lost, after = run(calls())

    request = ApprovalRequest.objects.get(action_type="demo.crash")
    assert lost.is_error and "whether it ran is unknown" in text_of(lost)
    assert (request.state, request.resolution_code) == (State.FAILED, "outcome_unknown")
    assert text_of(after) == "echo: still here"  # the next call starts the upstream again
    assert [tool for tool, _ in upstream_calls()] == ["crash", "echo"]
