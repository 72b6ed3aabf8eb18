"""What a waiting agent resumes with, exactly as DESIGN.md's agent-facing contract says.

Plans mirror Mastra's `submit_plan` tool: resume data `{action, feedback?, path,
title, plan}` and the tool result texts the model reads. Actions get the same
three cases in words that fit a tool call, with the exact approved params.
Suspensions resume with the reviewers' answer as the resume data, exactly as
validated. Expired and cancelled requests resume as `rejected` with feedback saying so; the
response's `state` tells them apart.
"""

from __future__ import annotations

import json
from typing import Any

from approvals.errors import REVALIDATION_CODES
from approvals.states import Kind, State
from audit.signing import signer
from hitl_controlplane.canonical import format_timestamp
from hitl_controlplane.decisions import decision_document, sign_decision, submitted_sha256

__all__ = [
    "PLAN_APPROVED_TEXT",
    "decision_signature",
    "is_decided",
    "resume_payload",
    "tool_result",
]

# Mastra's own text for an approved plan, verbatim.
PLAN_APPROVED_TEXT = "Plan approved. Proceed with implementation following the approved plan."
# Mastra's own submit_plan texts, byte for byte (DESIGN.md), so a host that hands this
# tool result to its model gives it the words the agent was tuned on.
PLAN_REJECTED_WITH_FEEDBACK = (
    "Plan was not approved. The user wants revisions.\n\nUser feedback: {feedback}\n\n"
    "Please revise the plan based on the feedback and submit again with submit_plan."
)
PLAN_REJECTED_WITHOUT_FEEDBACK = (
    "Plan was not approved. The user will send revision instructions in their next message. "
    "Stop now and wait for the user to provide feedback before revising the plan."
)
ACTION_APPROVED = (
    "Approved. Proceed with this tool call using exactly these approved parameters "
    "(a reviewer may have edited them): {params}"
)
ACTION_REJECTED_WITH_FEEDBACK = (
    "Rejected. Feedback from the reviewer:\n\n{feedback}\n\n"
    "Do not retry the same call unchanged; change it to address the feedback or ask the user."
)
ACTION_REJECTED_WITHOUT_FEEDBACK = (
    "Rejected without feedback. Do not retry this call; stop and wait for the user's next message."
)
# A reviewer replied in place of the tool (LangChain HITL's `respond`): the call did not
# run, and the reply is the answer. Said so, so the model neither assumes the side
# effect happened nor retries the call to make it happen.
ACTION_RESPONDED = "The tool was not run: a reviewer answered in its place. Their reply:\n\n{message}"
# `resolution_code` of a reply (approvals.services.replies.RESPONDED).
_RESPONDED = "responded"

SUSPENSION_ANSWERED = "The reviewer answered; resume the step with this data: {answer}"
SUSPENSION_REJECTED_WITH_FEEDBACK = "The reviewer declined to answer. Feedback from the reviewer:\n\n{feedback}"
SUSPENSION_REJECTED_WITHOUT_FEEDBACK = "The reviewer declined to answer, without feedback."

# States in which a decision about going ahead exists.
_APPROVED_STATES = frozenset({State.APPROVED, State.EXECUTING, State.SUCCEEDED})
_REJECTED_STATES = frozenset({State.REJECTED, State.EXPIRED, State.CANCELLED})


def _decision(request: Any, state: str) -> tuple[str, str] | None:
    """(action, feedback) for `request` in `state`, or None while undecided."""
    if state in _APPROVED_STATES:
        return "approved", ""
    if state == State.FAILED:
        # A failed re-validation means "do not go ahead"; a failed execution was approved.
        if request.resolution_code in REVALIDATION_CODES or request.resolution_code.endswith("_required"):
            return "rejected", request.error or "Re-validation refused to run the approved request."
        return "approved", ""
    if state == State.REJECTED:
        if request.resolution_code == _RESPONDED:
            return "responded", request.feedback
        return "rejected", request.feedback
    if state == State.EXPIRED:
        if request.decided_at is not None:
            return "rejected", "The approval expired before the request was executed; submit it again."
        return "rejected", "The request expired before anyone decided it; submit it again if it is still needed."
    if state == State.CANCELLED:
        who = "the agent" if request.resolution_code == "withdrawn" else "an administrator"
        reason = f": {request.feedback}" if request.feedback else "."
        return "rejected", f"The request was cancelled by {who}{reason}"
    return None


def is_decided(request: Any) -> bool:
    return _decision(request, request.effective_state) is not None


def tool_result(kind: str, action: str, feedback: str, params: dict[str, Any] | None = None) -> str:
    """The text the model reads as the tool's result."""
    if kind == Kind.PLAN:
        if action == "approved":
            return PLAN_APPROVED_TEXT
        return PLAN_REJECTED_WITH_FEEDBACK.format(feedback=feedback) if feedback else PLAN_REJECTED_WITHOUT_FEEDBACK
    if action == "approved":
        return ACTION_APPROVED.format(params=json.dumps(params or {}, sort_keys=True, ensure_ascii=False))
    if action == "responded":
        return ACTION_RESPONDED.format(message=feedback)
    return ACTION_REJECTED_WITH_FEEDBACK.format(feedback=feedback) if feedback else ACTION_REJECTED_WITHOUT_FEEDBACK


def _suspension_resume(request: Any, action: str, feedback: str) -> dict[str, Any]:
    """A suspension resumes with the reviewers' answer itself, exactly as validated (the
    host passes it straight to `run.resume({step, resumeData})`), or, rejected, expired
    or cancelled, with no answer and the feedback saying why."""
    if action == "approved":
        text = request.resume_data_json
        answer = json.loads(text)
        result = SUSPENSION_ANSWERED.format(answer=text)
        return {
            "resume_data": answer,
            "tool_result": result,
            "decision_signature": _signed(request, resume_data=answer, tool_result=result),
        }
    result = (
        SUSPENSION_REJECTED_WITH_FEEDBACK.format(feedback=feedback)
        if feedback
        else SUSPENSION_REJECTED_WITHOUT_FEEDBACK
    )
    return {
        "resume_data": None,
        "feedback": feedback,
        "tool_result": result,
        "decision_signature": _signed(request, resume_data=None, tool_result=result),
    }


def resume_payload(request: Any, *, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """`{request_id, state, decided, resume_data, tool_result, decision_signature}` for `request` now.

    `params` are the current (approved) params when the caller already has them;
    otherwise they are read. Undecided requests have `resume_data` and
    `tool_result` null.
    """
    state = request.effective_state
    decision = _decision(request, state)
    body: dict[str, Any] = {
        "request_id": str(request.pk),
        "state": state,
        "decided": decision is not None,
        "resume_data": None,
        "tool_result": None,
    }
    if decision is None:
        return body
    action, feedback = decision
    if request.kind == Kind.SUSPENSION:
        return {**body, **_suspension_resume(request, action, feedback)}
    resume_data: dict[str, Any] = {"action": action}
    if action == "responded":  # the reply is the answer, not feedback on a refusal
        resume_data["message"] = feedback
    elif feedback:
        resume_data["feedback"] = feedback
    if request.kind == Kind.PLAN:
        resume_data.update(path=request.plan_path, title=request.plan_title, plan=request.plan_markdown)
    elif action == "approved":
        resume_data["params"] = params if params is not None else request.current_params()
    body["resume_data"] = resume_data
    body["tool_result"] = tool_result(request.kind, action, feedback, resume_data.get("params"))
    body["decision_signature"] = decision_signature(request, resume_data, body["tool_result"])
    return body


def decision_signature(request: Any, resume_data: dict[str, Any], tool_result: str | None) -> dict[str, Any]:
    """The server's signature binding this decision to the exact call (hitl_controlplane.decisions).

    Signed with the audit signing key, whose public half `manage.py audit_public_key`
    prints, so an agent trusts the same key an auditor pins.
    """
    return _signed(request, resume_data=resume_data, tool_result=tool_result)


def _signed(request: Any, *, resume_data: Any, tool_result: str | None) -> dict[str, Any]:
    """The v2 decision document (hitl_controlplane.decisions) for `request`, signed.

    It names what the agent can check against the call it made itself: the agent its
    token belongs to, the kind, the action type, what it submitted (digest), its
    idempotency key and tool-call id, besides the request, revision and verdict.
    """
    document = decision_document(
        kind=str(request.kind),
        agent={"id": request.agent_id, "name": request.agent.name},
        request_id=str(request.pk),
        revision=request.current_revision,
        action_type=request.action_type,
        idempotency_key=request.idempotency_key,
        tool_call_id=request.tool_call_id,
        submitted_sha256=request.submitted_sha256 or _submitted_sha256(request),
        execute_by=format_timestamp(request.execute_by) if request.execute_by else None,
        resume_data=resume_data,
        tool_result=tool_result,
    )
    return sign_decision(signer().current, document)


def _submitted_sha256(request: Any) -> str:
    """What a request stored before the digest was kept at submission submitted, digested from its row."""
    if request.kind == Kind.PLAN:
        return submitted_sha256(Kind.PLAN, path=request.plan_path, plan=request.plan_markdown)
    first = request.revisions.filter(number=1).values_list("params", flat=True).first()
    return submitted_sha256(str(request.kind), params=first or {})
