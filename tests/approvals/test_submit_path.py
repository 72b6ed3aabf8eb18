"""The submission path (approvals.services.submit): who counts as an eligible approver
of a request (the quorum check's count, one SQL statement), and its single write."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from approvals.models import ApprovalRequest, ApprovalRequestUserObjectPermission
from approvals.permissions import DECIDE, eligible_approver_count, eligible_approvers, grant_group
from approvals.states import State

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("setup", ["as_cast", "bob_inactive", "no_requested_for", "only_excluded_people"])
def test_a_new_request_counts_its_groups_active_members_but_the_excluded(setup, submit, people, reviewers_group):
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
    eligible = eligible_approver_count(request)
    assert eligible == {"as_cast": 3, "bob_inactive": 2, "no_requested_for": 4, "only_excluded_people": 0}[setup]
    assert (
        set(eligible_approvers(request).values_list("username", flat=True))
        == {
            "as_cast": {"alice", "bob", "carol"},
            "bob_inactive": {"alice", "carol"},
            "no_requested_for": {"alice", "bob", "carol", "rita"},
            "only_excluded_people": set(),
        }[setup]
    )
    assert request.quorum_reachable is (eligible >= request.required_approvals)


def test_a_second_group_and_direct_grants_count_each_person_once(submit, people, treasurers):
    request = submit()
    before = set(eligible_approvers(request).values_list("username", flat=True))

    grant_group(request, treasurers["tess"].groups.get(name="treasury"))  # tess, trent, and vera (already a reviewer)
    decide = Permission.objects.get(content_type__app_label="approvals", codename=DECIDE)
    for person in (treasurers["trent"], people["mallory"]):  # trent again, and someone in no group
        ApprovalRequestUserObjectPermission.objects.create(content_object=request, user=person, permission=decide)

    after = set(eligible_approvers(request).values_list("username", flat=True))
    assert after == before | {"tess", "trent", "mallory"}
    assert eligible_approver_count(request) == len(after) == len(before) + 3


def test_a_submission_is_stored_as_classified(submit):
    request = submit()
    stored = ApprovalRequest.objects.get(pk=request.pk)
    for name in (
        "state",
        "risk_level",
        "rule_id",
        "rule_name",
        "approver_group_id",
        "required_approvals",
        "decide_by",
        "policy_version_id",
        "classification",
        "impact",
        "quorum_reachable",
    ):
        assert getattr(stored, name) == getattr(request, name), name
    assert stored.revisions.get(number=1).risk_level == request.risk_level
