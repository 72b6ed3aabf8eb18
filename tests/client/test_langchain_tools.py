"""LangChain tools wrapped with `controlled_langchain_tool` under the real `HumanInTheLoopMiddleware`
(both interrupt modes), a scripted chat model and a real daphne: the middleware still runs the
tool, but the tool body claims on entry and completes on exit, keyed by its call id.

What a user depends on: the approved call runs once, the edited one with the reviewer's
params, both end succeeded with their results' digests audited; the model reads a
rejection's feedback; the same checkpoint resumed twice runs nothing twice; a claim answer
altered in transit runs nothing.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from approvals import policy
from approvals.execution import runner
from approvals.models import ApprovalRequest
from approvals.people import Person
from audit.chain import digest
from audit.models import AuditEvent
from hitl_controlplane.client import AsyncControlPlane, ControlPlane, DecisionRefused
from hitl_controlplane.client.langchain_hitl import aanswer_interrupts, answer_interrupts
from hitl_controlplane.client.langchain_tools import controlled_langchain_tool
from tests.client.langchain_processes import LangChainHost
from tests.client.test_langchain_hitl import ScriptedModel
from tests.client.test_langgraph_tools import ClaimTampering, decide
from tests.execution.harness import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CALLS = [
    {"name": "post_memo", "args": {"to": "ann@example.com", "body": "Minutes attached."}, "id": "call-1"},
    {"name": "post_memo", "args": {"to": "ben@example.com", "body": "Draft: numbers TBD"}, "id": "call-2"},
    {"name": "delete_file", "args": {"path": "reports/q3.pdf"}, "id": "call-3"},
]
ANSWERS = {
    "call-1": {"decision": "approve"},
    "call-2": {"decision": "approve", "edits": {"body": "Final numbers: 42."}},
    "call-3": {"decision": "reject", "feedback": "Keep the report; finance still needs it."},
}


@pytest.fixture
def rules(admin_user):
    for number, (name, editable) in enumerate([("post_memo", ["body"]), ("delete_file", [])]):
        rule = {
            "name": f"lct_{name}",
            "priority": 2 + number,
            "action_type": name,
            "risk_level": "medium",
            "editable_params": editable,
            "conditions": [],
        }
        policy.save_rule(rule, actor=Person(admin_user), note="LangChain wrapped tools test")


def build_agent(cp, mode: str, ran: list, calls=CALLS):
    @tool
    def post_memo(to: str, body: str) -> str:
        """Post a memo to someone."""
        ran.append(("post_memo", to, body))
        return f"sent to {to}"

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(("delete_file", path))
        return "deleted"

    model = ScriptedModel(
        messages=iter([AIMessage(content="", tool_calls=calls), *[AIMessage(content="All done.")] * 2])
    )
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"post_memo": True, "delete_file": {"allowed_decisions": ["approve", "reject"]}},
        interrupt_mode=mode,
    )
    tools = [controlled_langchain_tool(cp, t, thread_id=f"thread-{mode}") for t in (post_memo, delete_file)]
    return create_agent(model, tools=tools, middleware=[middleware], checkpointer=InMemorySaver())


def reviewers_answer(server_url: str, user, *, run_id: str, count: int) -> threading.Thread:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            batch = wait_for(
                lambda: (
                    list(ApprovalRequest.objects.filter(run_id=run_id))
                    if ApprovalRequest.objects.filter(run_id=run_id).count() == count
                    else []
                ),
                what="the step's calls to be pending",
            )
            for request in batch:
                decide(server_url, user, str(request.pk), **ANSWERS[request.tool_call_id])
        except BaseException as error:
            failures.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.failures = failures  # type: ignore[attr-defined]
    thread.start()
    return thread


def answered(cp, state, mode):
    return answer_interrupts(
        cp,
        state["__interrupt__"],
        run_id=f"run-{mode}",
        thread_id=f"thread-{mode}",
        timeout=60,
        claim=False,
        tool_calls=state["messages"][-1].tool_calls,
    )


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_the_tool_body_claims_runs_the_approved_and_edited_calls_once_and_the_model_reads_the_rejection(
    daphne_server, token, server_public_key, people, rules, mode
):
    ran: list = []
    config = {"configurable": {"thread_id": f"thread-{mode}"}}
    reviewer = reviewers_answer(daphne_server.url, people["alice"], run_id=f"run-{mode}", count=3)
    with ControlPlane(daphne_server.url, token, poll_wait=5, public_keys=[server_public_key]) as cp:
        agent = build_agent(cp, mode, ran)
        state = agent.invoke({"messages": [{"role": "user", "content": "Tidy up."}]}, config)
        paused_at = agent.get_state(config).config
        resume = answered(cp, state, mode)
        state = agent.invoke(Command(resume=resume), config)
        again = agent.invoke(Command(resume=resume), paused_at)  # the same checkpoint resumed again
    reviewer.join(timeout=30)
    assert not reviewer.failures, reviewer.failures
    assert sorted(ran) == [
        ("post_memo", "ann@example.com", "Minutes attached."),
        ("post_memo", "ben@example.com", "Final numbers: 42."),
    ]
    results = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    assert results["call-1"].content == "sent to ann@example.com"
    assert "sent to ben@example.com" in results["call-2"].content
    assert "Keep the report; finance still needs it." in results["call-3"].content
    requests = {r.tool_call_id: r for r in ApprovalRequest.objects.filter(run_id=f"run-{mode}")}
    assert set(requests) == {"call-1", "call-2", "call-3"}  # batched requests carry their calls' ids too
    for call_id, text in [("call-1", "sent to ann@example.com"), ("call-2", "sent to ben@example.com")]:
        request = requests[call_id]
        assert (request.state, request.resolution_code, request.attempts) == ("succeeded", "succeeded", 1)
        assert AuditEvent.objects.get(request_id=request.pk, verb="request.succeeded").metadata["result"] == digest(
            text
        )
    assert requests["call-3"].state == "rejected"
    replayed = {m.tool_call_id: m.content for m in again["messages"] if isinstance(m, ToolMessage)}
    for call_id in ("call-1", "call-2"):
        assert f"Not run: already executed (request {requests[call_id].pk}, succeeded/succeeded)" in replayed[call_id]


def test_a_claim_answer_altered_in_transit_is_refused_in_the_tool_and_nothing_runs(
    daphne_server, token, server_public_key, people, rules
):
    ran: list = []
    mode = "per_call"
    config = {"configurable": {"thread_id": f"thread-{mode}"}}
    calls = CALLS[:1]
    reviewer = reviewers_answer(daphne_server.url, people["alice"], run_id=f"run-{mode}", count=1)
    with ControlPlane(
        daphne_server.url, token, poll_wait=5, public_keys=[server_public_key], transport=ClaimTampering()
    ) as cp:
        agent = build_agent(cp, mode, ran, calls)
        state = agent.invoke({"messages": [{"role": "user", "content": "Tidy up."}]}, config)
        resume = answered(cp, state, mode)
        with pytest.raises(DecisionRefused, match="not the granted ones"):
            agent.invoke(Command(resume=resume), config)
    reviewer.join(timeout=30)
    assert ran == []


def test_the_async_client_runs_the_wrapped_tools_through_the_handshake(
    daphne_server, token, server_public_key, people, rules
):
    import asyncio

    ran: list = []
    mode = "batched"
    config = {"configurable": {"thread_id": f"thread-{mode}"}}
    reviewer = reviewers_answer(daphne_server.url, people["alice"], run_id=f"run-{mode}", count=3)

    async def host():
        async with AsyncControlPlane(daphne_server.url, token, poll_wait=5, public_keys=[server_public_key]) as acp:
            agent = build_agent(acp, mode, ran)
            state = await agent.ainvoke({"messages": [{"role": "user", "content": "Go."}]}, config)
            resume = await aanswer_interrupts(
                acp,
                state["__interrupt__"],
                run_id=f"run-{mode}",
                thread_id=f"thread-{mode}",
                timeout=60,
                claim=False,
                tool_calls=state["messages"][-1].tool_calls,
            )
            return await agent.ainvoke(Command(resume=resume), config)

    state = asyncio.run(host())
    reviewer.join(timeout=30)
    assert not reviewer.failures, reviewer.failures
    assert sorted(ran) == [
        ("post_memo", "ann@example.com", "Minutes attached."),
        ("post_memo", "ben@example.com", "Final numbers: 42."),
    ]
    assert state["messages"][-1].content == "All done."


# --- Two processes, one saved checkpoint (tests/client/langchain_processes.py) -------------------------


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_the_same_saved_checkpoint_resumed_in_two_processes_runs_the_tool_once(
    daphne_server, token, server_public_key, people, transfer_rule, tmp_path, mode
):
    host = LangChainHost(daphne_server, token, server_public_key, tmp_path, mode)
    request = host.started_and_approved(daphne_server.url, people["alice"])
    first = host.finish(host.start("resume"))
    second = host.finish(host.start("resume"))
    assert host.tool_runs() == [{"amount": 75, "to": "acme"}]
    assert first["model_read"] == ["sent 75 to acme"]
    assert second["model_read"] == [f"Not run: already executed (request {request.pk}, succeeded/succeeded)"]
    request.refresh_from_db()
    assert (request.state, request.attempts, request.tool_call_id) == ("succeeded", 1, "call_1")


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_a_host_killed_in_the_wrapped_tool_ends_outcome_unknown_and_never_runs_again(
    short_lease_server, token, server_public_key, people, transfer_rule, tmp_path, mode
):
    host = LangChainHost(short_lease_server, token, server_public_key, tmp_path, mode)
    request = host.started_and_approved(short_lease_server.url, people["alice"])
    killed = host.start("resume", KILL_IN_TOOL="1")
    killed.communicate(timeout=120)
    assert killed.returncode == -9  # killed in the tool: claimed, never completed
    time.sleep(2.1)  # the 2 s lease runs out; nobody renews it
    assert runner.resolve_executions() == {"retried": 0, "lost": 1}
    request.refresh_from_db()
    assert (request.state, request.resolution_code) == ("failed", "outcome_unknown")
    again = host.finish(host.start("resume"))
    assert again["model_read"] == [f"Not run: already executed (request {request.pk}, failed/outcome_unknown)"]
    assert host.tool_runs() == [{"amount": 75, "to": "acme"}]
    verbs = set(AuditEvent.objects.filter(request_id=request.pk).values_list("verb", flat=True))
    assert "request.expired" not in verbs
