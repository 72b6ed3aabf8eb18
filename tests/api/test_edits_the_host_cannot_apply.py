"""A host that runs a call exactly as it submitted it (Mastra's `approveToolCall` carries
no arguments) leaves `edit` out of its `allowed_decisions`. Reviewers are then not offered
an edit, and the decision core refuses one through every path (page form, JSON API), so an
approval never stands for params the host will not run."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest, ParamsRevision
from approvals.states import State
from audit.models import AuditEvent
from tests.api.conftest import EMAIL, csrf_post

pytestmark = pytest.mark.django_db

AS_SUBMITTED = {**EMAIL, "tool_call_id": "call-1", "run_id": "run-1", "allowed_decisions": ["approve", "reject"]}
JSON = {"HTTP_ACCEPT": "application/json"}


def _submit(api, body: dict) -> str:
    response = api.post("/api/v1/actions/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def _nothing_changed(request_id: str) -> None:
    request = ApprovalRequest.objects.get(pk=request_id)
    assert request.state == State.PENDING_APPROVAL and request.current_revision == 1
    assert ParamsRevision.objects.filter(request=request).count() == 1
    assert not AuditEvent.objects.filter(request_id=request_id, verb="request.revised").exists()


def test_what_the_host_applies_is_stored_and_shown_and_defaults_to_edits_allowed(api):
    as_submitted = api.get(f"/api/v1/requests/{_submit(api, AS_SUBMITTED)}/").json()
    default = api.get(f"/api/v1/requests/{_submit(api, EMAIL)}/").json()
    assert as_submitted["allowed_decisions"] == ["approve", "reject"]
    assert default["allowed_decisions"] == ["approve", "edit", "reject"]


def test_the_reviewer_api_refuses_an_edit_the_host_cannot_apply(api, reviewer_client):
    request_id = _submit(api, AS_SUBMITTED)
    url = f"/api/v1/requests/{request_id}/decisions/"
    edit = csrf_post(
        reviewer_client("alice"), url, {"decision": "approve", "revision": 1, "edits": {"subject": "Hello Dana"}}
    )
    assert edit.status_code == 422 and edit.json()["code"] == "decision_not_allowed"
    assert "cannot apply 'edit'" in edit.json()["message"]
    _nothing_changed(request_id)
    # Approving it unchanged still works, and the host resumes with exactly what it sent.
    assert csrf_post(reviewer_client("alice"), url, {"decision": "approve", "revision": 1}).status_code == 200
    resume = api.get(f"/api/v1/requests/{request_id}/resume/").json()
    assert resume["resume_data"] == {"action": "approved", "params": EMAIL["params"]}


def test_the_refusal_comes_before_the_rules_own_edit_checks(api, reviewer_client):
    # Even a param no rule makes editable reads as "the host cannot apply it", the real reason.
    request_id = _submit(api, AS_SUBMITTED)
    edit = csrf_post(
        reviewer_client("alice"),
        f"/api/v1/requests/{request_id}/decisions/",
        {"decision": "approve", "revision": 1, "edits": {"nonsense": 1}},
    )
    assert edit.json()["code"] == "decision_not_allowed"


def test_the_page_form_is_refused_in_words_too(api, client, people):
    request_id = _submit(api, AS_SUBMITTED)
    client.force_login(people["alice"])
    response = client.post(
        reverse("approvals:approve-with-edits", args=[request_id]),
        {"edit:subject": "Hello Dana", "revision": "1"},
        **JSON,
    )
    assert response.status_code == 422 and response.json()["code"] == "decision_not_allowed"
    _nothing_changed(request_id)


def test_the_card_offers_edit_and_approve_only_where_the_host_can_apply_an_edit(api, client, people):
    fixed, editable = _submit(api, AS_SUBMITTED), _submit(api, EMAIL)
    client.force_login(people["alice"])
    page = client.get(reverse("approvals:queue")).content.decode()
    forms = {request_id: reverse("approvals:approve-with-edits", args=[request_id]) for request_id in (fixed, editable)}
    assert f'action="{forms[editable]}"' in page
    assert f'action="{forms[fixed]}"' not in page
    # Both cards still offer approve and reject.
    for request_id in (fixed, editable):
        assert f'action="{reverse("approvals:approve", args=[request_id])}"' in page


def test_an_edited_request_that_allows_edits_still_works(api, reviewer_client):
    request_id = _submit(api, EMAIL)
    response = csrf_post(
        reviewer_client("alice"),
        f"/api/v1/requests/{request_id}/decisions/",
        {"decision": "approve", "revision": 1, "edits": {"subject": "Hello Dana"}},
    )
    assert response.status_code == 200 and response.json()["revision"] == 2


def test_a_different_allowance_under_the_same_key_is_another_body(api):
    first = _submit(api, {**EMAIL, "idempotency_key": "k-1"})
    replay = api.post("/api/v1/actions/", {**EMAIL, "idempotency_key": "k-1"}, format="json")
    assert replay.status_code == 201 and replay.json()["id"] == first
    other = api.post(
        "/api/v1/actions/",
        {**EMAIL, "allowed_decisions": ["approve", "reject"], "idempotency_key": "k-1"},
        format="json",
    )
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
