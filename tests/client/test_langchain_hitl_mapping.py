"""How the client reads the HITL middleware's interrupts and turns the control plane's
resume into the middleware's decisions (no server, no database: plain values, and the
real middleware's own schema for per-call interrupts)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents.middleware.human_in_the_loop import HumanInTheLoopMiddleware, _decision_schema
from pydantic import TypeAdapter

from hitl_controlplane.client import ApprovalRejected, Resume
from hitl_controlplane.client.langchain_hitl import (
    HITL_DECISIONS,
    ToolCall,
    allowed_from_schema,
    decision_for,
    tool_calls_of,
)

CALL = ToolCall(name="post_memo", args={"to": "ann", "body": "hi"}, description="", allowed=HITL_DECISIONS)


def resume(action: str, **data) -> Resume:
    return Resume(
        request_id="r-1",
        state="rejected" if action != "approved" else "approved",
        resume_data={"action": action, **data},
        tool_result="",
    )


def test_approved_as_submitted_is_approve_and_with_other_params_an_edit_of_the_same_tool():
    assert decision_for(CALL, resume("approved", params=CALL.args)) == {"type": "approve"}
    edited = decision_for(CALL, resume("approved", params={"to": "ann", "body": "final"}))
    assert edited == {"type": "edit", "edited_action": {"name": "post_memo", "args": {"to": "ann", "body": "final"}}}
    # The claim's params (exactly what was approved) win over the resume's.
    claimed = decision_for(CALL, resume("approved", params=CALL.args), approved_args={"to": "ann", "body": "x"})
    assert claimed["edited_action"]["args"] == {"to": "ann", "body": "x"}


def test_a_rejection_carries_its_feedback_and_a_reply_its_message():
    assert decision_for(CALL, resume("rejected", feedback="Not today.")) == {"type": "reject", "message": "Not today."}
    assert decision_for(CALL, resume("rejected")) == {"type": "reject"}
    assert decision_for(CALL, resume("responded", message="Outbox B.")) == {"type": "respond", "message": "Outbox B."}


def test_a_decision_the_tool_does_not_allow_stops_the_run_instead_of_breaking_the_middleware():
    approve_only = ToolCall(name="post_memo", args={}, description="", allowed=("approve",))
    with pytest.raises(ApprovalRejected) as stopped:
        decision_for(approve_only, resume("rejected", feedback="No."))
    assert "reject" in stopped.value.feedback and "No." in stopped.value.feedback
    no_edit = ToolCall(name="post_memo", args={"body": "a"}, description="", allowed=("approve", "reject"))
    with pytest.raises(ApprovalRejected):
        decision_for(no_edit, resume("approved", params={"body": "b"}))


def test_a_batched_interrupt_lists_its_calls_in_order_with_their_own_allowed_decisions():
    value = {
        "action_requests": [
            {"name": "a", "args": {"x": 1}, "description": "first"},
            {"name": "b", "args": {}},
            {"name": "a", "args": {"x": 2}},
        ],
        "review_configs": [
            {"action_name": "a", "allowed_decisions": ["approve", "reject"]},
            {"action_name": "b", "allowed_decisions": ["respond"]},
            {"action_name": "a", "allowed_decisions": ["approve", "reject"]},
        ],
    }
    calls = tool_calls_of(value)
    assert [(c.name, c.args, c.allowed) for c in calls] == [
        ("a", {"x": 1}, ("approve", "reject")),
        ("b", {}, ("respond",)),
        ("a", {"x": 2}, ("approve", "reject")),
    ]
    assert calls[0].description == "first" and calls[0].tool_call_id == ""


def test_a_per_call_interrupt_is_one_call_with_its_own_id():
    value = {"type": "tool_approval", "tool_call_id": "call-9", "name": "a", "args": {"x": 1}, "description": "d"}
    (call,) = tool_calls_of(value, allowed_decisions=["approve"])
    assert (call.tool_call_id, call.allowed) == ("call-9", ("approve",))
    with pytest.raises(ValueError):
        tool_calls_of({"something": "else"})


@given(st.lists(st.sampled_from(HITL_DECISIONS), min_size=1, max_size=4, unique=True))
def test_the_allowed_decisions_are_read_back_from_the_middlewares_own_response_schema(allowed):
    schema = TypeAdapter(_decision_schema(allowed, "post_memo")).json_schema()
    assert set(allowed_from_schema(schema)) == set(allowed)


def test_an_unreadable_schema_allows_all_four_and_the_middleware_still_checks():
    assert allowed_from_schema(None) == HITL_DECISIONS
    assert allowed_from_schema({"type": "object"}) == HITL_DECISIONS


def test_the_installed_middleware_offers_respond():
    # The decision this client maps a reviewer's reply to exists in the pinned release.
    middleware = HumanInTheLoopMiddleware(interrupt_on={"t": True})
    assert middleware.interrupt_on["t"]["allowed_decisions"] == list(HITL_DECISIONS)
