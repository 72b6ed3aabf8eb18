"""The HITL middleware's own claim (`answer_interrupts(..., claim=True)`, the tools not wrapped),
with someone between the client and a real daphne rewriting the claim answer.

With `claim=True` the client claims an approved call before answering the middleware, and
LangChain then runs the tool itself with the args it is given. So the grant is the last
thing standing between a proxy and the tool: altered params in the claim answer, or the
decision's signature presented where the grant's belongs, must raise DecisionRefused
before the middleware hears "approve", and the tool must never run. The honest claim
(same test, no rewrite) answers approve with exactly the granted args.
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

from approvals.models import ApprovalRequest
from hitl_controlplane.client import ControlPlane, DecisionRefused
from hitl_controlplane.client.langchain_hitl import answer_interrupts
from tests.client.test_langgraph_tools import decide
from tests.execution.harness import wait_for
from tests.fixtures.typescript import ClaimTampering, RewritingProxy

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ARGS = {"amount": 75, "to": "acme"}


class ScriptedModel(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):
        return self


def build_agent(mode: str, ran: list):
    @tool
    def transfer_funds(amount: int, to: str) -> str:
        """Move money to a payee."""
        ran.append({"amount": amount, "to": to})
        return f"sent {amount} to {to}"

    call = {"name": "transfer_funds", "args": ARGS, "id": "call_1"}
    model = ScriptedModel(messages=iter([AIMessage(content="", tool_calls=[call]), AIMessage(content="Paid.")]))
    middleware = HumanInTheLoopMiddleware(interrupt_on={"transfer_funds": True}, interrupt_mode=mode)
    return create_agent(model, tools=[transfer_funds], middleware=[middleware], checkpointer=InMemorySaver())


def approve_when_pending(server_url: str, reviewer, run_id: str) -> threading.Thread:
    """A reviewer who approves the run's call once it is pending, over the JSON API."""

    def run() -> None:
        try:
            pending = wait_for(
                lambda: ApprovalRequest.objects.filter(run_id=run_id, state="pending_approval").first(),
                what="the call to be pending",
            )
            decide(server_url, reviewer, str(pending.pk), decision="approve")
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("mode", ["batched", "per_call"])
@pytest.mark.parametrize(
    ("tampering", "refused_for"),
    [
        (None, None),
        ("alter_params", "not the granted ones"),
        ("decision_as_grant", "grant_signature does not match"),
    ],
    ids=["honest", "altered-params", "decision-as-grant"],
)
def test_the_middlewares_claim_runs_only_what_the_grant_binds(
    daphne_server, token, server_public_key, people, transfer_rule, mode, tampering, refused_for
):
    ran: list[dict] = []
    run_id = f"hitl-claim-{mode}-{tampering}"
    config = {"configurable": {"thread_id": run_id}}
    agent = build_agent(mode, ran)
    state = agent.invoke({"messages": [("user", "Pay acme.")]}, config)
    proxy = RewritingProxy(daphne_server.port, getattr(ClaimTampering(), tampering) if tampering else lambda *_: None)
    reviewer = approve_when_pending(daphne_server.url, people["alice"], run_id)
    try:
        with ControlPlane(proxy.url, token, poll_wait=5, public_keys=[server_public_key]) as cp:

            def answer() -> list:
                return answer_interrupts(
                    cp, state["__interrupt__"], thread_id=run_id, run_id=run_id, timeout=30, claim=True
                )

            if refused_for is None:
                final = agent.invoke(Command(resume=answer()), config)
            else:
                with pytest.raises(DecisionRefused, match=refused_for):
                    answer()
    finally:
        reviewer.join(timeout=30)
        proxy.close()

    request = ApprovalRequest.objects.get(run_id=run_id)
    if refused_for is None:
        assert ran == [ARGS]
        assert [m.content for m in final["messages"] if isinstance(m, ToolMessage)] == ["sent 75 to acme"]
        assert (request.state, request.attempts) == ("succeeded", 1)
    else:
        assert ran == []  # the middleware never heard "approve"
        # Claimed by the server (the proxy only rewrote its answer), never completed as run.
        assert request.state != "succeeded" and request.attempts == 1
