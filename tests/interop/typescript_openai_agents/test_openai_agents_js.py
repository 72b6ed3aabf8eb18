"""The OpenAI Agents SDK for JS (`@openai/agents`, real package, scripted model) meets a real daphne.

The host (clients/typescript/hosts/openai-agents/scripts/agent.mjs) runs an agent whose
`transfer_funds` tool is `tool(controlledTool(...))`: the run interrupts, the interruption is
submitted as an action and the RunState saved with `toString()`; a reviewer decides through
the services; a second node process restores the state with `RunState.fromString`, turns the
verified decision into `state.approve` / `state.reject` and runs on, and the SDK runs the
tool, whose `execute` goes through the handshake keyed by the call id.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from approvals import services
from approvals.models import ApprovalRequest
from approvals.people import Person
from audit.chain import digest
from audit.models import AuditEvent
from tests.fixtures.revisions import current_revision
from tests.fixtures.typescript import (
    ClaimTampering,
    RewritingProxy,
    alter_resume_params,
    alter_resume_verdict,
    swap_submission_id,
)
from tests.interop.conftest import _npm_ci
from tests.interop.typescript_hosts import (
    HANG_GUARD_SECONDS,
    HOSTS,
    HostRuns,
    save_transfer_rule,
    start_until_interrupted,
    verbs,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HOST = HOSTS / "openai-agents"
RESULT = json.dumps({"sent": 90, "to": "acme"}, separators=(",", ":"))


@pytest.fixture(scope="session")
def openai_agents_host(typescript_package) -> Path:  # the client is built first
    _npm_ci(HOST)
    return HOST


@pytest.fixture
def openai_js_run(openai_agents_host, daphne_server, token, server_public_key, tmp_path):
    runs = HostRuns(HOST, url=daphne_server.url, token=token, public_keys=server_public_key, state_dir=tmp_path)
    yield runs
    runs.stop_all()


@pytest.fixture
def openai_js_transfer_rule(admin_user):
    return save_transfer_rule(admin_user)


def test_approve_runs_the_tool_once_and_a_state_restored_twice_is_answered_already_executed(
    openai_js_run, people, openai_js_transfer_rule
):
    request_id = start_until_interrupted(openai_js_run, "oa-run-1")
    services.approve(request_id, revision=current_revision(request_id), actor=Person(people["alice"]))

    first = openai_js_run("resume", "oa-run-1")
    assert first.next_event("decided")["approved"] == [True]
    assert first.next_event("ran")["params"] == {"amount": 90, "to": "acme"}
    finished = first.next_event("finished")
    first.finish()
    assert finished["read"] == [RESULT]
    request = ApprovalRequest.objects.get(pk=request_id)
    assert (request.state, request.resolution_code, request.attempts) == ("succeeded", "succeeded", 1)
    succeeded = AuditEvent.objects.get(request_id=request_id, verb="request.succeeded")
    assert succeeded.metadata["result"] == digest(RESULT)

    # The same saved state restored again, in another process: the tool is not run again.
    second = openai_js_run("resume", "oa-run-1")
    assert second.next_event("decided")["approved"] == [True]
    finished = second.next_event("finished")  # no "ran" before it
    second.finish()
    (read,) = finished["read"]
    assert read.startswith(f"Not run: already executed (request {request_id}, succeeded/"), read
    assert "request.expired" not in verbs(request_id)
    assert ApprovalRequest.objects.get(pk=request_id).attempts == 1


def test_an_edited_approval_runs_with_the_edited_params(openai_js_run, people, openai_js_transfer_rule):
    request_id = start_until_interrupted(openai_js_run, "oa-edit-1")
    services.approve_with_edits(
        request_id, revision=current_revision(request_id), actor=Person(people["alice"]), edits={"amount": 50}
    )
    resumed = openai_js_run("resume", "oa-edit-1")
    resumed.next_event("decided")
    assert resumed.next_event("ran")["params"] == {"amount": 50, "to": "acme"}
    finished = resumed.next_event("finished")
    resumed.finish()
    assert finished["read"] == [json.dumps({"sent": 50, "to": "acme"}, separators=(",", ":"))]
    assert ApprovalRequest.objects.get(pk=request_id).state == "succeeded"


def test_reject_with_feedback_is_what_the_model_reads(openai_js_run, people, openai_js_transfer_rule):
    request_id = start_until_interrupted(openai_js_run, "oa-reject-1")
    feedback = "Not this quarter: ask finance first."
    services.reject(request_id, revision=current_revision(request_id), actor=Person(people["alice"]), feedback=feedback)
    resumed = openai_js_run("resume", "oa-reject-1")
    assert resumed.next_event("decided")["approved"] == [False]
    finished = resumed.next_event("finished")  # no "ran"
    resumed.finish()
    (read,) = finished["read"]
    assert feedback in read, read
    assert ApprovalRequest.objects.get(pk=request_id).state == "rejected"


@pytest.mark.parametrize("tampering", ["alter_params", "decision_as_grant"])
def test_a_claim_answer_altered_in_transit_is_refused_and_nothing_runs(
    openai_js_run, daphne_server, people, openai_js_transfer_rule, tampering
):
    run_id = f"oa-claim-{tampering}"
    request_id = start_until_interrupted(openai_js_run, run_id)
    services.approve(request_id, revision=current_revision(request_id), actor=Person(people["alice"]))
    proxy = RewritingProxy(daphne_server.port, getattr(ClaimTampering(), tampering))
    try:
        resumed = openai_js_run("resume", run_id, url=proxy.url)
        resumed.next_event("decided")
        refused = resumed.next_event("refused")  # no "ran" before it
        resumed.finish()
    finally:
        proxy.close()
    expected = "not the granted ones" if tampering == "alter_params" else "grant_signature does not match"
    assert expected in refused["message"], refused
    assert refused["read"] == []  # the run ended: no tool result reached the model
    assert ApprovalRequest.objects.get(pk=request_id).state == "executing"  # claimed, never completed


def test_the_first_processs_grant_replayed_to_a_second_process_is_refused(
    openai_js_run, daphne_server, people, openai_js_transfer_rule
):
    request_id = start_until_interrupted(openai_js_run, "oa-replay-1")
    services.approve(request_id, revision=current_revision(request_id), actor=Person(people["alice"]))
    proxy = RewritingProxy(daphne_server.port, ClaimTampering().replay_first_grant)
    try:
        first = openai_js_run("resume", "oa-replay-1", url=proxy.url)
        first.next_event("decided")
        first.next_event("ran")
        first.next_event("finished")
        first.finish()
        second = openai_js_run("resume", "oa-replay-1", url=proxy.url)
        second.next_event("decided")
        refused = second.next_event("refused")  # no "ran" before it
        second.finish()
    finally:
        proxy.close()
    assert "nonce" in refused["message"], refused
    request = ApprovalRequest.objects.get(pk=request_id)
    assert (request.state, request.attempts) == ("succeeded", 1)


def test_a_host_killed_between_claim_and_complete_ends_outcome_unknown_and_never_runs_again(
    openai_js_run, short_lease_server, people, openai_js_transfer_rule
):
    from approvals.execution import runner

    request_id = start_until_interrupted(openai_js_run, "oa-killed-1")
    services.approve(request_id, revision=current_revision(request_id), actor=Person(people["alice"]))
    resumed = openai_js_run("resume", "oa-killed-1", url=short_lease_server.url, TOOL_SECONDS="600")
    resumed.next_event("decided")
    resumed.next_event("ran")
    resumed.stop()  # killed while the tool runs: no complete, no more renewals
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while runner.resolve_executions()["lost"] == 0:  # the sweeper, run directly, once the lease ran out
        assert time.monotonic() < deadline, "the lease never ran out"
        time.sleep(0.2)
    request = ApprovalRequest.objects.get(pk=request_id)
    assert (request.state, request.resolution_code) == ("failed", "outcome_unknown")

    again = openai_js_run("resume", "oa-killed-1", url=short_lease_server.url)
    again.next_event("decided")
    finished = again.next_event("finished")  # no "ran"
    again.finish()
    assert finished["read"] == [f"Not run: already executed (request {request_id}, failed/outcome_unknown)"]
    assert "request.expired" not in verbs(request_id)


@pytest.mark.parametrize("rewrite", [alter_resume_params, alter_resume_verdict], ids=["params", "verdict"])
def test_a_resume_altered_in_transit_is_refused_before_the_sdk_is_told_anything(
    openai_js_run, daphne_server, people, openai_js_transfer_rule, rewrite
):
    run_id = f"oa-resume-{rewrite.__name__}"
    request_id = start_until_interrupted(openai_js_run, run_id)
    if rewrite is alter_resume_verdict:  # rejected, and rewritten in transit to an approval
        services.reject(request_id, revision=current_revision(request_id), actor=Person(people["alice"]))
    else:
        services.approve(request_id, revision=current_revision(request_id), actor=Person(people["alice"]))
    proxy = RewritingProxy(daphne_server.port, rewrite)
    try:
        resumed = openai_js_run("resume", run_id, url=proxy.url)
        refused = resumed.next_event("refused")  # no "decided", no "ran"
        resumed.finish()
    finally:
        proxy.close()
    assert refused["message"].startswith(f"request {request_id}: the signed decision's"), refused
    assert refused["read"] == []
    assert ApprovalRequest.objects.get(pk=request_id).state in ("approved", "rejected")  # never claimed


def test_a_submission_answer_naming_another_approved_request_is_refused_and_nothing_runs(
    openai_js_run, daphne_server, people, openai_js_transfer_rule
):
    """The resume phase submits its call again (idempotent) to find its request; a proxy swaps
    into that answer the id of another approved request of the same agent, tool and params
    (another run). Its signed decision names the other run's key: refused before the SDK is
    told anything, and neither request is claimed."""
    old_id = start_until_interrupted(openai_js_run, "oa-swap-older")
    services.approve(old_id, revision=current_revision(old_id), actor=Person(people["alice"]))
    request_id = start_until_interrupted(openai_js_run, "oa-swap-new")
    services.approve(request_id, revision=current_revision(request_id), actor=Person(people["alice"]))
    proxy = RewritingProxy(daphne_server.port, swap_submission_id(old_id))
    try:
        resumed = openai_js_run("resume", "oa-swap-new", url=proxy.url)
        refused = resumed.next_event("refused")  # no "decided", no "ran"
        resumed.finish()
    finally:
        proxy.close()
    assert f"request {old_id}: the signed decision's idempotency_key" in refused["message"], refused
    assert refused["read"] == []
    for request in ApprovalRequest.objects.filter(pk__in=[old_id, request_id]):
        assert (request.state, request.attempts, request.result) == ("approved", 0, None), request.pk
