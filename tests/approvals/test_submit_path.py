"""The submission fast path (approvals.services.submit) against the general code it
stands in for: the eligible-approver count of a new request, and its single write."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from approvals.permissions import eligible_approver_count, eligible_approver_count_of_new_request
from approvals.states import State

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("setup", ["as_cast", "bob_inactive", "no_requested_for", "only_excluded_people"])
def test_the_new_request_count_agrees_with_the_permission_query(setup, submit, people, reviewers_group):
    overrides = {}
    if setup == "bob_inactive":
        people["bob"].is_active = False
        people["bob"].save()
    elif setup == "no_requested_for":
        overrides["requested_for"] = None
    elif setup == "only_excluded_people":
        for name in ("alice", "bob", "carol"):
            people[name].groups.remove(reviewers_group)
    request = submit(**overrides)
    assert request.state == State.PENDING_APPROVAL
    fast = eligible_approver_count_of_new_request(request)
    assert fast == eligible_approver_count(request)
    assert fast == {"as_cast": 3, "bob_inactive": 2, "no_requested_for": 4, "only_excluded_people": 0}[setup]
    assert request.quorum_reachable is (fast >= request.required_approvals)


def test_a_submission_is_stored_as_classified(submit):
    request = submit()
    stored = ApprovalRequest.objects.get(pk=request.pk)
    for name in ("state", "risk_level", "rule_id", "rule_name", "approver_group_id", "required_approvals",
                 "decide_by", "policy_version_id", "classification", "impact", "quorum_reachable"):
        assert getattr(stored, name) == getattr(request, name), name
    assert stored.revisions.get(number=1).risk_level == request.risk_level
