"""Answering a suspension: `respond` with `resume_data` validated against the stored
schema, the quorum (the first answer is the proposal; agree, reject, or replace it and
restart the count), the revision and step-up rules, separation of duties, the resume
the host gets, and the audit trail (a keyed digest of the answer, never the answer)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest
from audit.chain import digest
from audit.models import AuditEvent

from .conftest import APPROVAL_STEP, decide, rule

pytestmark = pytest.mark.django_db

JSON = {"HTTP_ACCEPT": "application/json"}
AMOUNT_SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "limit": {"type": "number", "minimum": 0},
        "approvers": {
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        },
    },
    "required": ["approved"],
}


def resume(api, request_id) -> dict:
    return api.get(f"/api/v1/requests/{request_id}/resume/").json()


def answer(client, request_id, data, **extra):
    return decide(client, request_id, {"decision": "respond", "resume_data": data, **extra})


class TestValidation:
    def test_an_answer_the_schema_refuses_is_422_naming_the_path(self, pending, reviewer_client):
        request_id = pending(resume_schema=AMOUNT_SCHEMA)
        alice = reviewer_client("alice")
        wrong_type = answer(alice, request_id, {"approved": "yes"})
        assert (wrong_type.status_code, wrong_type.json()["code"]) == (422, "invalid_resume_data")
        assert wrong_type.json()["details"]["path"] == "/approved"
        assert "/approved" in wrong_type.json()["message"]

        nested = answer(alice, request_id, {"approved": True, "approvers": [{"name": "a"}, {"nom": "b"}]})
        assert nested.json()["details"]["path"] == "/approvers/1/name"

        missing = answer(alice, request_id, {"limit": -1})
        assert {e["path"] for e in missing.json()["details"]["errors"]} == {"/approved", "/limit"}
        assert ApprovalRequest.objects.get(pk=request_id).state == "pending_approval"
        assert not AuditEvent.objects.filter(verb="suspension.answered").exists()

    def test_approve_without_an_answer_is_refused_because_the_answer_is_the_decision(self, pending, reviewer_client):
        response = decide(reviewer_client("alice"), pending(), {"decision": "approve"})
        assert (response.status_code, response.json()["code"]) == (422, "resume_data_required")

    def test_edits_are_refused_a_suspension_is_answered(self, pending, reviewer_client):
        response = decide(reviewer_client("alice"), pending(), {"decision": "approve", "edits": {"amount": 1}})
        assert response.status_code == 422

    def test_respond_on_an_action_is_refused(self, api, reviewer_client):
        from tests.api.conftest import EMAIL

        action = api.post(
            "/api/v1/actions/", {**EMAIL, "params": {**EMAIL["params"], "to": ["x@example.com"] * 20}}, format="json"
        ).json()
        response = answer(reviewer_client("alice"), action["id"], {"approved": True})
        assert (response.status_code, response.json()["code"]) == (422, "not_a_suspension")

    def test_a_catastrophic_pattern_is_matched_by_re2_and_answered_at_once(self, pending, reviewer_client):
        # ^(a+)+$ against 'aaaa...!' takes Python's `re` exponential time; RE2 is linear.
        schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}}
        request_id = pending(resume_schema=schema)
        response = answer(reviewer_client("alice"), request_id, {"code": "a" * 5000 + "!"})
        assert (response.status_code, response.json()["details"]["path"]) == (422, "/code")
        assert len(response.json()["message"]) < 400  # the 5 KB value is not echoed back whole
        assert answer(reviewer_client("alice"), request_id, {"code": "a" * 5000}).json()["state"] == "approved"

    def test_a_number_too_large_for_json_is_refused_on_the_page_path(self, pending, client, people):
        # The API's JSON field refuses 1e400; the page's form parses it to infinity,
        # which no resume could carry back as JSON.
        client.force_login(people["alice"])
        response = client.post(
            reverse("approvals:respond", args=[pending()]),
            {"resume_data": '{"approved": true, "n": [1e400]}', "revision": "1"},
            **JSON,
        )
        assert (response.status_code, response.json()["code"]) == (422, "invalid_resume_data")
        assert response.json()["details"]["path"] == "/n/0"

    def test_a_large_but_ordinary_answer_fits_the_evaluation_budget(self, pending, reviewer_client, api):
        schema = {
            "type": "object",
            "properties": {"values": {"type": "array", "items": {"type": "number", "minimum": 0}}},
        }
        request_id = pending(resume_schema=schema)
        values = list(range(3000))
        assert answer(reviewer_client("alice"), request_id, {"values": values}).json()["state"] == "approved"
        assert resume(api, request_id)["resume_data"] == {"values": values}


class TestResume:
    def test_the_host_resumes_with_exactly_the_validated_answer(self, pending, reviewer_client, api):
        request_id = pending(resume_schema=AMOUNT_SCHEMA)
        given = {"limit": 150.13, "approved": True, "approvers": [{"name": "Zoë ✓"}], "note": "1e3"}
        decided = answer(reviewer_client("alice"), request_id, given)
        assert decided.json()["state"] == "approved"
        body = resume(api, request_id)
        assert body["state"] == "approved" and body["decided"] is True
        assert body["resume_data"] == given
        assert list(body["resume_data"]) == list(given)  # key order kept, though the database may reorder
        assert json.dumps(body["resume_data"]) == json.dumps(given)
        assert body["tool_result"].startswith("The reviewer answered")

    def test_a_rejection_resumes_with_no_answer_and_the_feedback(self, pending, reviewer_client, api):
        request_id = pending()
        decide(reviewer_client("alice"), request_id, {"decision": "reject", "feedback": "Call finance first."})
        body = resume(api, request_id)
        assert (body["state"], body["resume_data"], body["feedback"]) == ("rejected", None, "Call finance first.")
        assert "Call finance first." in body["tool_result"]

    def test_a_cancelled_suspension_resumes_with_no_answer(self, pending, api):
        request_id = pending()
        api.post(f"/api/v1/requests/{request_id}/cancel/", {"reason": "run aborted"}, format="json")
        body = resume(api, request_id)
        assert (body["state"], body["resume_data"]) == ("cancelled", None)
        assert "run aborted" in body["feedback"]


class TestQuorum:
    @pytest.fixture
    def two_answers(self, admin_user):
        rule(
            admin_user,
            name="two_answers",
            priority=2,
            action_type="approval-flow.*",
            risk_level="high",
            required_approvals=2,
        )

    def test_the_first_answer_is_the_proposal_and_an_approval_agrees_with_it(
        self, two_answers, pending, reviewer_client, api
    ):
        request_id = pending()
        first = answer(reviewer_client("alice"), request_id, {"approved": False}, revision=1)
        assert first.json()["outcome"] == "vote_recorded"
        assert first.json()["suspension"]["answer"] == {"approved": False}
        assert first.json()["revision"] == 2
        assert resume(api, request_id)["decided"] is False

        agreed = decide(reviewer_client("bob"), request_id, {"decision": "approve", "revision": 2})
        assert agreed.json()["state"] == "approved"
        assert resume(api, request_id)["resume_data"] == {"approved": False}

    def test_the_same_answer_again_agrees(self, two_answers, pending, reviewer_client, api):
        request_id = pending()
        answer(reviewer_client("alice"), request_id, {"approved": True})
        assert answer(reviewer_client("bob"), request_id, {"approved": True}).json()["state"] == "approved"
        assert resume(api, request_id)["resume_data"] == {"approved": True}

    def test_a_different_answer_replaces_the_proposal_and_restarts_the_count(
        self, two_answers, pending, reviewer_client, api
    ):
        request_id = pending()
        answer(reviewer_client("alice"), request_id, {"approved": True})
        replaced = answer(reviewer_client("bob"), request_id, {"approved": False}, revision=2)
        assert replaced.json()["state"] == "pending_approval"  # alice's agreement was with the old answer
        assert (replaced.json()["revision"], replaced.json()["suspension"]["answer"]) == (3, {"approved": False})

        stale = decide(reviewer_client("carol"), request_id, {"decision": "approve", "revision": 2})
        assert (stale.status_code, stale.json()["code"]) == (409, "revision_changed")

        assert (
            decide(reviewer_client("alice"), request_id, {"decision": "approve", "revision": 3}).json()["state"]
            == "approved"
        )
        assert resume(api, request_id)["resume_data"] == {"approved": False}
        proposals = list(
            AuditEvent.objects.filter(verb="suspension.answered")
            .order_by("seq")
            .values_list("metadata__proposal", flat=True)
        )
        assert proposals == ["new", "replaced"]

    def test_a_rejection_of_the_proposal_ends_the_request(self, two_answers, pending, reviewer_client, api):
        request_id = pending()
        answer(reviewer_client("alice"), request_id, {"approved": True})
        decide(reviewer_client("bob"), request_id, {"decision": "reject", "feedback": "No."})
        assert (resume(api, request_id)["state"], resume(api, request_id)["resume_data"]) == ("rejected", None)


class TestGuards:
    def test_an_answer_given_on_an_old_revision_is_not_recorded(self, pending, reviewer_client, admin_user):
        rule(admin_user, name="two", priority=2, action_type="approval-flow.*", risk_level="high", required_approvals=2)
        request_id = pending()
        answer(reviewer_client("alice"), request_id, {"approved": True}, revision=1)
        late = answer(reviewer_client("bob"), request_id, {"approved": False}, revision=1)
        assert (late.status_code, late.json()["code"]) == (409, "revision_changed")
        assert ApprovalRequest.objects.get(pk=request_id).resume_data_json == '{"approved":true}'

    def test_the_agents_owner_may_propose_but_their_answer_does_not_count(self, pending, reviewer_client):
        request_id = pending()
        owned = answer(reviewer_client("owen"), request_id, {"approved": True})
        assert owned.json()["outcome"] == "answer_proposed"
        assert owned.json()["state"] == "pending_approval"
        refused = decide(reviewer_client("owen"), request_id, {"decision": "approve"})
        assert refused.json()["code"] == "separation_of_duties"

    def test_someone_who_may_not_decide_learns_nothing(self, pending, reviewer_client):
        response = answer(reviewer_client("mallory"), pending(), {"approved": True})
        assert response.status_code == 404

    @pytest.fixture
    def critical(self, admin_user):
        rule(admin_user, name="critical_answers", priority=2, action_type="approval-flow.*", risk_level="critical")

    def test_a_critical_answer_needs_a_step_up_through_the_api(self, critical, pending, reviewer_client):
        request_id = pending()
        bare = answer(reviewer_client("alice"), request_id, {"approved": True})
        assert (bare.status_code, bare.json()["code"]) == (403, "step_up_required")
        assert ApprovalRequest.objects.get(pk=request_id).resume_data_json == ""
        proved = answer(
            reviewer_client("alice"),
            request_id,
            {"approved": True},
            step_up={"method": "password", "password": "alice-pw-123!"},
        )
        assert proved.json()["state"] == "approved"

    def test_a_critical_answer_needs_a_step_up_through_the_page(self, critical, pending, client, people):
        request_id = pending()
        client.force_login(people["alice"])
        url = reverse("approvals:respond", args=[request_id])
        bare = client.post(url, {"resume_data": '{"approved": true}', "revision": "1"}, **JSON)
        assert (bare.status_code, bare.json()["code"]) == (403, "step_up_required")
        proved = client.post(
            url, {"resume_data": '{"approved": true}', "revision": "1", "password": "alice-pw-123!"}, **JSON
        )
        assert proved.json()["state"] == "approved"

    def test_the_page_refuses_what_the_api_refuses(self, pending, client, people):
        request_id = pending()
        client.force_login(people["alice"])
        url = reverse("approvals:respond", args=[request_id])
        for raw, path in (('{"approved": "yes"}', "/approved"), ("not json", ""), ("[true]", "")):
            response = client.post(url, {"resume_data": raw, "revision": "1"}, **JSON)
            assert (response.status_code, response.json()["code"]) == (422, "invalid_resume_data"), raw
            assert response.json()["details"]["path"] == path


class TestAudit:
    def test_the_answer_is_recorded_as_a_keyed_digest_with_who_gave_it(self, pending, reviewer_client):
        request_id = pending()
        secret_answer = {"approved": True}
        answer(reviewer_client("alice"), request_id, secret_answer)
        event = AuditEvent.objects.get(verb="suspension.answered")
        assert event.actor_label == "alice"
        assert event.metadata["answer"] == digest(secret_answer)
        assert event.metadata["proposal"] == "new" and event.metadata["counts"] is True
        assert "approved" not in json.dumps(event.metadata)
        verbs = list(AuditEvent.objects.filter(request_id=request_id).order_by("seq").values_list("verb", flat=True))
        assert verbs == [
            "request.submitted",
            "request.queued",
            "suspension.answered",
            "decision.recorded",
            "request.approved",
        ]


def test_reading_a_page_of_suspensions_costs_no_query_per_request(api, pending, django_assert_max_num_queries):
    for index in range(5):
        pending(run_id=f"run-{index}")
    with django_assert_max_num_queries(6):
        body = api.get("/api/v1/requests/?kind=suspension").json()
    assert len(body["results"]) == 5
    assert all(item["suspension"]["resume_schema"] == APPROVAL_STEP["resume_schema"] for item in body["results"])
