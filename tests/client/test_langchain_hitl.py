"""The real LangChain agent with its real `HumanInTheLoopMiddleware`, on a scripted chat
model, asks people through a real daphne: one model step makes four parallel tool calls,
and reviewers answer each through the reviewer JSON API (approve one, edit another,
reject a third, reply in place of the fourth). Both interrupt modes of the middleware.

What a user depends on: only the approved and edited calls run, the edited one with
the reviewer's params; the model reads the rejection's feedback and the reply.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from approvals import policy
from approvals.models import ApprovalRequest
from approvals.people import Person
from audit.models import AuditEvent
from hitl_controlplane.client import AsyncControlPlane, ControlPlane
from hitl_controlplane.client.langchain_hitl import aanswer_interrupts, answer_interrupts
from tests.client.test_langgraph import reviewer_session
from tests.execution.harness import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CALLS = [
    {"name": "post_memo", "args": {"to": "ann@example.com", "body": "Minutes attached."}, "id": "call-1"},
    {"name": "post_memo", "args": {"to": "ben@example.com", "body": "Draft: numbers TBD"}, "id": "call-2"},
    {"name": "delete_file", "args": {"path": "reports/q3.pdf"}, "id": "call-3"},
    {"name": "ask_user", "args": {"question": "Which mailbox should the copy go to?"}, "id": "call-4"},
]
# What each reviewer answer is, by the call's first argument's value.
ANSWERS = {
    "ann@example.com": {"decision": "approve"},
    "ben@example.com": {"decision": "approve", "edits": {"body": "Final numbers: 42."}},
    "reports/q3.pdf": {"decision": "reject", "feedback": "Keep the report; finance still needs it."},
    "Which mailbox should the copy go to?": {"decision": "respond", "message": "The shared outbox, please."},
}


class ScriptedModel(GenericFakeChatModel):
    """Answers from its script; the agent binds its tools, which a script need not read."""

    def bind_tools(self, tools, **kwargs):
        return self


@pytest.fixture
def hitl_rules(admin_user):
    ada = Person(admin_user)
    for number, (name, editable) in enumerate([("post_memo", ["body"]), ("delete_file", []), ("ask_user", [])]):
        policy.save_rule(
            {
                "name": f"hitl_{name}",
                "priority": 2 + number,
                "action_type": name,
                "risk_level": "medium",
                "editable_params": editable,
                "conditions": [],
            },
            actor=ada,
            note="LangChain HITL test",
        )


def build_agent(mode: str, ran: list):
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

    @tool
    def ask_user(question: str) -> str:
        """Ask the user a question."""
        ran.append(("ask_user", question))
        return "(nobody answered)"

    model = ScriptedModel(messages=iter([AIMessage(content="", tool_calls=CALLS), AIMessage(content="All done.")]))
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={
            "post_memo": True,  # all four decisions
            "delete_file": {"allowed_decisions": ["approve", "reject"]},
            "ask_user": {"allowed_decisions": ["respond", "reject"]},
        },
        interrupt_mode=mode,
    )
    return create_agent(
        model, tools=[post_memo, delete_file, ask_user], middleware=[middleware], checkpointer=InMemorySaver()
    )


def reviewers_answer_the_batch(daphne_url: str, user, *, run_id: str) -> threading.Thread:
    """A reviewer who waits for the whole step's four calls, then answers each through the API."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            with reviewer_session(daphne_url, user) as http:

                def the_batch() -> list[dict]:
                    found = http.get("/api/v1/requests/", params={"run_id": run_id}).json()["results"]
                    return found if len(found) == len(CALLS) else []

                batch = wait_for(the_batch, what="the step's four calls to be pending")
                assert len({r["batch_id"] for r in batch}) == 1 and batch[0]["batch_id"]
                for request in batch:
                    answer = ANSWERS[next(iter(request["params"].values()))]
                    response = http.post(
                        f"/api/v1/requests/{request['id']}/decisions/", json={**answer, "revision": request["revision"]}
                    )
                    assert response.status_code == 200, response.text
        except BaseException as error:  # the test thread re-raises it
            failures.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.failures = failures  # type: ignore[attr-defined]
    thread.start()
    return thread


def assert_only_approved_and_edited_calls_ran_and_the_model_read_the_rest(ran: list, messages: list) -> None:
    assert sorted(ran) == [
        ("post_memo", "ann@example.com", "Minutes attached."),
        ("post_memo", "ben@example.com", "Final numbers: 42."),
    ]
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    assert set(results) == {"call-1", "call-2", "call-3", "call-4"}
    assert "Keep the report; finance still needs it." in results["call-3"].content
    assert results["call-3"].status == "error"
    assert results["call-4"].content == "The shared outbox, please."
    assert results["call-4"].status == "success"
    assert "Final numbers: 42." in results["call-2"].content  # the notice names the call that ran


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_parallel_tool_calls_get_one_decision_each(daphne_server, token, people, hitl_rules, mode):
    ran: list = []
    agent = build_agent(mode, ran)
    config = {"configurable": {"thread_id": f"thread-{mode}"}}
    run_id = f"run-{mode}"
    reviewer = reviewers_answer_the_batch(daphne_server.url, people["alice"], run_id=run_id)
    with ControlPlane(daphne_server.url, token, poll_wait=5) as cp:
        state = agent.invoke({"messages": [{"role": "user", "content": "Tidy up and send the minutes."}]}, config)
        interrupts = state["__interrupt__"]
        assert len(interrupts) == (1 if mode == "batched" else 4)
        resume = answer_interrupts(cp, interrupts, run_id=run_id, thread_id=f"thread-{mode}", timeout=60)
        state = agent.invoke(Command(resume=resume), config)
    reviewer.join(timeout=30)
    assert not reviewer.failures, reviewer.failures
    assert "__interrupt__" not in state and state["messages"][-1].content == "All done."
    assert_only_approved_and_edited_calls_ran_and_the_model_read_the_rest(ran, state["messages"])

    requests = {r.tool_call_id: r for r in ApprovalRequest.objects.filter(run_id=run_id)}
    if mode == "per_call":
        assert set(requests) == {"call-1", "call-2", "call-3", "call-4"}
    by_action = {(r.action_type, r.current_revision): r for r in requests.values()}
    ask = by_action[("ask_user", 1)]
    assert (ask.state, ask.resolution_code, set(ask.allowed_decisions)) == (
        "rejected",
        "responded",
        {"respond", "reject"},
    )
    assert AuditEvent.objects.filter(request_id=ask.pk, verb="request.responded").exists()
    # The approved calls were claimed (at most once) and handed to the middleware.
    assert sorted(r.state for r in requests.values() if r.action_type == "post_memo") == ["succeeded", "succeeded"]


def test_answering_the_same_interrupt_again_never_asks_twice_or_runs_twice(daphne_server, token, people, hitl_rules):
    ran: list = []
    agent = build_agent("batched", ran)
    config = {"configurable": {"thread_id": "thread-again"}}
    reviewer = reviewers_answer_the_batch(daphne_server.url, people["alice"], run_id="run-again")
    with ControlPlane(daphne_server.url, token, poll_wait=5) as cp:
        state = agent.invoke({"messages": [{"role": "user", "content": "Go."}]}, config)
        first = answer_interrupts(cp, state["__interrupt__"], run_id="run-again", thread_id="thread-again")
        reviewer.join(timeout=30)
        # A host that restarted before resuming answers the same interrupt again.
        again = answer_interrupts(cp, state["__interrupt__"], run_id="run-again", thread_id="thread-again")
    assert ApprovalRequest.objects.filter(run_id="run-again").count() == len(CALLS)
    (interrupt_id,) = first
    decisions, replayed = first[interrupt_id]["decisions"], again[interrupt_id]["decisions"]
    assert [d["type"] for d in decisions] == ["approve", "edit", "reject", "respond"]
    # The approved calls were handed out once: the second answer cannot run them again.
    assert [d["type"] for d in replayed] == ["reject", "reject", "reject", "respond"]
    assert all("Not run" in d["message"] for d in replayed[:2])


def test_the_async_client_answers_the_per_call_interrupts_together(daphne_server, token, people, hitl_rules):
    import asyncio

    ran: list = []
    agent = build_agent("per_call", ran)
    config = {"configurable": {"thread_id": "thread-async"}}
    reviewer = reviewers_answer_the_batch(daphne_server.url, people["alice"], run_id="run-async")

    async def host():
        async with AsyncControlPlane(daphne_server.url, token, poll_wait=5) as cp:
            state = await agent.ainvoke({"messages": [{"role": "user", "content": "Go."}]}, config)
            resume = await aanswer_interrupts(
                cp, state["__interrupt__"], run_id="run-async", thread_id="thread-async", timeout=60
            )
            return await agent.ainvoke(Command(resume=resume), config)

    state = asyncio.run(host())
    reviewer.join(timeout=30)
    assert not reviewer.failures, reviewer.failures
    assert_only_approved_and_edited_calls_ran_and_the_model_read_the_rest(ran, state["messages"])
