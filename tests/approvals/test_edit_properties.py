"""Whatever people edit and approve, an approved request stands on its own final
classification: that classification's group, its quorum of eligible people, and the
step-up its level needs.

Hypothesis plays random sequences of approvals and edits (by people in random
groups, with and without a step-up proof) on transfers whose amount decides
between three rules with different groups, levels and quorums.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals import errors, policy, services
from approvals.models import ApprovalRequest, Decision
from approvals.people import Person
from approvals.permissions import excluded_from_approving
from approvals.policy.rules.levels import level_rank
from approvals.services.step_up import needs_step_up
from approvals.states import Kind, State
from tests.fixtures.revisions import current_revision

GROUPS = ("reviewers", "finance", "treasury")
RULES = [
    {
        "name": "pay_huge",
        "priority": 1,
        "action_type": "pay_vendor",
        "risk_level": "critical",
        "required_approvals": 2,
        "approver_group": "treasury",
        "editable_params": ["amount", "memo"],
        "conditions": [{"path": "params.amount", "op": "gt", "value": 1_000_000}],
    },
    {
        "name": "pay_large",
        "priority": 2,
        "action_type": "pay_vendor",
        "risk_level": "high",
        "required_approvals": 2,
        "approver_group": "finance",
        "editable_params": ["amount", "memo"],
        "conditions": [{"path": "params.amount", "op": "gt", "value": 10_000}],
    },
    {
        "name": "pay_small",
        "priority": 3,
        "action_type": "pay_vendor",
        "risk_level": "medium",
        "required_approvals": 1,
        "approver_group": "reviewers",
        "editable_params": ["amount", "memo"],
    },
]
PEOPLE = ("p0", "p1", "p2", "p3", "p4", "owen")
AMOUNTS = st.sampled_from([50, 9_000, 10_001, 400_000, 1_000_001, 7_000_000])

steps = st.lists(
    st.tuples(
        st.sampled_from(PEOPLE),
        st.sampled_from(["approve", "edit", "reject"]),
        AMOUNTS,
        st.booleans(),  # gives the step-up proof
    ),
    min_size=1,
    max_size=8,
)
memberships = st.fixed_dictionaries({name: st.sets(st.sampled_from(GROUPS), max_size=3) for name in PEOPLE})


@pytest.fixture
def payment_cast(admin_user, people):
    """p0..p4 and owen, who owns the agent (so separation of duties has someone to refuse)."""
    for name in GROUPS[1:]:
        Group.objects.get_or_create(name=name)
    policy.save_rules(RULES, actor=Person(admin_user), note="payments by size")
    User = get_user_model()
    cast = {name: User.objects.create_user(name, password=f"{name}-pw") for name in PEOPLE if name != "owen"}
    people["owen"].set_password("owen-pw")
    people["owen"].save()
    return {**cast, "owen": people["owen"]}


def _act(request_id, user, kind: str, amount: int, proves: bool) -> None:
    proof = services.StepUpProof.password(f"{user.username}-pw") if proves else None
    reviewer = services.Person(user, step_up=proof)
    try:
        if kind == "approve":
            services.approve(request_id, revision=current_revision(request_id), actor=reviewer)
        elif kind == "reject":
            services.reject(request_id, revision=current_revision(request_id), actor=reviewer, feedback="no")
        else:
            services.approve_with_edits(
                request_id,
                revision=current_revision(request_id),
                actor=reviewer,
                edits={"amount": amount, "memo": f"m{amount}"},
            )
    except errors.DomainError:
        pass  # refusals are allowed; what matters is what an approval stands on


def assert_stands_on_its_final_classification(request: ApprovalRequest) -> None:
    final = services.classification_input(request, request.current_params())
    fresh = policy.current_policy().compiled.classify(final)
    # The request never demands less than its final params would on their own.
    assert level_rank(request.risk_level) >= level_rank(fresh.risk_level)
    assert request.approver_group.name == request.classification["approver_group"]
    approvals = Decision.objects.filter(request=request, revision=request.current_revision, verdict="approve")
    approvers = {decision.reviewer for decision in approvals}
    assert len(approvers) >= request.required_approvals
    needs = needs_step_up(request.risk_level, rule_asks=request.classification.get("step_up", False))
    for decision in approvals:
        person = decision.reviewer
        assert person.groups.filter(name=request.approver_group.name).exists(), (person, request.approver_group)
        assert person.pk not in excluded_from_approving(request)
        assert decision.step_up_method or not needs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=memberships, start=AMOUNTS, plan=steps)
def test_an_approved_request_stands_on_its_own_final_classification(payment_cast, agent, groups, start, plan):
    for name, user in payment_cast.items():
        user.groups.set(Group.objects.filter(name__in=groups[name]))
    request = services.submit(
        services.Submission(kind=Kind.ACTION, action_type="pay_vendor", params={"amount": start, "memo": "m"}),
        agent=agent,
    )
    for who, kind, amount, proves in plan:
        _act(request.pk, payment_cast[who], kind, amount, proves)
    request.refresh_from_db()
    if request.state == State.APPROVED:
        assert_stands_on_its_final_classification(request)
