"""hitl-controlplane/mastra against a real daphne, with the real @mastra/core (scripted models).

(1) A `requireApproval` tool wrapped by `controlledTool`: approve runs it once through the
handshake (claim, signed grant, complete with the result's digest); the same call entering
the tool again is answered "Not run: already executed"; a claim answer altered in transit is
DecisionRefused and nothing runs; a rejection's feedback reaches the model.
(2) A workflow step's suspend(): the reviewers' validated answer resumes the run; a refusal
cancels it. (3) Mastra's own submit_plan tool reads the server's tool_result byte for byte.
"""

from __future__ import annotations

import time

import pytest

from approvals.models import ApprovalRequest
from audit.chain import digest
from audit.models import AuditEvent
from tests.fixtures.typescript import ClaimTampering, RewritingProxy, swap_submission_id
from tests.interop.test_mastra import PLAN, PLAN_APPROVED, PLAN_REVISE, PLAN_WAIT

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ARGS = {"to": ["dana@example.com"], "subject": "Quarterly numbers", "body": "Attached."}
WAIT_SECONDS = 60


def _request(idempotency_key: str) -> ApprovalRequest:
    """The request the host submitted (it reports the key before it waits)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not (found := ApprovalRequest.objects.filter(idempotency_key=idempotency_key).first()):
        assert time.monotonic() < deadline, f"no request with idempotency key {idempotency_key}"
        time.sleep(0.1)
    return found


def _verbs(request_id) -> list[str]:
    return list(AuditEvent.objects.filter(request_id=request_id).order_by("seq").values_list("verb", flat=True))


# --- (1) requireApproval ------------------------------------------------------------------------


def test_approve_runs_the_tool_once_through_the_handshake_and_a_reentry_is_not_run(run_mastra, decide):
    host = run_mastra("require-approval.mjs", TOOL_CALL_ID="call-approve", REENTER="1")
    waiting = host.next_event("waiting")
    assert (waiting["approval"]["toolName"], waiting["approval"]["args"]) == ("send_report", ARGS)
    request = _request(waiting["idempotency_key"])
    assert (request.action_type, request.current_params(), request.tool_call_id) == (
        "send_report",
        ARGS,
        "call-approve",
    )
    assert request.allowed_decisions == ["approve", "reject"]

    decide("alice", str(request.pk), {"decision": "approve"})

    host.next_event("running")
    result = host.next_event("result")
    assert result["approved"] is True, result
    assert result["sent"] == [{"to": ARGS["to"], "subject": ARGS["subject"]}], result
    assert result["model_saw"] == {"type": "json", "value": {"delivered": 1}}
    reentered = host.next_event("reentered")
    host.finish()
    assert reentered["result"] == f"Not run: already executed (request {request.pk}, succeeded/succeeded)"
    assert len(reentered["sent"]) == 1
    request.refresh_from_db()
    assert (request.state, request.resolution_code, request.attempts) == ("succeeded", "succeeded", 1)
    succeeded = AuditEvent.objects.get(request_id=request.pk, verb="request.succeeded")
    assert succeeded.metadata["result"] == digest({"delivered": 1})
    assert "request.expired" not in _verbs(request.pk)

    # Another process entering the same call (the run restored elsewhere) does not run it either.
    second = run_mastra("reenter.mjs", TOOL_CALL_ID="call-approve")
    assert second.next_event("reentered") == {
        "event": "reentered",
        "result": f"Not run: already executed (request {request.pk}, succeeded/succeeded)",
        "sent": [],
    }
    second.finish()


def _resume_params(path: str, body: dict) -> int | None:
    if path.split("?")[0].endswith("/resume/") and body.get("decided"):
        body["resume_data"]["params"]["to"] = ["mallory@example.com"]
    return None


def _resume_verdict(path: str, body: dict) -> int | None:
    if path.split("?")[0].endswith("/resume/") and body.get("decided"):
        body["resume_data"] = {"action": "approved", "params": ARGS}
    return None


@pytest.mark.parametrize("rewrite", [_resume_params, _resume_verdict], ids=["params", "verdict"])
def test_a_resume_altered_in_transit_is_refused_by_the_host(run_mastra, daphne_server, decide, rewrite):
    proxy = RewritingProxy(daphne_server.port, rewrite)
    try:
        host = run_mastra("require-approval.mjs", url=proxy.url, TOOL_CALL_ID=f"call-{rewrite.__name__}")
        request = _request(host.next_event("waiting")["idempotency_key"])
        decide("alice", str(request.pk), {"decision": "reject" if rewrite is _resume_verdict else "approve"})
        refused = host.next_event("refused")
        host.finish()
    finally:
        proxy.close()
    assert refused["message"].startswith(f"request {request.pk}: the signed decision's"), refused
    assert refused["sent"] == []
    request.refresh_from_db()
    assert request.state in ("approved", "rejected")  # never claimed


def test_a_submission_answer_naming_another_approved_request_is_refused_by_the_host(
    run_mastra, daphne_server, decide, token
):
    """The same agent's send_report with the same args, approved earlier for another call and
    never run: a proxy swaps its id into the review's submission answer. Its signed decision
    names the other call's key, so the host is refused before Mastra is told anything."""
    from hitl_controlplane.client import ControlPlane
    from hitl_controlplane.client._core import submitted_id

    with ControlPlane(daphne_server.url, token) as honest:
        old_id = submitted_id(honest.submit_action("send_report", params=ARGS, tool_call_id="call-older"))
    decide("alice", old_id, {"decision": "approve"})
    proxy = RewritingProxy(daphne_server.port, swap_submission_id(old_id))
    try:
        host = run_mastra("require-approval.mjs", url=proxy.url, TOOL_CALL_ID="call-swap")
        request = _request(host.next_event("waiting")["idempotency_key"])
        refused = host.next_event("refused")  # no "running", no "result"
        host.finish()
    finally:
        proxy.close()
    assert refused["message"].startswith(f"request {old_id}: the signed decision's"), refused
    assert refused["sent"] == []
    old = ApprovalRequest.objects.get(pk=old_id)
    assert (old.state, old.attempts, old.result) == ("approved", 0, None)
    request.refresh_from_db()
    assert (request.state, request.attempts) == ("pending_approval", 0)


@pytest.mark.parametrize(
    ("tampering", "expected"),
    [("alter_params", "not the granted ones"), ("decision_as_grant", "grant_signature does not match")],
)
def test_a_claim_answer_altered_in_transit_is_refused_and_nothing_runs(
    run_mastra, daphne_server, decide, tampering, expected
):
    proxy = RewritingProxy(daphne_server.port, getattr(ClaimTampering(), tampering))
    try:
        host = run_mastra("require-approval.mjs", url=proxy.url, TOOL_CALL_ID=f"call-{tampering}", REENTER="1")
        request = _request(host.next_event("waiting")["idempotency_key"])
        decide("alice", str(request.pk), {"decision": "approve"})
        result = host.next_event("result")
        reentered = host.next_event("reentered")
        host.finish()
    finally:
        proxy.close()
    assert result["sent"] == [] and reentered["sent"] == []
    # Mastra hands the tool's error (DecisionRefused) to the model: the refusal, never a result.
    assert expected in str(result["model_saw"]), result
    assert "tool-error" in result["chunks"]


def test_the_first_processs_grant_replayed_to_a_second_process_is_refused(run_mastra, daphne_server, decide):
    proxy = RewritingProxy(daphne_server.port, ClaimTampering().replay_first_grant)
    try:
        host = run_mastra("require-approval.mjs", url=proxy.url, TOOL_CALL_ID="call-replay")
        request = _request(host.next_event("waiting")["idempotency_key"])
        decide("alice", str(request.pk), {"decision": "approve"})
        host.next_event("running")
        assert len(host.next_event("result")["sent"]) == 1
        host.finish()
        second = run_mastra("reenter.mjs", url=proxy.url, TOOL_CALL_ID="call-replay")
        refused = second.next_event("refused")  # DecisionRefused thrown by the tool
        second.finish()
    finally:
        proxy.close()
    assert "nonce" in refused["message"] and refused["sent"] == [], refused
    request.refresh_from_db()
    assert (request.state, request.attempts) == ("succeeded", 1)


def test_a_host_killed_between_claim_and_complete_ends_outcome_unknown_and_never_runs_again(
    run_mastra, short_lease_server, decide
):
    from approvals.execution import runner

    host = run_mastra(
        "require-approval.mjs", url=short_lease_server.url, TOOL_CALL_ID="call-killed", TOOL_SECONDS="600"
    )
    request = _request(host.next_event("waiting")["idempotency_key"])
    decide("alice", str(request.pk), {"decision": "approve"})
    host.next_event("running")
    host.stop()  # killed while the tool runs: no complete, no more renewals
    deadline = time.monotonic() + WAIT_SECONDS
    while runner.resolve_executions()["lost"] == 0:  # the sweeper, run directly, once the lease ran out
        assert time.monotonic() < deadline, "the lease never ran out"
        time.sleep(0.2)
    request.refresh_from_db()
    assert (request.state, request.resolution_code) == ("failed", "outcome_unknown")

    again = run_mastra("reenter.mjs", url=short_lease_server.url, TOOL_CALL_ID="call-killed")
    reentered = again.next_event("reentered")
    again.finish()
    assert reentered["result"] == f"Not run: already executed (request {request.pk}, failed/outcome_unknown)"
    assert reentered["sent"] == []
    assert "request.expired" not in _verbs(request.pk)


def test_a_rejection_never_runs_the_tool_and_the_model_reads_the_feedback(run_mastra, decide):
    host = run_mastra("require-approval.mjs", TOOL_CALL_ID="call-reject")
    request = _request(host.next_event("waiting")["idempotency_key"])
    feedback = "Not before the board meeting <Thursday>; ask Rita."

    decide("bob", str(request.pk), {"decision": "reject", "feedback": feedback})

    result = host.next_event("result")
    host.finish()
    assert result["approved"] is False and result["state"] == "rejected"
    assert result["sent"] == [] and "tool-output-denied" in result["chunks"]
    assert result["model_saw"] == {"type": "text", "value": feedback}


# --- (2) a workflow step's suspension ------------------------------------------------------------


@pytest.mark.parametrize(("approved", "receipt"), [(True, "approved:150.13"), (False, "rejected:150.13")])
def test_a_suspended_step_resumes_with_the_reviewers_validated_answer(run_mastra, decide, approved, receipt):
    host = run_mastra("workflow.mjs")
    started = host.next_event("started")
    assert started["status"] == "suspended"
    request = _request(f"{started['run_id']}:approval")
    assert (request.kind, request.action_type) == ("suspension", "approval-flow.approval")
    assert request.current_params() == {"amount": 150.13, "reason": "Amount exceeds automatic approval limit"}
    with pytest.raises(AssertionError, match="invalid_resume_data"):
        decide("alice", str(request.pk), {"decision": "respond", "resume_data": {"approved": "yes"}})

    decide("alice", str(request.pk), {"decision": "respond", "resume_data": {"approved": approved}})

    result = host.next_event("result")
    host.finish()
    assert (result["resumed"], result["status"], result["resume_data"]) == (True, "success", {"approved": approved})
    assert result["result"]["receipt"] == receipt
    assert result["executions"] == {"normalize": 1, "approval": 2, "receipt": 1}


def test_a_refused_suspension_cancels_the_run(run_mastra, decide):
    host = run_mastra("workflow.mjs")
    started = host.next_event("started")
    request = _request(f"{started['run_id']}:approval")

    decide("bob", str(request.pk), {"decision": "reject", "feedback": "Ask finance first."})

    result = host.next_event("result")
    host.finish()
    assert (result["resumed"], result["state"], result["resume_data"], result["status"]) == (
        False,
        "rejected",
        None,
        "canceled",
    )
    assert result["executions"] == {"normalize": 1, "approval": 1, "receipt": 0}


# --- (3) submit_plan ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"decision": "approve"}, PLAN_APPROVED),
        (
            {"decision": "reject", "feedback": "Keep the toggle in settings."},
            PLAN_REVISE.format(feedback="Keep the toggle in settings."),
        ),
        ({"decision": "reject"}, PLAN_WAIT),
    ],
    ids=["approved", "rejected-with-feedback", "rejected-without-feedback"],
)
def test_submit_plan_hands_the_model_the_servers_tool_result_byte_for_byte(run_mastra, decide, body, expected):
    host = run_mastra("submit-plan.mjs", PLAN_MARKDOWN=PLAN)
    suspended = host.next_event("suspended")
    request = _request(suspended["idempotency_key"])
    assert request.plan_markdown == PLAN
    assert request.plan_path == suspended["suspended"]["suspendPayload"]["path"]

    decide("alice", str(request.pk), body)

    result = host.next_event("result")
    host.finish()
    assert result["tool_result"] == expected
    assert result["model_saw"]["value"]["content"] == expected
    assert result["model_saw"]["value"]["isError"] is False
