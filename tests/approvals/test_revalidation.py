"""Re-validation right before execution: each refusal, and claiming exactly once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from freezegun import freeze_time

from approvals import errors, policy, services
from approvals.emergency import set_emergency_stop
from approvals.errors import DomainError
from approvals.snapshots import register_target_resolver, stable_hash, unregister_target_resolver
from approvals.states import State
from audit.models import AuditEvent
from approvals.people import Person

pytestmark = pytest.mark.django_db


@pytest.fixture
def approved(submit, people):
    """An email alice approved (medium, one approval)."""
    request = submit()
    services.approve(request.pk, actor=services.Person(people["alice"]))
    request.refresh_from_db()
    assert request.state == State.APPROVED
    return request


def claim_refusal(request, **kwargs) -> str:
    with pytest.raises(DomainError) as refused:
        services.claim_execution(request.pk, actor=services.SYSTEM, **kwargs)
    request.refresh_from_db()
    return refused.value.code


def test_a_clean_approval_is_claimed_with_the_exact_params_and_a_derived_key(approved):
    grant = services.claim_execution(approved.pk, actor=services.SYSTEM)
    approved.refresh_from_db()
    assert approved.state == State.EXECUTING
    assert grant.params == approved.current_params()
    assert grant.idempotency_key == f"cp-{approved.pk}-r1"


def test_the_execution_window_passed(approved):
    with freeze_time(approved.execute_by + timedelta(seconds=1)):
        assert claim_refusal(approved) == errors.APPROVAL_EXPIRED
    assert approved.state == State.EXPIRED


def test_the_target_changed_according_to_its_resolver(submit, people):
    document = {"id": "doc-7", "text": "v1"}

    @register_target_resolver("update_document")
    def resolve(target):
        return dict(document)

    try:
        request = submit("update_document", params={"content": "v2"}, target={"id": "doc-7"})
        services.approve(request.pk, actor=services.Person(people["alice"]))
        document["text"] = "someone else edited it"
        assert claim_refusal(request) == errors.TARGET_CHANGED
        assert request.state == State.FAILED
        assert request.resolution_code == errors.TARGET_CHANGED
    finally:
        unregister_target_resolver(resolve)


def test_the_target_hash_the_agent_sends_differs(approved):
    assert claim_refusal(approved, target_hash=stable_hash({"mailbox": "someone-elses"})) == errors.TARGET_CHANGED


def test_the_same_target_hash_passes(approved):
    services.claim_execution(approved.pk, actor=services.SYSTEM, target_hash=stable_hash({"mailbox": "outbox"}))


def test_an_approver_lost_the_permission(approved, people, reviewers_group):
    people["alice"].groups.remove(reviewers_group)
    assert claim_refusal(approved) == errors.APPROVER_PERMISSION_REVOKED
    assert approved.state == State.FAILED


def test_the_policy_became_stricter(approved, admin_user):
    policy.save_rule(
        {"name": "send_email_default", "priority": 30, "action_type": "send_email", "risk_level": "high",
         "editable_params": ["subject", "body", "to", "cc", "bcc"], "masked_params": ["body"]},
        actor=Person(admin_user), note="all mail is high risk now",
    )
    assert claim_refusal(approved) == errors.POLICY_CHANGED
    assert approved.state == State.FAILED


def test_a_looser_policy_does_not_block(approved, admin_user):
    policy.save_rule(
        {"name": "send_email_default", "priority": 30, "action_type": "send_email", "risk_level": "low"},
        actor=Person(admin_user), note="mail is fine",
    )
    services.claim_execution(approved.pk, actor=services.SYSTEM)


class TestEmergencyStop:
    def test_it_refuses_without_failing_and_runs_once_lifted(self, approved, settings):
        settings.EMERGENCY_STOP = True
        assert claim_refusal(approved) == errors.EMERGENCY_STOP
        assert approved.state == State.APPROVED
        settings.EMERGENCY_STOP = False
        services.claim_execution(approved.pk, actor=services.SYSTEM)

    def test_the_agents_own_stop(self, approved, agent):
        set_emergency_stop(on=True, agent=agent, reason="looping")
        assert claim_refusal(approved) == errors.EMERGENCY_STOP

    def test_nothing_auto_approves_while_it_is_on(self, submit, settings):
        settings.EMERGENCY_STOP = True
        request = submit("read_file", params={"path": "README"})
        assert (request.state, request.risk_level) == (State.PENDING_APPROVAL, "low")


class TestClaimAndComplete:
    def test_a_second_claim_is_refused(self, approved):
        services.claim_execution(approved.pk, actor=services.SYSTEM)
        assert claim_refusal(approved) == "already_claimed"

    def test_complete_needs_the_grant(self, approved):
        grant = services.claim_execution(approved.pk, actor=services.SYSTEM)
        with pytest.raises(DomainError) as forged:
            services.complete_execution(approved.pk, token="forged", succeeded=True, actor=services.SYSTEM)
        assert forged.value.code == errors.INVALID_GRANT
        services.complete_execution(approved.pk, token=grant.token, succeeded=True, actor=services.SYSTEM,
                                    result={"message_id": "m-1"})
        approved.refresh_from_db()
        assert (approved.state, approved.result) == (State.SUCCEEDED, {"message_id": "m-1"})
        with pytest.raises(DomainError):
            services.complete_execution(approved.pk, token=grant.token, succeeded=False, actor=services.SYSTEM)

    def test_a_lost_lease_fails_with_outcome_unknown(self, approved):
        grant = services.claim_execution(approved.pk, actor=services.SYSTEM)
        assert services.fail_lost_execution(approved.pk) is False
        with freeze_time(grant.lease_until + timedelta(seconds=1)):
            assert services.fail_lost_execution(approved.pk) is True
        approved.refresh_from_db()
        assert (approved.state, approved.resolution_code) == (State.FAILED, errors.OUTCOME_UNKNOWN)

    def test_every_refusal_is_audited_with_its_code(self, approved, people, reviewers_group):
        people["alice"].groups.remove(reviewers_group)
        claim_refusal(approved)
        event = AuditEvent.objects.filter(request_id=approved.pk).order_by("-seq").first()
        assert event.verb == "request.revalidation_failed"
        assert event.metadata["code"] == errors.APPROVER_PERMISSION_REVOKED


def test_an_agent_cannot_claim_what_the_server_executes(approved, agent):
    type(approved).objects.filter(pk=approved.pk).update(executor="webhook")
    with pytest.raises(DomainError) as refused:
        services.claim_execution(approved.pk, actor=services.SYSTEM, agent=agent)
    assert refused.value.code == errors.EXECUTED_BY_SERVER
    approved.refresh_from_db()
    assert approved.state == State.APPROVED
