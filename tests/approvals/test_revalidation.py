"""Re-validation right before execution: each refusal, and claiming exactly once.

Every test states what the agent and the auditors rely on: the state the request
is left in, the refusal's code, the audit event that records it, and, when a claim
wins, the grant's exact approved params and idempotency key.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from freezegun import freeze_time

from approvals import errors, policy, services
from approvals.emergency import set_emergency_stop
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.snapshots import register_target_resolver, stable_hash, unregister_target_resolver
from approvals.states import State
from audit.models import AuditEvent
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db

# What `submit()` asks for, and so what alice approved.
APPROVED_EMAIL = {"to": ["dana@example.com"], "subject": "Hi", "body": "Hello"}


@pytest.fixture
def approved_email(submit, people):
    """An email alice approved (medium, one approval)."""
    request = submit()
    services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
    request.refresh_from_db()
    assert request.state == State.APPROVED
    return request


def claim_refusal(request, **kwargs) -> str:
    with pytest.raises(DomainError) as refused:
        services.claim_execution(request.pk, actor=services.SYSTEM, **kwargs)
    request.refresh_from_db()
    return refused.value.code


def last_event(request: ApprovalRequest) -> AuditEvent:
    return AuditEvent.objects.filter(request_id=request.pk).order_by("-seq").first()


def assert_claimed(request: ApprovalRequest, grant: services.ExecutionGrant) -> None:
    """The claim won: the request executes, the grant carries exactly what was approved
    under the key derived from the approved revision, and the claim is audited."""
    request.refresh_from_db()
    assert request.state == State.EXECUTING
    assert grant.params == APPROVED_EMAIL
    assert grant.idempotency_key == f"cp-{request.pk}-r1"
    event = last_event(request)
    assert event.verb == "request.execution_claimed"
    assert event.metadata["attempt"] == 1 and event.metadata["idempotency_key"] == grant.idempotency_key


def assert_refused_for_good(request: ApprovalRequest, code: str, *, state: str = State.FAILED) -> None:
    """A final refusal: the request leaves `approved` for good, with the code, audited."""
    assert request.state == state
    assert request.resolution_code == code
    event = last_event(request)
    expected_verb = "request.expired" if state == State.EXPIRED else "request.revalidation_failed"
    assert event.verb == expected_verb
    assert event.metadata["code"] == code and event.metadata["from"] == State.APPROVED


def test_a_clean_approval_is_claimed_with_the_exact_params_and_a_derived_key(approved_email):
    grant = services.claim_execution(approved_email.pk, actor=services.SYSTEM)
    assert_claimed(approved_email, grant)
    assert grant.params == approved_email.current_params()


def test_the_execution_window_passed(approved_email):
    with freeze_time(approved_email.execute_by + timedelta(seconds=1)):
        assert claim_refusal(approved_email) == errors.APPROVAL_EXPIRED
    assert_refused_for_good(approved_email, errors.APPROVAL_EXPIRED, state=State.EXPIRED)


def test_the_target_changed_according_to_its_resolver(submit, people):
    document = {"id": "doc-7", "text": "v1"}

    @register_target_resolver("update_document")
    def resolve(target):
        return dict(document)

    try:
        request = submit("update_document", params={"content": "v2"}, target={"id": "doc-7"})
        services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
        document["text"] = "someone else edited it"
        assert claim_refusal(request) == errors.TARGET_CHANGED
        assert_refused_for_good(request, errors.TARGET_CHANGED)
    finally:
        unregister_target_resolver(resolve)


def test_the_target_hash_the_agent_sends_differs(approved_email):
    assert claim_refusal(approved_email, target_hash=stable_hash({"mailbox": "someone-elses"})) == errors.TARGET_CHANGED
    assert_refused_for_good(approved_email, errors.TARGET_CHANGED)


def test_the_same_target_hash_passes(approved_email):
    grant = services.claim_execution(
        approved_email.pk, actor=services.SYSTEM, target_hash=stable_hash({"mailbox": "outbox"})
    )
    assert_claimed(approved_email, grant)


def test_an_approver_lost_the_permission(approved_email, people, reviewers_group):
    people["alice"].groups.remove(reviewers_group)
    assert claim_refusal(approved_email) == errors.APPROVER_PERMISSION_REVOKED
    assert_refused_for_good(approved_email, errors.APPROVER_PERMISSION_REVOKED)


def test_the_policy_became_stricter(approved_email, admin_user):
    policy.save_rule(
        {
            "name": "send_email_default",
            "priority": 30,
            "action_type": "send_email",
            "risk_level": "high",
            "editable_params": ["subject", "body", "to", "cc", "bcc"],
            "masked_params": ["body"],
        },
        actor=Person(admin_user),
        note="all mail is high risk now",
    )
    assert claim_refusal(approved_email) == errors.POLICY_CHANGED
    assert_refused_for_good(approved_email, errors.POLICY_CHANGED)


def test_a_looser_policy_does_not_block(approved_email, admin_user):
    policy.save_rule(
        {"name": "send_email_default", "priority": 30, "action_type": "send_email", "risk_level": "low"},
        actor=Person(admin_user),
        note="mail is fine",
    )
    grant = services.claim_execution(approved_email.pk, actor=services.SYSTEM)
    assert_claimed(approved_email, grant)


class TestEmergencyStop:
    def test_it_refuses_without_failing_and_runs_once_lifted(self, approved_email, settings):
        settings.EMERGENCY_STOP = True
        assert claim_refusal(approved_email) == errors.EMERGENCY_STOP
        # Nothing changed: the request waits, approved, with the approval as its last event.
        assert approved_email.state == State.APPROVED
        assert last_event(approved_email).verb == "request.approved"
        settings.EMERGENCY_STOP = False
        grant = services.claim_execution(approved_email.pk, actor=services.SYSTEM)
        assert_claimed(approved_email, grant)

    def test_the_agents_own_stop(self, approved_email, agent):
        set_emergency_stop(on=True, agent=agent, reason="looping")
        assert claim_refusal(approved_email) == errors.EMERGENCY_STOP
        assert approved_email.state == State.APPROVED
        assert last_event(approved_email).verb == "request.approved"

    def test_nothing_auto_approves_while_it_is_on(self, submit, settings):
        settings.EMERGENCY_STOP = True
        request = submit("read_file", params={"path": "README"})
        assert (request.state, request.risk_level) == (State.PENDING_APPROVAL, "low")


class TestClaimAndComplete:
    def test_a_second_claim_is_refused(self, approved_email):
        grant = services.claim_execution(approved_email.pk, actor=services.SYSTEM)
        assert claim_refusal(approved_email) == errors.ALREADY_CLAIMED
        # The first claim stands, and only it was audited.
        assert_claimed(approved_email, grant)
        assert AuditEvent.objects.filter(request_id=approved_email.pk, verb="request.execution_claimed").count() == 1

    def test_complete_needs_the_grant(self, approved_email):
        grant = services.claim_execution(approved_email.pk, actor=services.SYSTEM)
        with pytest.raises(DomainError) as forged:
            services.complete_execution(approved_email.pk, token="forged", succeeded=True, actor=services.SYSTEM)
        assert forged.value.code == errors.INVALID_GRANT
        approved_email.refresh_from_db()
        assert approved_email.state == State.EXECUTING

        services.complete_execution(
            approved_email.pk, token=grant.token, succeeded=True, actor=services.SYSTEM, result={"message_id": "m-1"}
        )
        approved_email.refresh_from_db()
        assert (approved_email.state, approved_email.result) == (State.SUCCEEDED, {"message_id": "m-1"})
        assert last_event(approved_email).verb == "request.succeeded"

        # The grant is spent: reporting again changes nothing.
        with pytest.raises(DomainError) as reported_twice:
            services.complete_execution(approved_email.pk, token=grant.token, succeeded=False, actor=services.SYSTEM)
        assert reported_twice.value.code == errors.ILLEGAL_TRANSITION
        approved_email.refresh_from_db()
        assert (approved_email.state, approved_email.result) == (State.SUCCEEDED, {"message_id": "m-1"})
        assert last_event(approved_email).verb == "request.succeeded"

    def test_a_lost_lease_fails_with_outcome_unknown(self, approved_email):
        grant = services.claim_execution(approved_email.pk, actor=services.SYSTEM)
        assert services.fail_lost_execution(approved_email.pk) is False
        with freeze_time(grant.lease_until + timedelta(seconds=1)):
            assert services.fail_lost_execution(approved_email.pk) is True
        approved_email.refresh_from_db()
        assert (approved_email.state, approved_email.resolution_code) == (State.FAILED, errors.OUTCOME_UNKNOWN)
        event = last_event(approved_email)
        assert event.verb == "request.failed" and event.metadata["code"] == errors.OUTCOME_UNKNOWN

    def test_every_refusal_is_audited_with_its_code(self, approved_email, people, reviewers_group):
        people["alice"].groups.remove(reviewers_group)
        assert claim_refusal(approved_email) == errors.APPROVER_PERMISSION_REVOKED
        event = last_event(approved_email)
        assert event.verb == "request.revalidation_failed"
        assert event.metadata["code"] == errors.APPROVER_PERMISSION_REVOKED


def test_an_agent_cannot_claim_what_the_server_executes(approved_email, agent):
    type(approved_email).objects.filter(pk=approved_email.pk).update(executor="webhook")
    with pytest.raises(DomainError) as refused:
        services.claim_execution(approved_email.pk, actor=services.SYSTEM, agent=agent)
    assert refused.value.code == errors.EXECUTED_BY_SERVER
    approved_email.refresh_from_db()
    assert approved_email.state == State.APPROVED
    assert last_event(approved_email).verb == "request.approved"
