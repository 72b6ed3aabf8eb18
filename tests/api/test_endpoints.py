"""Every endpoint, three ways: anonymous (401), on another agent's request (404,
indistinguishable from a missing one), and permitted (with its audit event)."""

from __future__ import annotations

import uuid

import pytest

from approvals import services
from audit.models import AuditEvent
from tests.api.conftest import EMAIL, PLAN_MD, csrf_post
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db

LOW_RISK = {"action_type": "read_file", "params": {"path": "notes.txt"}}
# A claim names a fresh nonce that the signed grant binds (hitl_controlplane.grants).
CLAIM = {"nonce": "n0nce-" + "a" * 37}


def _pending(api) -> str:
    return api.post("/api/v1/actions/", EMAIL, format="json").json()["id"]


def _approved(api) -> str:
    return api.post("/api/v1/actions/", LOW_RISK, format="json").json()["id"]


def _executing(api) -> tuple[str, str]:
    request_id = _approved(api)
    grant = api.post(f"/api/v1/requests/{request_id}/claim/", CLAIM, format="json").json()
    return request_id, grant["token"]


# (name, method, path template, body factory or None, status when permitted, audit verb)
REQUEST_ENDPOINTS = [
    ("detail", "get", "/api/v1/requests/{id}/", _pending, 200, None),
    ("resume", "get", "/api/v1/requests/{id}/resume/", _pending, 200, None),
    ("cancel", "post", "/api/v1/requests/{id}/cancel/", _pending, 200, "request.cancelled"),
    ("claim", "post", "/api/v1/requests/{id}/claim/", _approved, 200, "request.execution_claimed"),
]


@pytest.mark.parametrize(
    "name, method, path, make, expected, verb", REQUEST_ENDPOINTS, ids=[e[0] for e in REQUEST_ENDPOINTS]
)
def test_request_endpoints_for_agents(api, rival_api, anonymous, name, method, path, make, expected, verb):
    request_id = make(api)
    url = path.format(id=request_id)
    call = {"get": lambda client: client.get(url), "post": lambda client: client.post(url, CLAIM, format="json")}[
        method
    ]

    anonymous_response = call(anonymous)
    assert anonymous_response.status_code == 401
    assert anonymous_response.json()["code"] == "not_authenticated"

    foreign = call(rival_api)
    unknown_url = path.format(id=uuid.uuid4())
    unknown = rival_api.get(unknown_url) if method == "get" else rival_api.post(unknown_url, CLAIM, format="json")
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json() == unknown.json() == {"code": "not_found", "message": "No such approval request."}

    before = AuditEvent.objects.count()
    permitted = call(api)
    assert permitted.status_code == expected, permitted.json()
    if verb:
        assert AuditEvent.objects.filter(request_id=request_id, verb=verb, actor_label="mail-bot").exists()
    else:
        assert AuditEvent.objects.count() == before


def test_complete_for_agents(api, rival_api, anonymous):
    request_id, grant_token = _executing(api)
    url = f"/api/v1/requests/{request_id}/complete/"
    body = {"token": grant_token, "succeeded": True, "result": {"sent": 1}}
    assert anonymous.post(url, body, format="json").status_code == 401
    assert rival_api.post(url, body, format="json").status_code == 404
    response = api.post(url, body, format="json")
    assert response.status_code == 200
    assert response.json()["state"] == "succeeded" and response.json()["result"] == {"sent": 1}
    assert AuditEvent.objects.filter(request_id=request_id, verb="request.succeeded").exists()


@pytest.mark.parametrize(
    "path, body, verb",
    [
        ("/api/v1/actions/", EMAIL, "request.submitted"),
        ("/api/v1/plans/", {"path": "p.md", "plan": PLAN_MD}, "request.submitted"),
    ],
)
def test_submission_endpoints(api, anonymous, path, body, verb):
    assert anonymous.post(path, body, format="json").status_code == 401
    response = api.post(path, body, format="json")
    assert response.status_code == 201
    assert AuditEvent.objects.filter(request_id=response.json()["id"], verb=verb).exists()


def test_the_list_shows_an_agent_only_its_own_requests(api, rival_api, anonymous):
    mine = _pending(api)
    theirs = _pending(rival_api)
    assert anonymous.get("/api/v1/requests/").status_code == 401
    assert [r["id"] for r in api.get("/api/v1/requests/").json()["results"]] == [mine]
    assert [r["id"] for r in rival_api.get("/api/v1/requests/").json()["results"]] == [theirs]


def test_decisions_endpoint(api, anonymous, reviewer_client):
    request_id = _pending(api)
    url = f"/api/v1/requests/{request_id}/decisions/"
    response = anonymous.post(url, {"decision": "approve", "revision": 1}, format="json")
    assert response.status_code == 401 and response.json()["code"] == "not_authenticated"
    # mallory holds no view permission: the request does not exist for her.
    unknown = csrf_post(
        reviewer_client("mallory"),
        f"/api/v1/requests/{uuid.uuid4()}/decisions/",
        {"decision": "approve", "revision": 1},
    )
    hidden = csrf_post(reviewer_client("mallory"), url, {"decision": "approve", "revision": 1})
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.json() == unknown.json()
    # An agent's token is not a reviewer.
    assert api.post(url, {"decision": "approve", "revision": 1}, format="json").status_code == 401
    approved = csrf_post(reviewer_client("alice"), url, {"decision": "approve", "revision": 1, "feedback": "fine"})
    assert approved.status_code == 200 and approved.json()["state"] == "approved"
    assert AuditEvent.objects.filter(request_id=request_id, verb="decision.recorded", actor_label="alice").exists()


def test_claim_twice_is_409_already_claimed(api):
    request_id = _approved(api)
    assert api.post(f"/api/v1/requests/{request_id}/claim/", CLAIM, format="json").status_code == 200
    again = api.post(f"/api/v1/requests/{request_id}/claim/", CLAIM, format="json")
    assert again.status_code == 409 and again.json()["code"] == "already_claimed"


def test_the_grant_carries_the_exact_approved_params_and_the_idempotency_key(api):
    request_id = _approved(api)
    grant = api.post(f"/api/v1/requests/{request_id}/claim/", CLAIM, format="json").json()
    assert grant["params"] == LOW_RISK["params"]
    assert grant["idempotency_key"] == f"cp-{request_id}-r1"
    assert grant["request_id"] == request_id and grant["lease_until"]


def test_a_claim_with_a_changed_target_is_refused_with_its_reason(api):
    request_id = _approved(api)
    response = api.post(f"/api/v1/requests/{request_id}/claim/", {**CLAIM, "target_hash": "0" * 64}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "target_changed_reapproval_required"
    assert api.get(f"/api/v1/requests/{request_id}/").json()["state"] == "failed"


def test_claiming_a_pending_request_is_refused(api):
    response = api.post(f"/api/v1/requests/{_pending(api)}/claim/", CLAIM, format="json")
    assert response.status_code == 409 and response.json()["code"] == "illegal_transition"


def test_complete_with_a_wrong_grant_is_403_invalid_grant(api):
    request_id, _ = _executing(api)
    response = api.post(
        f"/api/v1/requests/{request_id}/complete/", {"token": "forged", "succeeded": True}, format="json"
    )
    assert response.status_code == 403 and response.json()["code"] == "invalid_grant"


def test_a_failed_execution_is_recorded_with_its_error(api):
    request_id, grant_token = _executing(api)
    response = api.post(
        f"/api/v1/requests/{request_id}/complete/",
        {"token": grant_token, "succeeded": False, "error": "SMTP 550"},
        format="json",
    )
    assert response.json()["state"] == "failed" and response.json()["error"] == "SMTP 550"


def test_cancel_after_a_decision_is_409(api, people):
    request_id = _pending(api)
    services.reject(
        request_id, revision=current_revision(request_id), actor=services.Person(people["alice"]), feedback="no"
    )
    response = api.post(f"/api/v1/requests/{request_id}/cancel/", {}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "already_decided"
