"""Someone between a Mastra workflow host and a real daphne: a suspension's answer that does
not verify never resumes the run.

The host (clients/typescript/hosts/mastra/live/workflow.mjs: seed 002's approval-flow on the
real @mastra/core) pauses at its approval step and hands the suspension to
`resumeSuspendedRun`. A loopback proxy (tests/fixtures/typescript.RewritingProxy) rewrites
the signed resume answer (the reviewers' answer, or a rejection turned into an answer) or
the submission answer (another answered suspension of the same agent): DecisionRefused,
and the step never resumes, so the workflow never runs on an answer nobody gave.
"""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from tests.fixtures.typescript import RewritingProxy, swap_submission_id
from tests.interop.typescript_mastra.test_mastra_integration import _request

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

NOT_RESUMED = {"normalize": 1, "approval": 1, "receipt": 0}


def _answered_yes(path: str, body: dict) -> int | None:
    """Whatever the reviewers said, the host reads `{"approved": true}`."""
    if path.split("?")[0].endswith("/resume/") and body.get("decided"):
        body["resume_data"] = {"approved": True}
    return None


@pytest.mark.parametrize(
    "decision",
    [{"decision": "respond", "resume_data": {"approved": False}}, {"decision": "reject", "feedback": "No."}],
    ids=["answer-altered", "rejection-turned-into-an-answer"],
)
def test_a_resume_answer_altered_in_transit_never_resumes_the_run(run_mastra, daphne_server, decide, decision):
    proxy = RewritingProxy(daphne_server.port, _answered_yes)
    try:
        host = run_mastra("workflow.mjs", url=proxy.url)
        started = host.next_event("started")
        request = _request(f"{started['run_id']}:approval")
        decide("alice", str(request.pk), decision)
        refused = host.next_event("refused")  # no "result"
        host.finish()
    finally:
        proxy.close()
    assert refused["message"].startswith(f"request {request.pk}: the signed decision's"), refused
    assert refused["executions"] == NOT_RESUMED


def test_a_submission_answer_naming_another_answered_suspension_never_resumes_the_run(
    run_mastra, daphne_server, decide
):
    """An earlier run of the same workflow, answered "approved": a proxy swaps its id into the
    next run's submission answer. Its signed decision names the earlier run's key."""
    earlier = run_mastra("workflow.mjs")
    older = _request(f"{earlier.next_event('started')['run_id']}:approval")
    decide("alice", str(older.pk), {"decision": "respond", "resume_data": {"approved": True}})
    assert earlier.next_event("result")["resumed"] is True
    earlier.finish()

    proxy = RewritingProxy(daphne_server.port, swap_submission_id(str(older.pk)))
    try:
        host = run_mastra("workflow.mjs", url=proxy.url)
        started = host.next_event("started")
        refused = host.next_event("refused")
        host.finish()
    finally:
        proxy.close()
    assert refused["message"].startswith(f"request {older.pk}: the signed decision's"), refused
    assert refused["executions"] == NOT_RESUMED
    request = ApprovalRequest.objects.get(idempotency_key=f"{started['run_id']}:approval")
    assert request.state == "pending_approval"  # nobody answered this run's suspension
