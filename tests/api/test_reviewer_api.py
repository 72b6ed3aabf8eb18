"""Reviewers: the list shows only what they may view (one query shape), and they
decide through the API with their session and CSRF token."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from approvals import services
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import Kind
from audit.models import AuditEvent
from tests.api.conftest import EMAIL, csrf_post

pytestmark = pytest.mark.django_db


def _submit_many(agent, count: int, action_type: str = "send_email") -> list[ApprovalRequest]:
    return [
        services.submit(
            services.Submission(
                kind=Kind.ACTION, action_type=action_type, params={"to": [f"p{i}@example.com"], "body": "secret"}
            ),
            agent=agent,
        )
        for i in range(count)
    ]


def test_reviewers_list_only_requests_they_may_view(agent, people, reviewer_client):
    visible = _submit_many(agent, 3)
    hidden_group = Group.objects.create(name="finance")
    hidden = _submit_many(agent, 2)
    ApprovalRequest.objects.filter(pk__in=[r.pk for r in hidden]).update(approver_group=hidden_group)
    from approvals.models import ApprovalRequestGroupObjectPermission

    ApprovalRequestGroupObjectPermission.objects.filter(content_object__in=hidden).update(group=hidden_group)
    listed = reviewer_client("alice").get("/api/v1/requests/").json()["results"]
    assert {r["id"] for r in listed} == {str(r.pk) for r in visible}
    assert reviewer_client("mallory").get("/api/v1/requests/").json()["results"] == []


def test_both_lists_cost_a_constant_number_of_queries(agent, api, reviewer_client, django_assert_max_num_queries):
    _submit_many(agent, 250)
    client = reviewer_client("alice")
    with django_assert_max_num_queries(8):
        reviewer_page = client.get("/api/v1/requests/", {"page_size": 200})
    with django_assert_max_num_queries(8):
        agent_page = api.get("/api/v1/requests/", {"page_size": 200, "state": "pending_approval"})
    assert len(reviewer_page.json()["results"]) == len(agent_page.json()["results"]) == 200
    assert reviewer_page.json()["next"] and agent_page.json()["next"]


def test_filters_narrow_the_list(api):
    api.post("/api/v1/actions/", {**EMAIL, "thread_id": "t-1"}, format="json")
    api.post("/api/v1/actions/", {"action_type": "read_file", "thread_id": "t-2"}, format="json")
    assert [r["thread_id"] for r in api.get("/api/v1/requests/", {"thread_id": "t-2"}).json()["results"]] == ["t-2"]
    assert [r["state"] for r in api.get("/api/v1/requests/", {"state": "approved"}).json()["results"]] == ["approved"]


def test_the_list_takes_the_reviewer_pages_filters_and_refuses_a_value_no_request_can_hold(api, reviewer_client):
    api.post("/api/v1/actions/", EMAIL, format="json")
    api.post("/api/v1/actions/", {"action_type": "read_file"}, format="json")
    by_risk = reviewer_client("alice").get("/api/v1/requests/", {"risk": "medium", "agent": "mail-bot"})
    assert [r["action_type"] for r in by_risk.json()["results"]] == ["send_email"]
    refused = api.get("/api/v1/requests/", {"state": "approved-ish", "kind": "action"})
    assert refused.status_code == 422
    assert (refused.json()["code"], list(refused.json()["details"]["fields"])) == ("validation_error", ["state"])


def test_reviewers_see_masked_params_masked(agent, people, reviewer_client, admin_user, api):
    from approvals import policy

    policy.save_rule(
        {
            "name": "mask_body",
            "priority": 1,
            "action_type": "send_email",
            "risk_level": "medium",
            "masked_params": ["body"],
            "conditions": [],
        },
        actor=Person(admin_user),
        note="mask",
    )
    request_id = api.post("/api/v1/actions/", EMAIL, format="json").json()["id"]
    seen = reviewer_client("alice").get(f"/api/v1/requests/{request_id}/").json()
    assert seen["params"]["body"] != EMAIL["params"]["body"]
    assert api.get(f"/api/v1/requests/{request_id}/").json()["params"] == EMAIL["params"]


def test_a_reviewer_rejects_with_feedback(api, reviewer_client):
    request_id = api.post("/api/v1/actions/", EMAIL, format="json").json()["id"]
    response = csrf_post(
        reviewer_client("bob"),
        f"/api/v1/requests/{request_id}/decisions/",
        {"decision": "reject", "revision": 1, "feedback": "Wrong recipient"},
    )
    assert response.status_code == 200 and response.json()["state"] == "rejected"
    assert response.json()["feedback"] == "Wrong recipient"
    assert AuditEvent.objects.filter(request_id=request_id, verb="request.rejected", actor_label="bob").exists()


def test_a_reviewer_approves_with_edits(api, reviewer_client, two_person_rule):
    request_id = api.post(
        "/api/v1/actions/", {"action_type": "transfer_funds", "params": {"amount": 900}}, format="json"
    ).json()["id"]
    response = csrf_post(
        reviewer_client("alice"),
        f"/api/v1/requests/{request_id}/decisions/",
        {"decision": "approve", "revision": 1, "edits": {"amount": 500}},
    )
    assert response.status_code == 200
    assert response.json()["params"] == {"amount": 500} and response.json()["revision"] == 2
    assert AuditEvent.objects.filter(request_id=request_id, verb="request.revised").exists()


def test_refusals_carry_their_codes(api, reviewer_client, two_person_rule):
    request_id = api.post("/api/v1/actions/", EMAIL, format="json").json()["id"]
    url = f"/api/v1/requests/{request_id}/decisions/"
    owner = csrf_post(reviewer_client("owen"), url, {"decision": "approve", "revision": 1})
    assert owner.status_code == 403 and owner.json()["code"] == "separation_of_duties"
    transfer_id = api.post(
        "/api/v1/actions/", {"action_type": "transfer_funds", "params": {"amount": 5, "to": "a"}}, format="json"
    ).json()["id"]
    edit = csrf_post(
        reviewer_client("alice"),
        f"/api/v1/requests/{transfer_id}/decisions/",
        {"decision": "approve", "revision": 1, "edits": {"to": "mallory"}},
    )
    assert edit.status_code == 422 and edit.json()["code"] == "param_not_editable"
    invalid = csrf_post(reviewer_client("alice"), url, {"decision": "maybe"})
    assert invalid.status_code == 422 and invalid.json()["code"] == "validation_error"
    csrf_post(reviewer_client("alice"), url, {"decision": "approve", "revision": 1})
    late = csrf_post(reviewer_client("bob"), url, {"decision": "reject", "revision": 1})
    assert late.status_code == 409 and late.json()["code"] == "already_decided"
