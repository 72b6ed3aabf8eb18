"""Answers to a resume schema have bounded cost (the hostile-schema list): size, array length,
a linear `uniqueItems`, and the request's row lock never held while an answer is validated.

Nothing here measures time: each test counts operations or asserts what was refused.
"""

from __future__ import annotations

import json
import threading

import pytest
from django.db import OperationalError, connection
from django.urls import reverse

from approvals import resume_schema
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.resume_schema import answers as schema_answers
from approvals.resume_schema import engine as schema_engine
from approvals.services import respond_to_suspension

from ..suspensions.conftest import (
    APPROVAL_STEP,
    agent_api_settings,
    api,
    decide,
    fresh_counters,
    pending,
    reviewer_client,
    suspend,
)

__all__ = ["agent_api_settings", "api", "fresh_counters", "pending", "reviewer_client", "suspend"]


UNIQUE = {"type": "object", "properties": {"rows": {"type": "array", "uniqueItems": True}}}


class TestAnswersHaveBoundedCost:
    def test_unique_items_over_6000_objects_is_one_canonical_form_per_item_and_no_pairwise_compare(
        self, monkeypatch, settings
    ):
        import jsonschema._utils

        settings.API_MAX_PARAMS_BYTES = 256 * 1024  # a deployment's larger limit: still linear

        compared = []
        monkeypatch.setattr(jsonschema._utils, "equal", lambda *a: compared.append(a) or False)
        monkeypatch.setattr(jsonschema._utils, "uniq", lambda *a: compared.append(a) or True)
        forms = []
        original = schema_engine._canonical
        monkeypatch.setattr(schema_engine, "_canonical", lambda value: (forms.append(1), original(value))[1])
        rows = [{"id": i, "name": f"n{i}"} for i in range(6000)]
        resume_schema.validate_resume_data(UNIQUE, {"rows": rows})
        assert compared == []
        assert len(forms) <= 3 * len(rows) + 1  # each object and its two values: linear
        with pytest.raises(DomainError) as refused:
            resume_schema.validate_resume_data(UNIQUE, {"rows": [*rows, {"name": "n5", "id": 5.0}]})
        assert refused.value.code == "invalid_resume_data" and refused.value.details["path"] == "/rows"

    def test_unique_items_agrees_with_json_schema_equality(self):
        for same in ([1, 1.0], [{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}], [[None], [None]]):
            with pytest.raises(DomainError):
                resume_schema.validate_resume_data(UNIQUE, {"rows": same})
        for different in ([1, True], [0, False], ["1", 1], [{"a": 1}, {"a": True}], [[1], [[1]]]):
            resume_schema.validate_resume_data(UNIQUE, {"rows": different})

    def test_an_array_over_the_limit_is_refused_before_the_schema_runs(self, monkeypatch):
        monkeypatch.setattr(schema_answers, "_errors", lambda *a: pytest.fail("the schema ran"))
        with pytest.raises(DomainError) as refused:
            resume_schema.validate_resume_data(UNIQUE, {"rows": [0] * (resume_schema.MAX_ANSWER_ITEMS + 1)})
        assert refused.value.code == "invalid_resume_data" and refused.value.details["path"] == "/rows"

    def test_the_dashboard_form_applies_the_apis_size_limit_with_the_apis_code(
        self, pending, client, people, reviewer_client, settings
    ):
        request_id = pending(resume_schema={"type": "object"})
        big = {"approved": True, "note": "x" * (settings.API_MAX_PARAMS_BYTES + 1)}
        from_api = decide(reviewer_client("alice"), request_id, {"decision": "respond", "resume_data": big})
        client.force_login(people["bob"])
        from_page = client.post(
            reverse("approvals:respond", args=[request_id]),
            {"resume_data": json.dumps(big), "revision": "1"},
            HTTP_ACCEPT="application/json",
            HTTP_X_REQUESTED_WITH="XMLHttpRequest",
        )
        assert (from_api.status_code, from_api.json()["code"]) == (422, "validation_error")
        assert (from_page.status_code, from_page.json()["code"]) == (422, "validation_error")
        assert "resume_data" in from_page.json()["details"]["fields"]
        assert ApprovalRequest.objects.get(pk=request_id).resume_data_json == ""

    def test_a_decided_suspension_refuses_any_answer_as_decided_before_reading_it(self, pending, reviewer_client):
        request_id = pending()
        answered = decide(
            reviewer_client("alice"), request_id, {"decision": "respond", "resume_data": {"approved": True}}
        )
        assert answered.json()["state"] == "approved"
        late = decide(reviewer_client("bob"), request_id, {"decision": "respond", "resume_data": {"approved": "no"}})
        assert late.status_code == 409


@pytest.mark.django_db(transaction=True)
def test_the_row_lock_is_never_held_during_answer_validation(require_postgres, people, api):
    """Another transaction holds the request's row lock (SELECT ... FOR UPDATE). An invalid
    answer is refused 422 without waiting for it; a valid one does need the lock (it
    hits the short lock_timeout), which shows the lock was really held."""
    response = api.post("/api/v1/suspensions/", APPROVAL_STEP, format="json")
    assert response.status_code == 201, response.json()
    request_id = response.json()["id"]
    holding, release, done = threading.Event(), threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        from django.db import transaction

        try:
            with transaction.atomic():
                ApprovalRequest.objects.select_for_update().get(pk=request_id)
                holding.set()
                release.wait(30)
        finally:
            connection.close()
            done.set()

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    try:
        assert holding.wait(10)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '1s'")
        with pytest.raises(DomainError) as refused:
            respond_to_suspension(
                request_id, actor=Person(people["alice"]), resume_data={"approved": "yes"}, revision=1
            )
        assert refused.value.code == "invalid_resume_data" and refused.value.details["path"] == "/approved"
        with pytest.raises(OperationalError):  # a valid answer waits for the lock, and times out here
            respond_to_suspension(request_id, actor=Person(people["alice"]), resume_data={"approved": True}, revision=1)
    finally:
        release.set()
        holder.join(30)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
    assert done.is_set()
