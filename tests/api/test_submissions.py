"""Submitting actions and plans: what the response says, idempotency, plan revisions, limits."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from agents.models import RequestCallback
from agents.resume import PLAN_APPROVED_TEXT
from approvals import services
from approvals.models import ApprovalRequest
from audit.models import AuditEvent
from tests.api.conftest import EMAIL, PLAN_MD
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db


def test_an_action_is_classified_and_the_response_says_why(api, agent):
    response = api.post("/api/v1/actions/", {**EMAIL, "run_id": "run-1", "tool_call_id": "call-1"}, format="json")
    assert response.status_code == 201
    body = response.json()
    request = ApprovalRequest.objects.get(pk=body["id"])
    assert response["Location"] == f"/api/v1/requests/{request.pk}/"
    assert body["state"] == "pending_approval"
    assert body["risk_level"] == request.risk_level == "medium"
    assert body["rule"]["reason"] == request.classification["reason"]
    assert body["policy_version"] == request.classification["policy_version"]
    assert body["decide_by"] is not None
    assert body["params"] == EMAIL["params"]
    assert (body["run_id"], body["tool_call_id"]) == ("run-1", "call-1")
    assert body["resume"] == {
        "request_id": str(request.pk),
        "state": "pending_approval",
        "decided": False,
        "resume_data": None,
        "tool_result": None,
    }
    assert AuditEvent.objects.filter(request_id=request.pk, verb="request.submitted", actor_label="mail-bot").exists()


def test_a_low_risk_action_is_approved_at_once_with_its_resume_data(api):
    response = api.post("/api/v1/actions/", {"action_type": "read_file", "params": {"path": "a.txt"}}, format="json")
    body = response.json()
    assert body["state"] == "approved"
    assert body["resume"]["resume_data"] == {"action": "approved", "params": {"path": "a.txt"}}


def test_a_prohibited_action_is_refused_by_policy(api):
    response = api.post("/api/v1/actions/", {"action_type": "delete_database", "params": {}}, format="json")
    body = response.json()
    assert response.status_code == 201
    assert body["state"] == "rejected" and body["risk_level"] == "prohibited"
    assert body["resume"]["resume_data"]["action"] == "rejected"
    assert body["resume"]["resume_data"]["feedback"].startswith("Refused by policy")


def test_a_plan_carries_the_suspend_payload_with_the_title_from_its_first_heading(api):
    response = api.post("/api/v1/plans/", {"path": ".mastracode/plans/auth.md", "plan": PLAN_MD}, format="json")
    body = response.json()
    assert response.status_code == 201
    assert body["kind"] == "plan" and body["action_type"] == "submit_plan"
    assert body["plan"] == {"path": ".mastracode/plans/auth.md", "title": "Refactor the auth module", "plan": PLAN_MD}


def test_a_plan_without_a_heading_is_titled_by_its_file_name(api):
    body = api.post("/api/v1/plans/", {"path": "plans/dark-mode.md", "plan": "Just do it."}, format="json").json()
    assert body["plan"]["title"] == "dark-mode.md"


def test_an_explicit_title_wins(api):
    body = api.post("/api/v1/plans/", {"path": "p.md", "title": "Mine", "plan": PLAN_MD}, format="json").json()
    assert body["plan"]["title"] == "Mine"


# --- Idempotency ----------------------------------------------------------------------


def test_same_key_same_body_replays_the_first_request(api):
    first = api.post("/api/v1/actions/", EMAIL, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = api.post("/api/v1/actions/", EMAIL, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert ApprovalRequest.objects.count() == 1
    assert AuditEvent.objects.filter(verb="request.submitted").count() == 1


def test_the_key_may_travel_in_the_body(api):
    first = api.post("/api/v1/actions/", {**EMAIL, "idempotency_key": "k-2"}, format="json")
    again = api.post("/api/v1/actions/", {**EMAIL, "idempotency_key": "k-2"}, format="json")
    assert again.json()["id"] == first.json()["id"]
    assert first.json()["idempotency_key"] == "k-2"


def test_same_key_different_body_is_422(api):
    api.post("/api/v1/actions/", EMAIL, format="json", HTTP_IDEMPOTENCY_KEY="k-3")
    changed = {**EMAIL, "params": {**EMAIL["params"], "subject": "Other"}}
    response = api.post("/api/v1/actions/", changed, format="json", HTTP_IDEMPOTENCY_KEY="k-3")
    assert response.status_code == 422
    assert response.json()["code"] == "idempotency_key_reused"
    assert ApprovalRequest.objects.count() == 1


def test_keys_are_scoped_to_the_agent(api, rival_api):
    mine = api.post("/api/v1/actions/", EMAIL, format="json", HTTP_IDEMPOTENCY_KEY="shared").json()
    theirs = rival_api.post("/api/v1/actions/", EMAIL, format="json", HTTP_IDEMPOTENCY_KEY="shared").json()
    assert mine["id"] != theirs["id"]


def test_a_restarted_agent_finds_its_request_by_key_or_by_run_and_tool_call(api):
    created = api.post(
        "/api/v1/actions/", {**EMAIL, "run_id": "r9", "tool_call_id": "t9"}, format="json", HTTP_IDEMPOTENCY_KEY="k-9"
    ).json()
    by_key = api.get("/api/v1/requests/", {"idempotency_key": "k-9"}).json()["results"]
    by_call = api.get("/api/v1/requests/", {"run_id": "r9", "tool_call_id": "t9"}).json()["results"]
    assert [r["id"] for r in by_key] == [r["id"] for r in by_call] == [created["id"]]


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_concurrent_duplicates_create_exactly_one_request(require_postgres, token):
    from tests.api.conftest import bearer

    results: list = []
    barrier = threading.Barrier(8)

    def submit() -> None:
        try:
            barrier.wait()
            response = bearer(token).post("/api/v1/actions/", EMAIL, format="json", HTTP_IDEMPOTENCY_KEY="race")
            results.append((response.status_code, response.json().get("id")))
        finally:
            connection.close()

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert ApprovalRequest.objects.filter(idempotency_key="race").count() == 1
    assert {status for status, _ in results} == {201}
    assert len({request_id for _, request_id in results}) == 1
    assert AuditEvent.objects.filter(verb="request.submitted").count() == 1


# --- Plan revisions ------------------------------------------------------------------


def test_a_plan_resubmitted_after_rejection_is_the_next_revision(api, people):
    first = api.post("/api/v1/plans/", {"path": "p.md", "plan": PLAN_MD}, format="json").json()
    services.reject(
        first["id"],
        revision=current_revision(first["id"]),
        actor=services.Person(people["alice"]),
        feedback="Add error handling steps",
    )
    second = api.post("/api/v1/plans/", {"path": "p.md", "plan": PLAN_MD + "3. Handle errors.\n"}, format="json").json()
    assert second["supersedes"] == {"id": first["id"], "state": "rejected", "feedback": "Add error handling steps"}
    submitted = AuditEvent.objects.get(verb="request.submitted", request_id=second["id"])
    assert submitted.metadata["supersedes"] == first["id"]


def test_a_plan_at_another_path_or_thread_is_not_a_revision(api, people):
    first = api.post("/api/v1/plans/", {"path": "p.md", "plan": PLAN_MD, "thread_id": "t1"}, format="json").json()
    services.reject(
        first["id"], revision=current_revision(first["id"]), actor=services.Person(people["alice"]), feedback="no"
    )
    other_thread = api.post(
        "/api/v1/plans/", {"path": "p.md", "plan": PLAN_MD, "thread_id": "t2"}, format="json"
    ).json()
    other_path = api.post("/api/v1/plans/", {"path": "q.md", "plan": PLAN_MD, "thread_id": "t1"}, format="json").json()
    assert other_thread["supersedes"] is None and other_path["supersedes"] is None


def test_approval_binds_to_one_exact_revision(api, people):
    first = api.post("/api/v1/plans/", {"path": "p.md", "plan": PLAN_MD}, format="json").json()
    services.reject(
        first["id"], revision=current_revision(first["id"]), actor=services.Person(people["alice"]), feedback="more"
    )
    second = api.post("/api/v1/plans/", {"path": "p.md", "plan": PLAN_MD + "more"}, format="json").json()
    services.approve(second["id"], revision=current_revision(second["id"]), actor=services.Person(people["bob"]))
    resume_first = api.get(f"/api/v1/requests/{first['id']}/resume/").json()
    resume_second = api.get(f"/api/v1/requests/{second['id']}/resume/").json()
    assert resume_first["resume_data"]["action"] == "rejected"
    assert resume_second["tool_result"] == PLAN_APPROVED_TEXT
    assert resume_second["resume_data"]["plan"] == PLAN_MD + "more"


# --- Limits and validation -------------------------------------------------------------


def test_an_oversized_body_is_a_json_413(api, settings):
    settings.API_MAX_BODY_BYTES = 1000
    response = api.post("/api/v1/plans/", {"path": "p.md", "plan": "x" * 2000}, format="json")
    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"


def test_a_plan_over_the_character_limit_is_422(api, settings):
    settings.API_MAX_PLAN_CHARS = 100
    response = api.post("/api/v1/plans/", {"path": "p.md", "plan": "x" * 101}, format="json")
    assert response.status_code == 422
    assert response.json()["details"]["fields"]["plan"] == ["Plans are limited to 100 characters."]


def test_params_over_the_size_limit_are_422(api, settings):
    settings.API_MAX_PARAMS_BYTES = 50
    response = api.post("/api/v1/actions/", {**EMAIL, "params": {"body": "y" * 100}}, format="json")
    assert response.status_code == 422 and "params" in response.json()["details"]["fields"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"params": {}}, "action_type"),
        ({"action_type": "x y"}, "action_type"),
        ({"action_type": "send", "params": [1, 2]}, "params"),
    ],
)
def test_invalid_actions_are_422_naming_the_field(api, body, field):
    response = api.post("/api/v1/actions/", body, format="json")
    assert response.status_code == 422
    assert field in response.json()["details"]["fields"]


def test_malformed_json_is_a_json_400(api):
    response = api.post("/api/v1/actions/", "{not json", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "malformed_body"


# --- Callback URLs ----------------------------------------------------------------------


def test_a_callback_url_on_the_allow_list_is_stored(api):
    body = api.post("/api/v1/actions/", {**EMAIL, "callback_url": "http://127.0.0.1:9/hook"}, format="json").json()
    assert RequestCallback.objects.get(request_id=body["id"]).url == "http://127.0.0.1:9/hook"


@pytest.mark.parametrize(
    "url, code",
    [
        ("http://evil.example.net/hook", "outbound_url_not_allowed"),
        ("ftp://127.0.0.1/hook", "outbound_url_invalid"),
    ],
)
def test_a_callback_url_off_the_allow_list_is_refused(api, url, code):
    response = api.post("/api/v1/actions/", {**EMAIL, "callback_url": url}, format="json")
    assert response.status_code == 422 and response.json()["code"] == code
    assert not ApprovalRequest.objects.exists()


def test_loopback_callbacks_are_refused_unless_private_addresses_are_allowed(api, settings):
    settings.OUTBOUND_ALLOW_PRIVATE = False
    response = api.post("/api/v1/actions/", {**EMAIL, "callback_url": "http://127.0.0.1:9/hook"}, format="json")
    assert response.status_code == 422 and response.json()["code"] == "outbound_url_private"
