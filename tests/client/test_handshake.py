"""The execution handshake (hitl_controlplane.handshake) against the server, in process.

The client talks to the real server through the guards' loopback claim_proxy (an httpx
transport around Django, tests/guards/client_binding_story.py), extended to rewrite claim
answers. An approved call runs exactly once with the approved params and ends succeeded
with its result's digest in the audit log; a second run of the same decision (a restored
state, a second process) answers "already executed"; a claim answer with altered params,
another call's or another claim's grant, or a decision where the grant belongs is
DecisionRefused and nothing runs; a lease that runs out ends failed/outcome_unknown,
is never run again, and a late report changes nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime

import httpx
import pytest
from django.core.handlers.wsgi import WSGIHandler

from agents.models import Agent
from approvals import services
from approvals.execution import runner
from approvals.models import ApprovalRequest
from approvals.people import Person
from audit.chain import Actor, digest
from audit.models import AuditEvent
from hitl_controlplane.client import ControlPlane, ControlPlaneError, DecisionRefused
from hitl_controlplane.client.langchain_hitl import answer_interrupt
from hitl_controlplane.decisions import SubmittedCall
from hitl_controlplane.grants import verify_grant
from hitl_controlplane.handshake import claim_approved, run_approved
from tests.guards.client_binding_story import Proxy

pytestmark = pytest.mark.django_db

PARAMS = {"amount": 900, "to": "acme", "memo": "Rechnung №42"}


class ClaimProxy(Proxy):
    """The guards' claim_proxy, which can also rewrite claim answers.

    `claim(status, body, sent)`: what the client reads instead of a claim answer (None:
    the answer as is); `sent` is the JSON the client sent (its nonce). Every claim answer
    that passes is kept in `claims`.
    """

    def __init__(self) -> None:
        super().__init__()
        self.claim: Callable[[int, dict, dict], dict | None] | None = None
        self.claims: list[dict] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if not request.url.path.endswith("/claim/"):
            return response
        body = json.loads(response.read())
        if response.status_code == 200:
            self.claims.append(body)
        replaced = self.claim(response.status_code, body, json.loads(request.content)) if self.claim else None
        if replaced is None:
            return httpx.Response(response.status_code, json=body)
        return httpx.Response(200, json=replaced)


@pytest.fixture
def claim_proxy(people) -> ClaimProxy:
    claim_proxy = ClaimProxy()
    alice = Person(people["alice"])
    # A reviewer approves each submission as its answer passes.
    claim_proxy.on_submitted = lambda request_id: services.approve(request_id, actor=alice, revision=1)
    return claim_proxy


def client(token: str, claim_proxy: ClaimProxy, key: str) -> ControlPlane:
    return ControlPlane("http://testserver", token, poll_wait=0.2, retries=0, transport=claim_proxy, public_keys=[key])


@pytest.fixture
def handshake_cp(token, claim_proxy, server_public_key):
    with client(token, claim_proxy, server_public_key) as opened:
        yield opened


@pytest.fixture
def approved_call(handshake_cp):
    """`approved_call(key)`: a transfer submitted and approved; its resume and the call as this client made it."""

    def _approved(key: str = "transfer-1"):
        resume = handshake_cp.request_approval("transfer_funds", params=PARAMS, idempotency_key=key)
        return resume, SubmittedCall.action("transfer_funds", PARAMS, idempotency_key=key)

    return _approved


class Tool:
    """A tool that notes each run."""

    def __init__(self, seconds: float = 0) -> None:
        self.runs: list[dict] = []
        self.seconds = seconds

    def __call__(self, **params) -> str:
        self.runs.append(params)
        time.sleep(self.seconds)
        return f"sent {params['amount']} to {params['to']}"


def verbs(request_id: str) -> list[str]:
    return list(AuditEvent.objects.filter(request_id=request_id).order_by("seq").values_list("verb", flat=True))


# --- Approve: once, exactly as approved --------------------------------------------------------------


def test_an_approved_call_runs_once_with_the_approved_params_and_ends_succeeded_with_its_digest(handshake_cp):
    runs = []

    @handshake_cp.require_approval("transfer_funds")
    def transfer_funds(amount: int, to: str, memo: str) -> str:
        runs.append({"amount": amount, "to": to, "memo": memo})
        return f"sent {amount}"

    assert transfer_funds(**PARAMS) == "sent 900"
    assert runs == [PARAMS]
    request = ApprovalRequest.objects.get()
    assert (request.state, request.resolution_code, request.attempts) == ("succeeded", "succeeded", 1)
    succeeded = AuditEvent.objects.get(request_id=request.pk, verb="request.succeeded")
    assert succeeded.metadata["result"] == digest("sent 900")
    assert "request.expired" not in verbs(request.pk)


def test_the_same_decision_run_twice_runs_once_and_then_answers_already_executed(handshake_cp, approved_call):
    """A restored state, a retried step, a second process: the second run is the tool's text, not a run."""
    resume, call = approved_call()
    tool = Tool()
    assert run_approved(handshake_cp, resume, call, tool) == "sent 900 to acme"
    again = run_approved(handshake_cp, resume, call, tool)
    assert again == f"Not run: already executed (request {resume.request_id}, succeeded/succeeded)"
    assert tool.runs == [PARAMS]


def test_a_grant_names_the_claims_nonce_attempt_and_revision(handshake_cp, approved_call, claim_proxy):
    resume, call = approved_call()
    claimed = claim_approved(handshake_cp, resume, call)
    answer = claim_proxy.claims[0]
    assert (answer["attempt"], answer["revision"]) == (1, 1)
    assert claimed.grant["nonce"] == answer["grant_signature"]["signed"]["nonce"]
    assert len(claimed.grant["nonce"]) == 43
    assert claimed.grant["idempotency_key"] == f"cp-{resume.request_id}-r1"


def test_the_claim_api_requires_a_nonce(handshake_cp, approved_call):
    resume, _ = approved_call()
    with pytest.raises(ControlPlaneError) as refused:
        handshake_cp._call("POST", f"/api/v1/requests/{resume.request_id}/claim/", json={})
    assert (refused.value.status, refused.value.code) == (422, "validation_error")
    assert "nonce" in json.dumps(refused.value.details)
    assert ApprovalRequest.objects.get(pk=resume.request_id).state == "approved"


# --- A man in the middle of the claim: DecisionRefused, nothing runs ----------------------------------


def _altered_params(status, body, sent):
    body["params"]["amount"] = 1_000_000
    return body


def _altered_request_id(status, body, sent):
    body["grant_signature"]["signed"]["request_id"] = "00000000-0000-4000-8000-000000000000"
    return body


def _altered_params_digest(status, body, sent):
    body["params"]["amount"] = 1_000_000
    body["grant_signature"]["signed"]["params_sha256"] = "0" * 64
    return body


def _no_grant(status, body, sent):
    body.pop("grant_signature")
    return body


@pytest.mark.parametrize(
    "tamper, refused_for",
    [
        (_altered_params, "not the granted ones"),
        (_altered_request_id, "does not match"),
        (_altered_params_digest, "does not match"),
        (_no_grant, "no grant_signature"),
    ],
    ids=["params", "request-id", "params-and-digest", "grant-removed"],
)
def test_a_claim_answer_altered_in_transit_runs_nothing(handshake_cp, approved_call, claim_proxy, tamper, refused_for):
    resume, call = approved_call()
    claim_proxy.claim = tamper
    tool = Tool()
    with pytest.raises(DecisionRefused, match=refused_for):
        run_approved(handshake_cp, resume, call, tool)
    assert tool.runs == []


def test_the_decision_presented_as_the_grant_runs_nothing(handshake_cp, approved_call, claim_proxy):
    """The resume's genuine decision_signature where the grant_signature belongs: another context."""
    resume, call = approved_call()

    def as_grant(status, body, sent):
        body["grant_signature"] = resume.raw["decision_signature"]
        return body

    claim_proxy.claim = as_grant
    tool = Tool()
    with pytest.raises(DecisionRefused, match="does not match"):
        run_approved(handshake_cp, resume, call, tool)
    assert tool.runs == []


def test_a_genuine_grant_for_another_request_bearing_this_claims_nonce_runs_nothing(
    handshake_cp, approved_call, claim_proxy, token
):
    """The claim_proxy reads the client's nonce and claims another approved request of the agent with it."""
    other, _ = approved_call("transfer-0")
    resume, call = approved_call("transfer-1")
    agent = Agent.objects.get(name="mail-bot")

    def swap(status, body, sent):
        grant = services.claim_execution(
            other.request_id, actor=Actor.for_agent(agent), agent=agent, nonce=sent["nonce"]
        )
        return {**body, "params": grant.params, "token": grant.token, "grant_signature": grant.grant_signature}

    claim_proxy.claim = swap
    tool = Tool()
    with pytest.raises(DecisionRefused, match="request_id"):
        run_approved(handshake_cp, resume, call, tool)
    assert tool.runs == []


def test_the_first_processs_grant_replayed_to_a_second_process_runs_nothing(
    handshake_cp, approved_call, claim_proxy, token, server_public_key
):
    resume, call = approved_call()
    tool = Tool()
    assert run_approved(handshake_cp, resume, call, tool) == "sent 900 to acme"
    first = claim_proxy.claims[0]
    # The second process's claim is refused (already claimed); the claim_proxy answers with the first's grant.
    claim_proxy.claim = lambda status, body, sent: first if status == 409 else None
    with client(token, claim_proxy, server_public_key) as second:
        with pytest.raises(DecisionRefused, match="nonce"):
            run_approved(second, resume, call, tool)
    assert tool.runs == [PARAMS]


def test_a_forged_decision_never_reaches_the_claim(handshake_cp, approved_call, claim_proxy):
    resume, call = approved_call()
    forged = type(resume).from_payload(
        {**resume.raw, "resume_data": {"action": "approved", "params": {**PARAMS, "amount": 1}}}
    )
    with pytest.raises(DecisionRefused):
        run_approved(handshake_cp, forged, call, Tool())
    assert not any(path.endswith("/claim/") for _, path in claim_proxy.sent)


# --- Leases: renew, run out, late reports ------------------------------------------------------------


def test_a_renewal_moves_the_lease_and_a_wrong_token_is_refused(handshake_cp, approved_call):
    resume, call = approved_call()
    claimed = claim_approved(handshake_cp, resume, call)
    renewed = handshake_cp.renew(resume.request_id, claimed.token)
    assert datetime.fromisoformat(renewed["lease_until"]) >= datetime.fromisoformat(claimed.lease_until)
    assert "request.execution_renewed" in verbs(resume.request_id)
    with pytest.raises(ControlPlaneError) as refused:
        handshake_cp.renew(resume.request_id, "not-the-token")
    assert refused.value.code == "invalid_grant"


def test_a_lease_that_runs_out_ends_outcome_unknown_never_runs_again_and_a_late_report_changes_nothing(
    handshake_cp, approved_call, settings
):
    settings.EXECUTION_LEASE_SECONDS = 2
    resume, call = approved_call()
    claimed = claim_approved(handshake_cp, resume, call)  # the host dies here, between claim and complete
    time.sleep(2.1)
    assert runner.resolve_executions() == {"retried": 0, "lost": 1}
    request = ApprovalRequest.objects.get(pk=resume.request_id)
    assert (request.state, request.resolution_code) == ("failed", "outcome_unknown")

    with pytest.raises(ControlPlaneError) as late:
        handshake_cp.complete(resume.request_id, claimed.token, succeeded=True, result="sent 900 to acme")
    assert (late.value.status, late.value.code) == (409, "lease_expired")
    with pytest.raises(ControlPlaneError) as renewal:
        handshake_cp.renew(resume.request_id, claimed.token)
    assert renewal.value.code == "lease_expired"
    request.refresh_from_db()
    assert (request.state, request.resolution_code, request.result) == ("failed", "outcome_unknown", None)
    late_event = AuditEvent.objects.get(request_id=request.pk, verb="request.completed_late")
    assert late_event.metadata["result"] == digest("sent 900 to acme") and late_event.metadata["succeeded"] is True

    tool = Tool()
    again = run_approved(handshake_cp, resume, call, tool)
    assert again == f"Not run: already executed (request {resume.request_id}, failed/outcome_unknown)"
    assert tool.runs == []
    assert "request.expired" not in verbs(request.pk)


def test_a_report_after_the_lease_but_before_the_sweep_is_kept_and_fails_the_request(
    handshake_cp, approved_call, settings
):
    settings.EXECUTION_LEASE_SECONDS = 2
    resume, call = approved_call()
    claimed = claim_approved(handshake_cp, resume, call)
    time.sleep(2.1)
    with pytest.raises(ControlPlaneError) as late:
        handshake_cp.complete(resume.request_id, claimed.token, succeeded=True, result="sent")
    assert late.value.code == "lease_expired"
    request = ApprovalRequest.objects.get(pk=resume.request_id)
    assert (request.state, request.resolution_code) == ("failed", "outcome_unknown")
    assert verbs(request.pk)[-2:] == ["request.failed", "request.completed_late"]


@pytest.mark.django_db(transaction=True)
def test_a_long_tool_keeps_its_lease_by_renewing_in_the_background(token, people, server_public_key, settings):
    """A lease of 2 s, a tool of 3 s: the handshake renews it, so the run counts."""
    settings.EXECUTION_LEASE_SECONDS = 2
    server = httpx.WSGITransport(app=WSGIHandler())
    with ControlPlane(
        "http://testserver", token, poll_wait=0.2, retries=0, transport=server, public_keys=[server_public_key]
    ) as handshake_cp:
        key = "long-1"
        submitted = handshake_cp.submit_action("transfer_funds", params=PARAMS, idempotency_key=key)
        services.approve(submitted["id"], actor=Person(people["alice"]), revision=1)
        resume = handshake_cp.wait(submitted["id"], timeout=10)
        tool = Tool(seconds=3)
        assert run_approved(
            handshake_cp, resume, SubmittedCall.action("transfer_funds", PARAMS, idempotency_key=key), tool
        )
    request = ApprovalRequest.objects.get(pk=submitted["id"])
    assert (request.state, request.resolution_code) == ("succeeded", "succeeded")
    assert verbs(request.pk).count("request.execution_renewed") >= 2
    assert tool.runs == [PARAMS]


def test_a_server_side_claim_gets_a_server_made_nonce_in_a_grant_signed_with_the_decisions_key(
    handshake_cp, approved_call
):
    """In-process executors check nothing over a network; their grant still names a fresh nonce."""
    resume, _ = approved_call()
    grant = services.claim_execution(resume.request_id, actor=services.SYSTEM)
    nonce = grant.grant_signature["signed"]["nonce"]
    assert len(nonce) == 43
    assert grant.grant_signature["key_id"] == resume.raw["decision_signature"]["key_id"]
    answer = {"params": grant.params, "grant_signature": grant.grant_signature}
    assert verify_grant(answer, handshake_cp.decision_keys, decision=resume.decision, nonce=nonce)["attempt"] == 1


# --- LangChain HITL: the claim's grant is checked against the signed decision -------------------------

HITL_REQUEST = {
    "action_requests": [{"name": "transfer_funds", "args": PARAMS, "description": "Move money."}],
    "review_configs": [{"action_name": "transfer_funds", "allowed_decisions": ["approve", "edit", "reject"]}],
}


def test_langchain_hands_the_middleware_exactly_the_approved_call_once(handshake_cp, claim_proxy):
    first = answer_interrupt(handshake_cp, HITL_REQUEST, batch_id="interrupt-1", thread_id="t-1")
    assert first == {"decisions": [{"type": "approve"}]}
    request = ApprovalRequest.objects.get()
    assert (request.state, request.attempts) == ("succeeded", 1)
    claim_proxy.on_submitted = None  # the replayed submission is the same, decided request
    again = answer_interrupt(handshake_cp, HITL_REQUEST, batch_id="interrupt-1", thread_id="t-1")  # a restarted host
    [decision] = again["decisions"]
    assert decision["type"] == "reject"
    assert decision["message"] == f"Not run: already executed (request {request.pk}, succeeded/succeeded)"


def test_langchain_refuses_params_altered_in_the_claim_answer(handshake_cp, claim_proxy):
    """The issue's attack: a claim_proxy altered `params` in the claim answer, and the tool ran with them."""

    def altered(status, body, sent):
        body["params"]["to"] = "acme [altered in transit]"
        return body

    claim_proxy.claim = altered
    with pytest.raises(DecisionRefused, match="not the granted ones"):
        answer_interrupt(handshake_cp, HITL_REQUEST, batch_id="interrupt-1", thread_id="t-1")
