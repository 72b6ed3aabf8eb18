"""Submitting, classifying and deciding: the paths a reviewer and an agent meet."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from freezegun import freeze_time

from approvals import errors, services
from approvals.errors import DomainError
from approvals.models import Decision
from approvals.people import Person
from approvals.services import RequestChange, request_changed
from approvals.states import State
from audit.chain import Actor
from audit.models import AuditEvent
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db


def verbs_for(request) -> list[str]:
    return list(AuditEvent.objects.filter(request_id=request.pk).order_by("seq").values_list("verb", flat=True))


class TestClassificationOnSubmit:
    def test_a_read_is_low_and_approved_by_policy_naming_the_rule(self, submit):
        request = submit("read_file", params={"path": "/etc/motd"})
        assert request.state == State.APPROVED
        assert request.risk_level == "low"
        assert request.rule_name == "read_low"
        assert request.decided_by_label == "policy"
        assert request.execute_by is not None
        assert verbs_for(request) == ["request.submitted", "request.auto_approved"]

    def test_deleting_a_database_is_refused_and_never_approvable(self, submit, people):
        request = submit("delete_database", params={"name": "prod"})
        assert request.state == State.REJECTED
        assert request.resolution_code == "prohibited_by_policy"
        with pytest.raises(DomainError) as refused:
            services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
        assert refused.value.code == errors.ALREADY_DECIDED
        assert refused.value.message == "Already rejected by policy."

    def test_an_email_to_eleven_people_through_cc_and_bcc_is_high(self, submit):
        params = {
            "to": ["a@example.com"],
            "cc": [f"cc{i}@example.com" for i in range(5)],
            "bcc": [f"bcc{i}@example.com" for i in range(5)],
            "body": "quarterly numbers",
        }
        request = submit("send_email", params=params)
        assert request.state == State.PENDING_APPROVAL
        assert request.risk_level == "high"
        assert request.impact["recipient_count"] == 11

    def test_an_unknown_tool_falls_to_the_medium_default_and_waits(self, submit):
        request = submit("rotate_keys", params={})
        assert (request.state, request.risk_level, request.rule_name) == (State.PENDING_APPROVAL, "medium", "")
        assert request.decide_by is not None

    def test_declared_facts_do_not_lower_the_risk(self, submit):
        request = submit("delete_database", params={"name": "prod"}, declared={"risk": "low", "reversible": True})
        assert request.state == State.REJECTED

    def test_params_never_reach_the_audit_row_only_their_digest(self, submit):
        request = submit("send_email", params={"to": ["x@example.com"], "body": "the launch code is 0000"})
        submitted = AuditEvent.objects.get(request_id=request.pk, verb="request.submitted")
        assert "launch code" not in submitted.canonical
        assert set(submitted.metadata["params"]) == {"hmac", "size"}


class TestApproving:
    def test_one_approval_approves_a_medium_request(self, submit, people):
        request = submit()
        services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
        request.refresh_from_db()
        assert request.state == State.APPROVED
        assert request.decided_by_label == "alice"
        assert verbs_for(request)[-2:] == ["decision.recorded", "request.approved"]

    def test_two_person_rule_needs_two_distinct_people(self, submit, people, two_person_rule):
        request = submit("transfer_funds", params={"amount": "900.00", "to": "acct-1"})
        assert request.required_approvals == 2
        services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL
        with pytest.raises(DomainError) as twice:
            services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
        assert twice.value.code == errors.ALREADY_VOTED
        services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["bob"]))
        request.refresh_from_db()
        assert request.state == State.APPROVED

    @pytest.mark.parametrize("who", ["owen", "rita"])
    def test_the_agents_owner_and_the_requested_for_user_cannot_approve(self, submit, people, who):
        request = submit()
        with pytest.raises(DomainError) as refused:
            services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people[who]))
        assert refused.value.code == errors.SEPARATION_OF_DUTIES
        assert not Decision.objects.filter(request=request).exists()

    def test_a_user_without_the_object_permission_cannot_decide(self, submit, people):
        request = submit()
        for decide in (services.approve, services.reject):
            with pytest.raises(DomainError) as refused:
                decide(request.pk, revision=1, actor=services.Person(people["mallory"]))
            assert refused.value.code == errors.NOT_PERMITTED
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL

    def test_a_superuser_is_not_an_implicit_approver(self, submit, django_user_model):
        root = django_user_model.objects.create_superuser("root", password="root-pw-123!")
        request = submit()
        with pytest.raises(DomainError) as refused:
            services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(root))
        assert refused.value.code == errors.NOT_PERMITTED

    def test_the_loser_of_a_decision_hears_who_won(self, submit, people):
        request = submit()
        services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
        with pytest.raises(DomainError) as late:
            services.reject(
                request.pk, revision=current_revision(request.pk), actor=services.Person(people["bob"]), feedback="no"
            )
        assert late.value.code == errors.ALREADY_DECIDED
        assert "already approved by alice" in late.value.message.lower()


class TestRejecting:
    def test_rejection_keeps_the_feedback_verbatim_for_the_agent(self, submit, people):
        request = submit()
        services.reject(
            request.pk,
            revision=current_revision(request.pk),
            actor=services.Person(people["bob"]),
            feedback="Send it to the team list instead.",
        )
        request.refresh_from_db()
        assert request.state == State.REJECTED
        assert request.feedback == "Send it to the team list instead."
        assert verbs_for(request)[-1] == "request.rejected"


class TestApproveWithEdits:
    def test_only_editable_params_may_change(self, submit, people, two_person_rule):
        request = submit("transfer_funds", params={"amount": "900.00", "to": "acct-1"})
        with pytest.raises(DomainError) as refused:
            services.approve_with_edits(
                request.pk,
                revision=current_revision(request.pk),
                actor=services.Person(people["alice"]),
                edits={"to": "acct-evil"},
            )
        assert refused.value.code == errors.PARAM_NOT_EDITABLE
        request.refresh_from_db()
        assert request.current_revision == 1

    def test_an_edit_makes_a_new_revision_and_earlier_approvals_stop_counting(self, submit, people, two_person_rule):
        request = submit("transfer_funds", params={"amount": "900.00", "to": "acct-1"})
        services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
        services.approve_with_edits(
            request.pk,
            revision=current_revision(request.pk),
            actor=services.Person(people["bob"]),
            edits={"amount": "450.00"},
        )
        request.refresh_from_db()
        assert request.current_revision == 2
        assert request.current_params() == {"amount": "450.00", "to": "acct-1"}
        # alice approved revision 1 only, so bob's approval of revision 2 is one of two.
        assert request.state == State.PENDING_APPROVAL
        services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
        request.refresh_from_db()
        assert request.state == State.APPROVED
        assert "request.revised" in verbs_for(request)

    def test_the_claim_grant_carries_the_edited_params(self, submit, people):
        request = submit("update_document", params={"doc": "d-1", "content": "draft"})
        services.approve_with_edits(
            request.pk,
            revision=current_revision(request.pk),
            actor=services.Person(people["alice"]),
            edits={"content": "final"},
        )
        grant = services.claim_execution(request.pk, actor=services.SYSTEM)
        assert grant.params == {"doc": "d-1", "content": "final"}
        assert grant.idempotency_key.endswith("-r2")


class TestCancelAndExpire:
    def test_the_agent_withdraws_a_pending_request(self, submit, agent):
        request = submit()
        services.cancel(request.pk, actor=Actor.for_agent(agent), agent=agent, reason="user changed their mind")
        request.refresh_from_db()
        assert (request.state, request.resolution_code) == (State.CANCELLED, "withdrawn")

    def test_another_agent_cannot_cancel_it(self, submit, people):
        from agents.models import Agent

        request = submit()
        stranger = Agent.objects.create(name="other-bot")
        with pytest.raises(DomainError) as refused:
            services.cancel(request.pk, actor=Actor.for_agent(stranger), agent=stranger)
        assert refused.value.code == "not_found"

    def test_past_its_deadline_a_pending_request_reads_as_expired_without_a_write(self, submit):
        request = submit()
        with freeze_time(request.decide_by + timedelta(seconds=1)):
            assert request.effective_state == State.EXPIRED
            request.refresh_from_db()
            assert request.state == State.PENDING_APPROVAL

    def test_a_decision_after_the_deadline_persists_the_expiry_and_is_refused(self, submit, people):
        request = submit()
        with freeze_time(request.decide_by + timedelta(seconds=1)):
            with pytest.raises(DomainError) as late:
                services.approve(
                    request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"])
                )
        assert late.value.code == "decision_deadline_passed"
        request.refresh_from_db()
        assert request.state == State.EXPIRED
        assert verbs_for(request)[-1] == "request.expired"

    def test_the_sweeper_expires_overdue_requests(self, submit):
        first, _second = submit(), submit()
        with freeze_time(first.decide_by + timedelta(minutes=1)):
            assert services.expire_overdue() == 2
            assert services.expire_overdue() == 0


class TestQuorumReachability:
    def test_a_quorum_the_group_cannot_reach_is_reported_at_once(self, submit, people, admin_user):
        from approvals import policy

        solo = Group.objects.create(name="treasury")
        people["alice"].groups.add(solo)
        policy.save_rule(
            {
                "name": "treasury_two",
                "priority": 1,
                "action_type": "pay_invoice",
                "risk_level": "high",
                "required_approvals": 2,
                "approver_group": "treasury",
            },
            actor=Person(admin_user),
            note="treasury needs two",
        )
        request = submit("pay_invoice", params={"amount": "10"})
        assert request.quorum_reachable is False
        assert "request.quorum_unreachable" in verbs_for(request)

    def test_it_escalates_to_the_rules_second_group(self, submit, people, admin_user, reviewers_group):
        from approvals import policy

        solo = Group.objects.create(name="treasury")
        people["alice"].groups.add(solo)
        policy.save_rule(
            {
                "name": "treasury_two",
                "priority": 1,
                "action_type": "pay_invoice",
                "risk_level": "high",
                "required_approvals": 2,
                "approver_group": "treasury",
                "escalation_group": "reviewers",
            },
            actor=Person(admin_user),
            note="treasury needs two, reviewers back it up",
        )
        request = submit("pay_invoice", params={"amount": "10"})
        assert (request.escalated, request.quorum_reachable) == (True, True), request.classification
        services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
        services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["bob"]))
        request.refresh_from_db()
        assert request.state == State.APPROVED


class TestLivePush:
    def test_changes_are_pushed_only_after_commit_to_every_group_that_sees_the_card(
        self, submit, people, admin_user, reviewers_group, django_capture_on_commit_callbacks
    ):
        from approvals import broadcast, policy

        treasury = Group.objects.create(name="treasury")
        people["alice"].groups.add(treasury)
        policy.save_rule(
            {
                "name": "treasury_two",
                "priority": 1,
                "action_type": "pay_invoice",
                "risk_level": "high",
                "required_approvals": 2,
                "approver_group": "treasury",
                "escalation_group": "reviewers",
            },
            actor=Person(admin_user),
            note="treasury needs two, reviewers back it up",
        )
        seen: list[RequestChange] = []

        def subscriber(sender, *, change, **kwargs):
            seen.append(change)

        request_changed.connect(subscriber)
        try:
            with django_capture_on_commit_callbacks() as pending:
                request = submit("pay_invoice", params={"amount": "10"})
                assert seen == []  # nothing reaches a subscriber before the transaction commits
            for callback in pending:
                callback()
        finally:
            request_changed.disconnect(subscriber)
        assert [change.verb for change in seen] == ["request.queued", "request.escalated"]
        queued, escalation = (broadcast.push_for(change) for change in seen)
        assert queued.event == broadcast.CARD_CREATED and queued.new_request
        assert escalation.event == broadcast.CARD_CREATED and escalation.data["escalated_to"] == "reviewers"
        assert set(escalation.channel_groups()) >= {
            broadcast.approvers_group(treasury.pk),
            broadcast.approvers_group(reviewers_group.pk),
            broadcast.agent_group(request.agent_id),
            broadcast.request_group(str(request.pk)),
        }
