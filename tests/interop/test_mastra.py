"""Mastra's own human-in-the-loop protocols, with the real @mastra/core (Node, scripted
models from ai/test, no network) as the host and a real daphne as the control plane;
reviewers answer through the reviewer JSON API, as their pages do.

(1) seed 002's `approval-flow` workflow suspends at `approval`, goes to
/api/v1/suspensions/ and resumes with the reviewer's typed answer;
(2) a `requireApproval` tool's `tool-call-approval` chunk becomes an action, and the
decision becomes approveToolCall or declineToolCall;
(3) Mastra's `submit_plan` tool is resumed with our `resume_data` as it is, and the
model is then shown exactly our `tool_result`.
"""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PLAN = "# Add a dark mode\n\n1. Add a theme toggle.\n2. Store the choice per user.\n"
# DESIGN.md "Agent-facing contract", byte for byte (Mastra's submit_plan texts).
PLAN_APPROVED = "Plan approved. Proceed with implementation following the approved plan."
PLAN_REVISE = (
    "Plan was not approved. The user wants revisions.\n\nUser feedback: {feedback}\n\n"
    "Please revise the plan based on the feedback and submit again with submit_plan."
)
PLAN_WAIT = (
    "Plan was not approved. The user will send revision instructions in their next message. "
    "Stop now and wait for the user to provide feedback before revising the plan."
)


# --- (1) a workflow step's suspend() and resume() ------------------------------------------


@pytest.mark.parametrize(("approved", "receipt"), [(False, "rejected:150.13"), (True, "approved:150.13")])
def test_seed_002s_workflow_resumes_with_the_reviewers_typed_answer(run_host, decide, approved, receipt):
    host = run_host("approval-flow.mjs")
    submitted = host.next_event("submitted")
    assert submitted["suspend_payload"] == {"amount": 150.13, "reason": "Amount exceeds automatic approval limit"}
    request = ApprovalRequest.objects.get(pk=submitted["request_id"])
    assert (request.kind, request.action_type, request.state) == (
        "suspension",
        "approval-flow.approval",
        "pending_approval",
    )
    assert request.current_params() == submitted["suspend_payload"]  # rules read it as params.*
    # zod 4's own JSON Schema for the step's resumeSchema, as the host sent it.
    assert request.resume_schema == {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"approved": {"type": "boolean"}},
        "required": ["approved"],
        "additionalProperties": False,
    }
    # An answer the step's schema refuses never reaches the run; the host keeps waiting.
    with pytest.raises(AssertionError, match="invalid_resume_data"):
        decide("alice", submitted["request_id"], {"decision": "respond", "resume_data": {"approved": "yes"}})

    decide("alice", submitted["request_id"], {"decision": "respond", "resume_data": {"approved": approved}})

    result = host.next_event("result")
    host.finish()
    assert result["resume_data"] == {"approved": approved}
    assert result["status"] == "success"
    assert result["result"]["receipt"] == receipt
    # normalize ran once; approval ran again on resume (Mastra re-enters the step); receipt once.
    assert result["executions"] == {"normalize": 1, "approval": 2, "receipt": 1}


def test_a_refused_suspension_gives_the_step_no_answer_and_the_host_ends_the_run(run_host, decide):
    host = run_host("approval-flow.mjs")
    submitted = host.next_event("submitted")

    decide("bob", submitted["request_id"], {"decision": "reject", "feedback": "Ask finance first."})

    result = host.next_event("result")
    host.finish()
    assert (result["state"], result["resume_data"], result["status"]) == (
        "rejected",
        None,
        "canceled",
    )  # Mastra's spelling
    assert result["executions"] == {"normalize": 1, "approval": 1, "receipt": 0}


# --- (2) a requireApproval tool -------------------------------------------------------------


def test_an_approved_tool_call_runs_once_exactly_as_the_model_made_it(run_host, decide):
    host = run_host("tool-approval.mjs")
    submitted = host.next_event("submitted")
    args = {"to": ["dana@example.com"], "subject": "Quarterly numbers", "body": "Attached."}
    assert (submitted["approval"]["toolName"], submitted["approval"]["args"]) == ("send_email", args)
    request = ApprovalRequest.objects.get(pk=submitted["request_id"])
    assert (request.action_type, request.current_params(), request.tool_call_id) == ("send_email", args, "call-1")
    assert request.allowed_decisions == ["approve", "reject"]

    decide("alice", submitted["request_id"], {"decision": "approve"})

    result = host.next_event("result")
    host.finish()
    assert result["resume_data"] == {"action": "approved", "params": args}
    assert result["executed"] == 1 and result["sent"] == [{"to": args["to"], "subject": args["subject"]}]
    assert result["model_saw"] == {"type": "json", "value": {"delivered": 1}}


def test_a_declined_tool_call_never_runs_and_the_model_reads_the_feedback(run_host, decide):
    host = run_host("tool-approval.mjs")
    submitted = host.next_event("submitted")
    feedback = "Not before the board meeting <Thursday>; ask Rita."

    decide("bob", submitted["request_id"], {"decision": "reject", "feedback": feedback})

    result = host.next_event("result")
    host.finish()
    assert result["state"] == "rejected" and result["resume_data"] == {"action": "rejected", "feedback": feedback}
    assert result["executed"] == 0 and "tool-output-denied" in result["chunks"]
    assert result["model_saw"] == {"type": "text", "value": feedback}


def test_a_reviewer_cannot_edit_a_call_mastra_would_run_unedited(run_host, decide):
    host = run_host("tool-approval.mjs")
    submitted = host.next_event("submitted")
    with pytest.raises(AssertionError, match="decision_not_allowed"):
        decide("alice", submitted["request_id"], {"decision": "approve", "edits": {"subject": "Hi"}})
    decide("alice", submitted["request_id"], {"decision": "reject"})
    assert host.next_event("result")["executed"] == 0
    host.finish()


# --- (3) submit_plan --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"decision": "approve"}, PLAN_APPROVED),
        (
            {"decision": "reject", "feedback": "Keep the toggle in settings, not the header."},
            PLAN_REVISE.format(feedback="Keep the toggle in settings, not the header."),
        ),
        ({"decision": "reject"}, PLAN_WAIT),
    ],
    ids=["approved", "rejected-with-feedback", "rejected-without-feedback"],
)
def test_submit_plan_shows_the_model_exactly_our_tool_result(run_host, decide, body, expected):
    host = run_host("submit-plan.mjs", PLAN_MARKDOWN=PLAN)
    submitted = host.next_event("submitted")
    request = ApprovalRequest.objects.get(pk=submitted["request_id"])
    assert request.plan_markdown == PLAN and request.plan_path == submitted["suspended"]["suspendPayload"]["path"]

    decide("alice", submitted["request_id"], body)

    result = host.next_event("result")
    host.finish()
    assert result["tool_result"] == expected
    # The model reads Mastra's tool output; its `content` is the text it acts on.
    assert result["model_saw"]["type"] == "json"
    assert result["model_saw"]["value"]["content"] == result["tool_result"]
    assert result["model_saw"]["value"]["isError"] is False
