"""The state machine under random use by several people, with time moving.

Hypothesis drives submit, approve (with or without a step-up proof),
approve-with-edits (including edits that make a transfer critical, which moves it
to the treasury group), reject, cancel, the expiry sweep, claim and complete, and
after every step checks what users rely on: only legal transitions happen,
terminal states never change, anything approved had a quorum of distinct eligible
approvers of its own group on its final revision, with the step-up its level
needs, and never less scrutiny than its final params get; each transition left
exactly one audit event, and the chain verifies.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from freezegun import freeze_time
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from agents.models import Agent
from approvals import errors, policy, services
from approvals.errors import DomainError
from approvals.models import ApprovalRequest, Decision
from approvals.people import Person
from approvals.permissions import REVIEWERS
from approvals.policy.rules.levels import level_rank
from approvals.services.step_up import needs_step_up
from approvals.states import ALWAYS_TERMINAL, TRANSITIONS, Kind, State
from audit.chain import Actor, verify_chain
from audit.models import AuditEvent
from audit.vocabulary import TRANSITION_VERBS
from tests.fixtures.revisions import current_revision

ACTION_TYPES = ["send_email", "transfer_funds", "read_file", "delete_database", "update_document", "rotate_keys"]
EDITS = {
    "transfer_funds": [{"amount": "12.00"}, {"amount": "5000.00"}],  # the second makes it critical (treasury)
    "update_document": [{"content": "edited"}],
    "send_email": [{"subject": "Re"}],
}
# Transfers over 1,000 are critical and only treasury decides them, two of them.
TRANSFER_LARGE = {
    "name": "transfer_large",
    "priority": 4,
    "action_type": "transfer_funds",
    "risk_level": "critical",
    "required_approvals": 2,
    "approver_group": "treasury",
    "editable_params": ["amount", "memo"],
    "conditions": [{"path": "params.amount", "op": "gt", "value": 1000}],
}
REVIEWER_NAMES = ["alice", "bob", "carol"]  # alice is in treasury too
TREASURY_NAMES = ["tess", "trent"]
EXCLUDED_NAMES = ["owen", "rita"]  # the agent's owner and the requested-for user
OUTSIDER = "mallory"
DECIDERS = [*REVIEWER_NAMES, *TREASURY_NAMES]
_example = itertools.count()


class ApprovalLifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = freeze_time(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))
        self.frozen = self.clock.start()
        suffix = next(_example)
        reviewers = Group.objects.get(name=REVIEWERS)
        treasury = Group.objects.get(name="treasury")
        User = get_user_model()
        self.people = {}
        for name in [*REVIEWER_NAMES, *TREASURY_NAMES, *EXCLUDED_NAMES, OUTSIDER]:
            user = User.objects.create_user(f"{name}-{suffix}", password=name)
            if name in (*REVIEWER_NAMES, *EXCLUDED_NAMES):
                user.groups.add(reviewers)
            if name in (*TREASURY_NAMES, "alice"):
                user.groups.add(treasury)
            self.people[name] = user
        self.agent = Agent.objects.create(name=f"bot-{suffix}", owner=self.people["owen"])
        self.requests: list[str] = []
        self.observed: dict[str, str] = {}
        self.transitions: dict[str, int] = {}
        self.grants: dict[str, str] = {}
        self.verified_up_to = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0

    def teardown(self) -> None:
        self.clock.stop()

    # --- actions -------------------------------------------------------------

    @rule(
        action_type=st.sampled_from(ACTION_TYPES),
        recipients=st.integers(1, 14),
        amount=st.sampled_from(["950.00", "2500.00"]),
    )
    def submit(self, action_type: str, recipients: int, amount: str) -> None:
        params = {"to": [f"p{i}@example.com" for i in range(recipients)], "subject": "s", "body": "b"}
        if action_type == "transfer_funds":
            params = {"amount": amount, "to": "acct-9"}
        elif action_type == "update_document":
            params = {"doc": "d", "content": "v1"}
        request = services.submit(
            services.Submission(
                kind=Kind.ACTION,
                action_type=action_type,
                params=params,
                target={"t": action_type},
                requested_for=self.people["rita"],
            ),
            agent=self.agent,
        )
        key = str(request.pk)
        self.requests.append(key)
        self.observed[key] = request.state
        self.transitions[key] = 1  # draft -> its first state
        assert request.state in (State.PENDING_APPROVAL, State.APPROVED, State.REJECTED)

    def _reviewer(self, who: str, proves: bool) -> services.Person:
        proof = services.StepUpProof.password(who) if proves else None
        return services.Person(self.people[who], step_up=proof)

    @precondition(lambda self: self.requests)
    @rule(data=st.data(), who=st.sampled_from([*DECIDERS, *EXCLUDED_NAMES, OUTSIDER]), proves=st.booleans())
    def approve(self, data, who: str, proves: bool) -> None:
        key = data.draw(st.sampled_from(self.requests))
        request = ApprovalRequest.objects.get(pk=key)
        try:
            services.approve(key, revision=current_revision(key), actor=self._reviewer(who, proves))
        except DomainError as refused:
            self._explain_refusal(refused, request, who, approving=True, proves=proves)
        else:
            assert request.effective_state == State.PENDING_APPROVAL
            assert who in DECIDERS, f"{who} must never approve"
            assert proves or not needs_step_up(request.risk_level), "approved a critical request without step-up"

    @precondition(lambda self: self.requests)
    @rule(data=st.data(), who=st.sampled_from(DECIDERS), proves=st.booleans())
    def approve_with_edits(self, data, who: str, proves: bool) -> None:
        key = data.draw(st.sampled_from(self.requests))
        request = ApprovalRequest.objects.get(pk=key)
        edits = data.draw(st.sampled_from(EDITS.get(request.action_type, [{"anything": "x"}])))
        try:
            services.approve_with_edits(
                key, revision=current_revision(key), actor=self._reviewer(who, proves), edits=edits
            )
        except DomainError as refused:
            allowed = {
                errors.PARAM_NOT_EDITABLE,
                "no_changes",
                errors.ALREADY_VOTED,
                errors.ALREADY_DECIDED,
                errors.ILLEGAL_TRANSITION,
                "decision_deadline_passed",
                errors.APPROVAL_EXPIRED,
                errors.NOT_PERMITTED,
                errors.STEP_UP_REQUIRED,
            }
            assert refused.code in allowed, refused
            if refused.code == errors.STEP_UP_REQUIRED:
                assert not proves

    @precondition(lambda self: self.requests)
    @rule(data=st.data(), who=st.sampled_from([*DECIDERS, OUTSIDER]))
    def reject(self, data, who: str) -> None:
        key = data.draw(st.sampled_from(self.requests))
        request = ApprovalRequest.objects.get(pk=key)
        try:
            services.reject(
                key, revision=current_revision(key), actor=services.Person(self.people[who]), feedback="not like this"
            )
        except DomainError as refused:
            self._explain_refusal(refused, request, who, approving=False)
        else:
            assert request.effective_state == State.PENDING_APPROVAL and who != OUTSIDER
            assert self.people[who].groups.filter(pk=request.approver_group_id).exists() or request.escalated

    @precondition(lambda self: self.requests)
    @rule(data=st.data())
    def cancel(self, data) -> None:
        key = data.draw(st.sampled_from(self.requests))
        try:
            services.cancel(key, actor=Actor.for_agent(self.agent), agent=self.agent, reason="changed my mind")
        except DomainError as refused:
            expected = (
                errors.ILLEGAL_TRANSITION,
                errors.ALREADY_DECIDED,
                "decision_deadline_passed",
                errors.APPROVAL_EXPIRED,
            )
            assert refused.code in expected, refused

    @rule(seconds=st.integers(0, 7200))
    def time_passes(self, seconds: int) -> None:
        self.frozen.tick(timedelta(seconds=seconds))

    @rule()
    def sweep(self) -> None:
        services.expire_overdue()

    @precondition(lambda self: self.requests)
    @rule(data=st.data())
    def claim(self, data) -> None:
        key = data.draw(st.sampled_from(self.requests))
        try:
            grant = services.claim_execution(key, actor=services.SYSTEM)
        except DomainError as refused:
            assert refused.code in (errors.ILLEGAL_TRANSITION, "already_claimed", errors.APPROVAL_EXPIRED), refused
        else:
            self.grants[key] = grant.token

    @precondition(lambda self: self.grants)
    @rule(data=st.data(), succeeded=st.booleans())
    def complete(self, data, succeeded: bool) -> None:
        key = data.draw(st.sampled_from(sorted(self.grants)))
        try:
            services.complete_execution(key, token=self.grants[key], succeeded=succeeded, actor=services.SYSTEM)
        except DomainError as refused:
            if refused.code == errors.LEASE_EXPIRED:
                # A report after the lease ran out is kept but not applied: the outcome is unknown.
                request = ApprovalRequest.objects.get(pk=key)
                assert (request.state, request.resolution_code) == (State.FAILED, errors.OUTCOME_UNKNOWN), refused
            else:
                assert refused.code == errors.ILLEGAL_TRANSITION, refused

    def _explain_refusal(
        self, refused: DomainError, request: ApprovalRequest, who: str, *, approving: bool, proves: bool = False
    ) -> None:
        """Every refusal must have a reason the situation explains."""
        if refused.code == errors.NOT_PERMITTED:
            assert who == OUTSIDER or not self.people[who].groups.filter(pk=request.approver_group_id).exists()
        elif refused.code == errors.STEP_UP_REQUIRED:
            assert approving and not proves and needs_step_up(request.risk_level)
        elif refused.code == errors.SEPARATION_OF_DUTIES:
            assert approving and who in EXCLUDED_NAMES
        elif refused.code in ("decision_deadline_passed", errors.APPROVAL_EXPIRED):
            assert request.effective_state == State.EXPIRED
        elif refused.code == errors.ALREADY_VOTED:
            assert Decision.objects.filter(
                request=request, revision=request.current_revision, reviewer=self.people[who]
            ).exists()
        else:
            assert refused.code in (errors.ILLEGAL_TRANSITION, errors.ALREADY_DECIDED), refused
            assert request.state != State.PENDING_APPROVAL

    # --- invariants --------------------------------------------------------------

    @invariant()
    def after_every_step(self) -> None:
        # One invariant calling the checks in order: counting audit events needs the
        # transitions this step made, which the first check observes.
        self.only_legal_transitions_and_terminal_states_hold()
        self.one_audit_event_per_transition()
        self.approvals_had_their_quorum()
        self.the_chain_verifies()

    def only_legal_transitions_and_terminal_states_hold(self) -> None:
        for request in ApprovalRequest.objects.filter(pk__in=self.requests):
            key = str(request.pk)
            before = self.observed[key]
            if request.state != before:
                assert before not in ALWAYS_TERMINAL, f"terminal {before} became {request.state}"
                assert (before, request.state) in TRANSITIONS, f"illegal {before} -> {request.state}"
                self.transitions[key] += 1
                self.observed[key] = request.state

    def one_audit_event_per_transition(self) -> None:
        counted = {key: 0 for key in self.requests}
        for request_id in AuditEvent.objects.filter(
            request_id__in=self.requests, verb__in=TRANSITION_VERBS
        ).values_list("request_id", flat=True):
            counted[str(request_id)] += 1
        assert counted == self.transitions

    def approvals_had_their_quorum(self) -> None:
        approved = ApprovalRequest.objects.filter(
            pk__in=self.requests, state__in=[State.APPROVED, State.EXECUTING, State.SUCCEEDED]
        )
        approved_by_people = [request for request in approved if not request.approved_by_policy]
        excluded = {self.people[name].pk for name in [*EXCLUDED_NAMES, OUTSIDER]}
        for request in approved_by_people:
            votes = Decision.objects.filter(
                request=request, revision=request.current_revision, verdict=Decision.Verdict.APPROVE
            ).select_related("reviewer")
            approvers = {vote.reviewer_id for vote in votes}
            assert not approvers & excluded
            assert len(approvers) >= request.required_approvals >= 1
            for vote in votes:
                assert vote.reviewer.groups.filter(pk=request.approver_group_id).exists(), "approved outside its group"
                assert vote.step_up_method or not needs_step_up(request.risk_level), "counted without step-up"
            final = policy.current_policy().compiled.classify(
                services.classification_input(request, request.current_params())
            )
            assert level_rank(request.risk_level) >= level_rank(final.risk_level), "less scrutiny than its params"

    def the_chain_verifies(self) -> None:
        result = verify_chain(since_seq=self.verified_up_to + 1)
        assert result.ok, result
        self.verified_up_to = result.head_seq


@pytest.mark.django_db
def test_approval_lifecycle_under_random_use(two_person_rule, admin_user):
    Group.objects.create(name="treasury")
    policy.save_rule(TRANSFER_LARGE, actor=Person(admin_user), note="large transfers are treasury's")
    run_state_machine_as_test(
        ApprovalLifecycle,
        settings=settings(
            max_examples=40,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
