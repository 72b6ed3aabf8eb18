"""The TypeScript client (clients/typescript, built) meets a real daphne.

A Node agent (tests/client/typescript/approve-and-run.mjs) submits an action, a reviewer
approves it with an edit through the services, and the agent's `waitForDecision` verifies
the signed decision against the call it made; then `runApproved` claims with a fresh nonce,
verifies the signed grant and runs the tool once with the approved params. A second process
with the same idempotency key finds the same request and is answered "Not run: already
executed". With no node, the test skips with the reason (fails under REQUIRE_SERVICES=1).

The grant half needs the server's grant (grant spec v1, landing on another branch): it is
skipped, with the reason printed, only while the claim answer carries no grant_signature,
so it runs by itself once the server signs grants.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from approvals import services
from approvals.models import ApprovalRequest
from approvals.people import Person
from tests.fixtures.revisions import current_revision
from tests.fixtures.typescript import (
    ClaimTampering,
    RewritingProxy,
    alter_resume_params,
    alter_resume_verdict,
    swap_submission_id,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HOST = Path(__file__).resolve().parent / "typescript" / "approve-and-run.mjs"
# Bounds how long a broken host can hang the test; no assertion depends on timing.
HANG_GUARD_SECONDS = 90
NO_GRANT = "the answer carries no grant_signature"


class Agent:
    """One run of the Node agent; `next_event(name)` reads its JSON lines in order."""

    def __init__(self, package: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            ["node", str(HOST)],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PACKAGE": package.as_uri(), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def next_event(self, *names: str) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=HANG_GUARD_SECONDS)
            stderr = self.process.stderr.read() if self.process.stderr else ""
            raise AssertionError(f"the agent exited ({self.process.returncode}) before {names}:\n{stderr}")
        event = json.loads(line)
        assert event["event"] in names, event
        return event

    def finish(self) -> None:
        code = self.process.wait(timeout=HANG_GUARD_SECONDS)
        stderr = self.process.stderr.read() if self.process.stderr else ""
        assert code == 0, stderr

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def run_agent(typescript_package, daphne_server, token, server_public_key):
    started: list[Agent] = []

    def _run(url: str | None = None, **env: str) -> Agent:
        agent = Agent(
            typescript_package,
            {
                "CONTROLPLANE_URL": url or daphne_server.url,
                "CONTROLPLANE_TOKEN": token,
                "CONTROLPLANE_PUBLIC_KEYS": server_public_key,
                "CONTROLPLANE_AGENT": "mail-bot",
                **env,
            },
        )
        started.append(agent)
        return agent

    yield _run
    for agent in started:
        agent.stop()


def _approve_with_an_edit(request_id: str, reviewer) -> None:
    services.approve_with_edits(
        request_id, revision=current_revision(request_id), actor=Person(reviewer), edits={"amount": 50}
    )


def test_the_typescript_client_verifies_a_real_decision(run_agent, people, transfer_rule):
    agent = run_agent(IDEMPOTENCY_KEY="ts-verify-1")
    request_id = agent.next_event("submitted")["id"]
    assert ApprovalRequest.objects.get(pk=request_id).state == "pending_approval"
    _approve_with_an_edit(request_id, people["alice"])

    decided = agent.next_event("decided")
    assert decided["state"] == "approved" and decided["approved"] is True
    assert decided["params"] == {"amount": 50, "to": "acme", "memo": "Q3 \u00e9 \U0001f4b8", "rate": 0.1}
    signed = decided["decision"]
    assert signed["agent"]["name"] == "mail-bot" and signed["action_type"] == "transfer_funds"
    assert signed["tool_call_id"] == "call_7" and signed["idempotency_key"] == "ts-verify-1"
    agent.finish()


def test_the_typescript_client_runs_an_approved_call_once(run_agent, people, transfer_rule):
    agent = run_agent(IDEMPOTENCY_KEY="ts-run-1", CLAIM="1")
    request_id = agent.next_event("submitted")["id"]
    _approve_with_an_edit(request_id, people["alice"])
    agent.next_event("decided")
    event = agent.next_event("ran", "refused")
    if event["event"] == "refused" and NO_GRANT in event["message"]:
        agent.finish()
        pytest.skip(f"the server does not sign execution grants yet (grant spec v1): {event['message']}")
    assert event["event"] == "ran", event
    assert event["params"] == {"amount": 50, "to": "acme", "memo": "Q3 \u00e9 \U0001f4b8", "rate": 0.1}
    outcome = agent.next_event("outcome")
    assert outcome["ran"] is True and outcome["completed"] is True, outcome
    assert outcome["result"] == {"sent": 50}
    agent.finish()
    request = ApprovalRequest.objects.get(pk=request_id)
    assert request.state == "succeeded"

    # A restarted host (same idempotency key) finds the same request and is told it already ran.
    again = run_agent(IDEMPOTENCY_KEY="ts-run-1", CLAIM="1")
    assert again.next_event("submitted")["id"] == request_id
    again.next_event("decided")
    outcome = again.next_event("outcome")
    assert outcome["ran"] is False, outcome
    assert outcome["toolResult"].startswith(f"Not run: already executed (request {request_id}, succeeded/")
    again.finish()


def test_run_tool_finds_the_hosts_request_and_runs_once_across_clients(run_agent, people, transfer_rule):
    agent = run_agent(IDEMPOTENCY_KEY="run-ts-1:call_7", MODE="tool")
    request_id = agent.next_event("submitted")["id"]
    _approve_with_an_edit(request_id, people["alice"])
    agent.next_event("decided")
    event = agent.next_event("ran", "refused")
    if event["event"] == "refused" and NO_GRANT in event["message"]:
        agent.finish()
        pytest.skip(f"the server does not sign execution grants yet (grant spec v1): {event['message']}")
    assert event["params"]["amount"] == 50, event
    assert agent.next_event("tool_result")["result"] == {"sent": 50}
    second = agent.next_event("tool_result")["result"]
    assert second.startswith(f"Not run: already executed (request {request_id}, succeeded/"), second
    agent.finish()
    assert ApprovalRequest.objects.get(pk=request_id).state == "succeeded"


@pytest.mark.parametrize("rewrite", [alter_resume_params, alter_resume_verdict], ids=["params", "verdict"])
def test_a_resume_altered_in_transit_is_refused_in_node(run_agent, daphne_server, people, transfer_rule, rewrite):
    proxy = RewritingProxy(daphne_server.port, rewrite)
    try:
        agent = run_agent(url=proxy.url, IDEMPOTENCY_KEY=f"ts-tamper-{rewrite.__name__}", CLAIM="1")
        request_id = agent.next_event("submitted")["id"]
        if rewrite is alter_resume_verdict:
            services.reject(request_id, revision=current_revision(request_id), actor=Person(people["alice"]))
        else:
            _approve_with_an_edit(request_id, people["alice"])
        refused = agent.next_event("refused")
        assert refused["message"].startswith(f"request {request_id}: the signed decision's")
        agent.finish()
    finally:
        proxy.close()
    assert ApprovalRequest.objects.get(pk=request_id).state in ("approved", "rejected")  # never claimed


def test_a_submission_answer_naming_another_approved_request_is_refused_in_node(
    run_agent, daphne_server, people, transfer_rule
):
    """The same agent, action type, params and tool call id, approved earlier under another
    idempotency key: a proxy swaps its id into the submission answer. The signed decision the
    agent then reads names the other call's key, so nothing is claimed and nothing runs."""
    older = run_agent(IDEMPOTENCY_KEY="ts-swap-older")
    old_id = older.next_event("submitted")["id"]
    _approve_with_an_edit(old_id, people["alice"])
    older.next_event("decided")
    older.finish()  # verified, never claimed: an approval waiting to be run
    proxy = RewritingProxy(daphne_server.port, swap_submission_id(old_id))
    try:
        agent = run_agent(url=proxy.url, IDEMPOTENCY_KEY="ts-swap-new", CLAIM="1")
        assert agent.next_event("submitted")["id"] == old_id  # what the altered answer said
        refused = agent.next_event("refused")  # no "decided", no "ran"
        agent.finish()
    finally:
        proxy.close()
    assert 'the signed decision\'s idempotency_key is "ts-swap-older"' in refused["message"], refused
    old = ApprovalRequest.objects.get(pk=old_id)
    assert (old.state, old.attempts, old.result) == ("approved", 0, None)
    (new,) = ApprovalRequest.objects.filter(idempotency_key="ts-swap-new")
    assert (new.state, new.attempts) == ("pending_approval", 0)


def _refused_before_running(agent: Agent) -> str:
    event = agent.next_event("ran", "refused")
    if event["event"] == "refused" and NO_GRANT in event["message"]:
        agent.finish()
        pytest.skip(f"the server does not sign execution grants yet (grant spec v1): {event['message']}")
    assert event["event"] == "refused", f"the tool ran: {event}"
    agent.finish()
    return event["message"]


@pytest.mark.parametrize("tampering", ["alter_params", "decision_as_grant"])
def test_an_altered_claim_answer_is_refused_before_the_tool_runs(
    run_agent, daphne_server, people, transfer_rule, tampering
):
    proxy = RewritingProxy(daphne_server.port, getattr(ClaimTampering(), tampering))
    try:
        agent = run_agent(url=proxy.url, IDEMPOTENCY_KEY=f"ts-claim-{tampering}", CLAIM="1")
        request_id = agent.next_event("submitted")["id"]
        _approve_with_an_edit(request_id, people["alice"])
        agent.next_event("decided")
        message = _refused_before_running(agent)
    finally:
        proxy.close()
    expected = "not the granted ones" if tampering == "alter_params" else "grant_signature does not match"
    assert expected in message, message


def test_the_first_processs_grant_replayed_to_a_second_process_is_refused(
    run_agent, daphne_server, people, transfer_rule
):
    proxy = RewritingProxy(daphne_server.port, ClaimTampering().replay_first_grant)
    try:
        first = run_agent(url=proxy.url, IDEMPOTENCY_KEY="ts-replay-1", CLAIM="1")
        request_id = first.next_event("submitted")["id"]
        _approve_with_an_edit(request_id, people["alice"])
        first.next_event("decided")
        event = first.next_event("ran", "refused")
        if event["event"] == "refused" and NO_GRANT in event["message"]:
            first.finish()
            pytest.skip(f"the server does not sign execution grants yet (grant spec v1): {event['message']}")
        first.next_event("outcome")
        first.finish()
        second = run_agent(url=proxy.url, IDEMPOTENCY_KEY="ts-replay-1", CLAIM="1")
        second.next_event("submitted")
        second.next_event("decided")
        message = _refused_before_running(second)
    finally:
        proxy.close()
    assert "nonce" in message, message
    assert ApprovalRequest.objects.get(pk=request_id).state == "succeeded"


def test_a_host_killed_between_claim_and_complete_ends_outcome_unknown_and_never_runs_again(
    run_agent, short_lease_server, people, transfer_rule
):
    from approvals.execution import runner

    agent = run_agent(url=short_lease_server.url, IDEMPOTENCY_KEY="ts-killed-1", CLAIM="1", TOOL_SECONDS="600")
    request_id = agent.next_event("submitted")["id"]
    _approve_with_an_edit(request_id, people["alice"])
    agent.next_event("decided")
    event = agent.next_event("ran", "refused")
    if event["event"] == "refused" and NO_GRANT in event["message"]:
        agent.finish()
        pytest.skip(f"the server does not sign execution grants yet (grant spec v1): {event['message']}")
    agent.stop()  # killed while the tool runs: no complete, no more renewals
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while runner.resolve_executions()["lost"] == 0:  # the sweeper, run directly, once the lease ran out
        assert time.monotonic() < deadline, "the lease never ran out"
        time.sleep(0.2)
    request = ApprovalRequest.objects.get(pk=request_id)
    assert (request.state, request.resolution_code) == ("failed", "outcome_unknown")

    again = run_agent(url=short_lease_server.url, IDEMPOTENCY_KEY="ts-killed-1", CLAIM="1")
    again.next_event("submitted")
    again.next_event("decided")
    outcome = again.next_event("outcome")
    assert outcome["toolResult"] == f"Not run: already executed (request {request_id}, failed/outcome_unknown)"
    again.finish()
