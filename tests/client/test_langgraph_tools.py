"""A real LangGraph graph (checkpointer, interrupt, Command(resume=...)) whose tool node runs
through `hitl_controlplane.client.langgraph_tools.approved_tool_call`, against a real daphne.

The model is scripted (tests/client/langgraph_host.py); reviewers decide through the
reviewer JSON API. What a user depends on: an approved call runs once with the approved
(or edited) params and ends succeeded with its result's digest in the audit log; the same
checkpoint resumed twice, in one process or two, runs it once; a claim answer altered in
transit runs nothing; a host killed between claim and complete ends failed/outcome_unknown
and is never run again; a rejection's feedback is what the model reads.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import httpx
import pytest
from langgraph.types import Command

from approvals import policy
from approvals.execution import runner
from approvals.models import ApprovalRequest
from approvals.people import Person
from audit.chain import digest
from audit.models import AuditEvent
from hitl_controlplane.client import AsyncControlPlane, ControlPlane, DecisionRefused
from hitl_controlplane.client.langgraph_tools import aanswer_approvals, answer_approvals
from tests.client import langgraph_host
from tests.live import ROOT
from tests.scale.conftest import csrf_headers, session_cookies

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HOST = ROOT / "tests" / "client" / "langgraph_host.py"
# Only bounds how long a broken test hangs; no assertion depends on how long anything takes.
HANG_GUARD_SECONDS = 60


@pytest.fixture
def langgraph_transfer_rule(admin_user):
    rule = {
        "name": "lg_transfers",
        "priority": 5,
        "action_type": "transfer_funds",
        "risk_level": "high",
        "required_approvals": 1,
        "editable_params": ["amount"],
        "conditions": [],
    }
    return policy.save_rule(rule, actor=Person(admin_user), note="LangGraph tool test")


def decide(server_url: str, reviewer, request_id: str, **decision) -> None:
    cookies = session_cookies(reviewer)
    revision = ApprovalRequest.objects.get(pk=request_id).current_revision
    response = httpx.post(
        f"{server_url}/api/v1/requests/{request_id}/decisions/",
        json={"revision": revision, **decision},
        headers=csrf_headers(cookies),
        timeout=HANG_GUARD_SECONDS,
    )
    assert response.status_code == 200, response.text


class Tool:
    def __init__(self) -> None:
        self.runs: list[dict] = []

    def __call__(self, amount: int, to: str) -> str:
        self.runs.append({"amount": amount, "to": to})
        return f"sent {amount} to {to}"


class ClaimTampering(httpx.HTTPTransport):
    """A man in the middle who raises the amount in every claim answer."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if not (request.url.path.endswith("/claim/") and response.status_code == 200):
            return response
        body = json.loads(response.read())
        body["params"]["amount"] = 1_000_000
        return httpx.Response(200, json=body)


def client(server, token, key, **options) -> ControlPlane:
    return ControlPlane(server.url, token, poll_wait=5, public_keys=[key], **options)


def paused(graph) -> str:
    state = graph.invoke({"messages": [("user", "Pay acme.")]}, langgraph_host.CONFIG)
    [pending] = state["__interrupt__"]
    return pending.value["request_id"]


def resumed(cp: ControlPlane, graph, config=langgraph_host.CONFIG) -> dict:
    interrupts = graph.get_state(config).interrupts
    return graph.invoke(Command(resume=answer_approvals(cp, interrupts, timeout=30)), config)


def verbs(request_id: str) -> list[str]:
    return list(AuditEvent.objects.filter(request_id=request_id).order_by("seq").values_list("verb", flat=True))


def test_an_approved_call_runs_once_and_ends_succeeded_with_its_digest(
    daphne_server, token, server_public_key, people, langgraph_transfer_rule
):
    tool = Tool()
    with client(daphne_server, token, server_public_key) as cp:
        graph = langgraph_host.build_graph(cp, tool)
        request_id = paused(graph)
        assert tool.runs == []
        decide(daphne_server.url, people["alice"], request_id, decision="approve")
        state = resumed(cp, graph)
    assert tool.runs == [langgraph_host.ARGS]
    assert langgraph_host.model_read(state) == ["sent 120 to acme"]
    request = ApprovalRequest.objects.get(pk=request_id)
    assert (request.state, request.resolution_code, request.attempts) == ("succeeded", "succeeded", 1)
    assert (request.tool_call_id, request.thread_id, request.run_id) == ("call_1", "thread-lg", "run-lg")
    succeeded = AuditEvent.objects.get(request_id=request_id, verb="request.succeeded")
    assert succeeded.metadata["result"] == digest("sent 120 to acme")
    assert "request.expired" not in verbs(request_id)


def test_an_async_node_runs_an_approved_call_once_and_a_second_resume_is_answered_already_executed(
    daphne_server, token, server_public_key, people, langgraph_transfer_rule
):
    """`aapproved_tool_call` in an async node, on AsyncControlPlane and `aanswer_approvals`; the
    tool is a coroutine function. Each phase is its own event loop, the reviewer decides between."""
    runs: list[dict] = []

    async def transfer_funds(amount: int, to: str) -> str:
        runs.append({"amount": amount, "to": to})
        return f"sent {amount} to {to}"

    async def phase(graph, acp: AsyncControlPlane, config: dict | None = None) -> dict:
        if config is None:
            return await graph.ainvoke({"messages": [("user", "Pay acme.")]}, langgraph_host.CONFIG)
        interrupts = (await graph.aget_state(config)).interrupts
        return await graph.ainvoke(Command(resume=await aanswer_approvals(acp, interrupts, timeout=30)), config)

    async def with_client(config: dict | None) -> tuple[dict, dict]:
        async with AsyncControlPlane(daphne_server.url, token, poll_wait=5, public_keys=[server_public_key]) as acp:
            graph = langgraph_host.build_async_graph(acp, transfer_funds, saver=saver)
            state = await phase(graph, acp, config)
            return state, (await graph.aget_state(langgraph_host.CONFIG)).config

    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    state, paused_at = asyncio.run(with_client(None))
    [pending] = state["__interrupt__"]
    request_id = pending.value["request_id"]
    assert runs == []
    decide(daphne_server.url, people["alice"], request_id, decision="approve")
    first, _ = asyncio.run(with_client(paused_at))
    second, _ = asyncio.run(with_client(paused_at))  # the same checkpoint resumed again, another client
    assert runs == [langgraph_host.ARGS]
    assert langgraph_host.model_read(first) == ["sent 120 to acme"]
    assert langgraph_host.model_read(second) == [
        f"Not run: already executed (request {request_id}, succeeded/succeeded)"
    ]
    request = ApprovalRequest.objects.get(pk=request_id)
    assert (request.state, request.resolution_code, request.attempts) == ("succeeded", "succeeded", 1)
    assert request.run_id == "run-lg-async"
    succeeded = AuditEvent.objects.get(request_id=request_id, verb="request.succeeded")
    assert succeeded.metadata["result"] == digest("sent 120 to acme")
    assert "request.expired" not in verbs(request_id)


def test_the_same_checkpoint_resumed_twice_runs_the_tool_once(
    daphne_server, token, server_public_key, people, langgraph_transfer_rule
):
    tool = Tool()
    with client(daphne_server, token, server_public_key) as cp:
        graph = langgraph_host.build_graph(cp, tool)
        request_id = paused(graph)
        paused_at = graph.get_state(langgraph_host.CONFIG).config  # the checkpoint at the interrupt
        decide(daphne_server.url, people["alice"], request_id, decision="approve")
        first = resumed(cp, graph, paused_at)
        second = resumed(cp, graph, paused_at)  # time travel: the same checkpoint resumed again
    assert tool.runs == [langgraph_host.ARGS]
    assert langgraph_host.model_read(first) == ["sent 120 to acme"]
    assert langgraph_host.model_read(second) == [
        f"Not run: already executed (request {request_id}, succeeded/succeeded)"
    ]
    assert ApprovalRequest.objects.filter(run_id="run-lg").count() == 1  # the re-run node found, not resubmitted


def test_a_rejection_runs_nothing_and_the_model_reads_the_reviewers_feedback(
    daphne_server, token, server_public_key, people, langgraph_transfer_rule
):
    tool = Tool()
    with client(daphne_server, token, server_public_key) as cp:
        graph = langgraph_host.build_graph(cp, tool)
        request_id = paused(graph)
        decide(daphne_server.url, people["alice"], request_id, decision="reject", feedback="Acme was paid yesterday.")
        state = resumed(cp, graph)
    assert tool.runs == []
    [read] = langgraph_host.model_read(state)
    assert "Acme was paid yesterday." in read
    assert state["messages"][-1].content == f"The tool said: {read}"


def test_an_edited_approval_runs_with_the_edited_params(
    daphne_server, token, server_public_key, people, langgraph_transfer_rule
):
    tool = Tool()
    with client(daphne_server, token, server_public_key) as cp:
        graph = langgraph_host.build_graph(cp, tool)
        request_id = paused(graph)
        decide(daphne_server.url, people["alice"], request_id, decision="approve", edits={"amount": 50})
        state = resumed(cp, graph)
    assert tool.runs == [{"amount": 50, "to": "acme"}]
    assert langgraph_host.model_read(state) == ["sent 50 to acme"]


def test_a_claim_answer_altered_in_transit_is_refused_and_nothing_runs(
    daphne_server, token, server_public_key, people, langgraph_transfer_rule
):
    tool = Tool()
    with client(daphne_server, token, server_public_key, transport=ClaimTampering()) as cp:
        graph = langgraph_host.build_graph(cp, tool)
        request_id = paused(graph)
        decide(daphne_server.url, people["alice"], request_id, decision="approve")
        with pytest.raises(DecisionRefused, match="not the granted ones"):
            resumed(cp, graph)
    assert tool.runs == []


# --- Two processes ----------------------------------------------------------------------------------


class Host:
    """langgraph_host.py as its own process, on the checkpoint file `state`."""

    def __init__(self, server, token, key, tmp_path) -> None:
        self.state = tmp_path / "checkpoint.pickle"
        self.tool_log = tmp_path / "tool-runs.jsonl"
        self.tool_log.touch()
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(ROOT / "clients" / "python"),
            "CONTROLPLANE_URL": server.url,
            "CONTROLPLANE_TOKEN": token,
            "CONTROLPLANE_PUBLIC_KEYS": key,
            "TOOL_LOG": str(self.tool_log),
        }
        self.cwd = tmp_path

    def run(self, mode: str, **env: str) -> tuple[int, dict | None]:
        done = subprocess.run(
            [sys.executable, str(HOST), mode, "--state", str(self.state)],
            cwd=self.cwd,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_SECONDS,
        )
        lines = done.stdout.strip().splitlines()
        if done.returncode == 0:
            return 0, json.loads(lines[-1])
        return done.returncode, None

    def tool_runs(self) -> list[dict]:
        return [json.loads(line) for line in self.tool_log.read_text().splitlines()]


def test_the_same_saved_checkpoint_restored_in_two_processes_runs_once(
    daphne_server, token, server_public_key, people, langgraph_transfer_rule, tmp_path
):
    host = Host(daphne_server, token, server_public_key, tmp_path)
    code, started = host.run("start")
    assert code == 0
    decide(daphne_server.url, people["alice"], started["request_id"], decision="approve")
    _, first = host.run("resume")
    _, second = host.run("resume")
    assert host.tool_runs() == [langgraph_host.ARGS]
    assert first["model_read"] == ["sent 120 to acme"]
    assert second["model_read"] == [f"Not run: already executed (request {started['request_id']}, succeeded/succeeded)"]
    request = ApprovalRequest.objects.get(pk=started["request_id"])
    assert (request.state, request.attempts) == ("succeeded", 1)


def test_a_host_killed_between_claim_and_complete_ends_outcome_unknown_and_never_runs_again(
    short_lease_server, token, server_public_key, people, langgraph_transfer_rule, tmp_path
):
    host = Host(short_lease_server, token, server_public_key, tmp_path)
    _, started = host.run("start")
    request_id = started["request_id"]
    decide(short_lease_server.url, people["alice"], request_id, decision="approve")
    code, _ = host.run("resume", KILL_IN_TOOL="1")
    assert code == -9  # killed in the tool: claimed, never completed
    assert ApprovalRequest.objects.get(pk=request_id).state == "executing"
    time.sleep(2.1)  # the 2 s lease runs out; nobody renews it
    assert runner.resolve_executions() == {"retried": 0, "lost": 1}
    request = ApprovalRequest.objects.get(pk=request_id)
    assert (request.state, request.resolution_code) == ("failed", "outcome_unknown")
    _, again = host.run("resume")  # the same checkpoint restored by a new process
    assert again["model_read"] == [f"Not run: already executed (request {request_id}, failed/outcome_unknown)"]
    assert host.tool_runs() == [langgraph_host.ARGS]  # the killed run only
    assert "request.expired" not in verbs(request_id)
