"""Every whole number a reviewer or an agent sends is bounded at the edge: a decision's revision
(the reviewer API and the dashboard's forms), page sizes, the agent's long-poll wait, the audit
pages' cursor, and the dashboard forms' feedback and edits, held to the API's sizes. An agent
asks for a page of 10**40 requests; a proxy rewrites a decision's revision to `true`: each is
refused with the field named, never a 500. The bounds are one table (`approvals.bounds`).
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

from approvals.people import Person

from .bounds_edges import ANY_NUMBER, ANY_TEXT, FORTY_DIGITS, HOSTILE, HYPOTHESIS, RULE, refused_at_the_input_edge


def session_api(user) -> APIClient:
    from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    secret = _get_new_csrf_string()
    client.cookies["csrftoken"] = secret
    client.credentials(HTTP_X_CSRFTOKEN=_mask_cipher_secret(secret))
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("value", HOSTILE + [pytest.param(0, id="zero"), pytest.param(2**31, id="past-int32")])
def test_a_decisions_revision_out_of_bounds_is_422_naming_it(people, submit, value):
    request = submit()
    alice = session_api(people["alice"])
    response = alice.post(
        f"/api/v1/requests/{request.pk}/decisions/",
        {"decision": "reject", "revision": value, "feedback": "no"},
        format="json",
    )
    if value is None:
        assert response.status_code == 422  # null is not a revision either
    else:
        assert response.status_code == 422, (value, response.status_code, response.content[:300])
        assert "revision" in response.json()["details"]["fields"]
    batch = alice.post(
        "/api/v1/decisions/",
        {"decision": "reject", "feedback": "no", "requests": [{"id": str(request.pk), "revision": value}]},
        format="json",
    )
    assert batch.status_code == 422
    request.refresh_from_db()
    assert request.state == "pending_approval", "nothing was decided"


@pytest.mark.django_db
@hypothesis_settings(parent=HYPOTHESIS)
@given(value=ANY_NUMBER)
def test_any_revision_through_the_api_is_decided_on_or_refused_never_a_500(people, submit, value):
    request = submit()
    response = session_api(people["alice"]).post(
        f"/api/v1/requests/{request.pk}/decisions/", {"decision": "reject", "revision": value}, format="json"
    )
    if refused_at_the_input_edge(response, value):  # a NUL or lone surrogate: 400 before any field is read
        return
    assert response.status_code in (200, 409, 422), (value, response.status_code)
    if response.status_code == 422:
        assert response.json()["code"] == "validation_error"


@pytest.mark.django_db
@pytest.mark.parametrize("raw", [str(FORTY_DIGITS), "-1", "0", "2.5", "true", "five", "²", "201"])
def test_a_page_size_out_of_bounds_is_422_naming_it(api_client_for_agent, raw):
    response = api_client_for_agent.get("/api/v1/requests/", {"page_size": raw})
    assert response.status_code == 422
    assert response.json()["code"] == "validation_error"
    assert "page_size" in response.json()["details"]["fields"]


@pytest.mark.django_db
def test_a_page_size_within_bounds_is_used(api_client_for_agent, submit):
    for _ in range(3):
        submit()
    assert len(api_client_for_agent.get("/api/v1/requests/", {"page_size": "2"}).json()["results"]) == 2
    assert api_client_for_agent.get("/api/v1/requests/", {"page_size": "200"}).status_code == 200


@pytest.fixture
def api_client_for_agent(token) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.mark.django_db
@hypothesis_settings(parent=HYPOTHESIS)
@given(raw=ANY_TEXT)
def test_any_page_size_is_used_or_refused_never_a_500(api_client_for_agent, raw):
    response = api_client_for_agent.get("/api/v1/requests/", {"page_size": raw})
    assert refused_at_the_input_edge(response, raw) or response.status_code in (200, 422), (raw, response.status_code)


@pytest.mark.django_db
@pytest.mark.parametrize("raw", ["-1", "true", "five", "nan", "-inf"])
def test_a_wait_that_is_not_a_number_of_seconds_is_422(api_client_for_agent, submit, raw):
    request = submit()
    response = api_client_for_agent.get(f"/api/v1/requests/{request.pk}/resume/", {"wait": raw})
    assert response.status_code == 422 and "wait" in response.json()["details"]["fields"]


@pytest.mark.django_db
@pytest.mark.parametrize("raw", [str(FORTY_DIGITS), "1e400", "inf", "2.5"])
def test_a_longer_wait_than_the_server_keeps_is_capped_as_documented(api_client_for_agent, submit, people, raw):
    """The long-poll may answer earlier than asked (API_MAX_WAIT_SECONDS, documented): a huge
    wait is capped, not a 500; a decided request answers at once however long the wait."""
    from approvals import services

    request = submit()
    services.reject(request.pk, actor=Person(people["alice"]), feedback="no", revision=1)
    response = api_client_for_agent.get(f"/api/v1/requests/{request.pk}/resume/", {"wait": raw})
    assert response.status_code == 200 and response.json()["state"] == "rejected"


@pytest.mark.django_db
@pytest.mark.parametrize("raw", [str(FORTY_DIGITS), "-1", "2.5", "true", "²", "١٢", "9" * 5000])
def test_a_dashboard_decision_with_a_hostile_revision_decides_nothing_and_is_no_500(client, people, submit, raw):
    request = submit()
    client.force_login(people["alice"])
    response = client.post(
        reverse("approvals:reject", args=[request.pk]),
        {"revision": raw, "feedback": "no"},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 422, response.content[:300]
    batch = client.post(
        reverse("approvals:decide-batch"),
        {"decision": "reject", "request": f"{request.pk}:{raw}"},
        HTTP_ACCEPT="application/json",
    )
    assert batch.status_code == 422
    request.refresh_from_db()
    assert request.state == "pending_approval"


@pytest.mark.django_db
@pytest.mark.parametrize("raw", [str(FORTY_DIGITS), "²", "-1", "9" * 5000])
def test_the_audit_pages_cursor_with_a_hostile_seq_is_no_500(client, people, raw):
    from django.contrib.auth.models import Group

    people["alice"].groups.add(Group.objects.get_or_create(name="auditors")[0])
    client.force_login(people["alice"])
    for key in ("before", "after"):
        assert client.get("/audit/", {key: raw}).status_code == 200


@pytest.mark.django_db
def test_dashboard_feedback_longer_than_the_api_allows_is_refused(client, people, submit):
    request = submit()
    client.force_login(people["alice"])
    too_long = "x" * 10_001
    for name in ("approvals:reject", "approvals:approve"):
        response = client.post(
            reverse(name, args=[request.pk]),
            {"revision": str(request.current_revision), "feedback": too_long},
            HTTP_ACCEPT="application/json",
        )
        assert response.status_code == 422 and response.json()["details"]["fields"] == ["feedback"]
    batch = client.post(
        reverse("approvals:decide-batch"),
        {"decision": "reject", "request": f"{request.pk}:{request.current_revision}", "feedback": too_long},
        HTTP_ACCEPT="application/json",
    )
    assert batch.status_code == 422 and batch.json()["details"]["fields"] == ["feedback"]
    api = session_api(people["alice"]).post(
        f"/api/v1/requests/{request.pk}/decisions/",
        {"decision": "reject", "revision": request.current_revision, "feedback": too_long},
        format="json",
    )
    assert api.status_code == 422, "the same limit as the API's"
    request.refresh_from_db()
    assert request.state == "pending_approval"
    assert (
        client.post(
            reverse("approvals:reject", args=[request.pk]),
            {"revision": str(request.current_revision), "feedback": "x" * 10_000},
            HTTP_ACCEPT="application/json",
        ).status_code
        == 200
    ), "exactly the limit is fine"


@pytest.mark.django_db
def test_dashboard_edits_larger_than_the_api_allows_are_refused(client, people, submit, admin_user, settings):
    from approvals import policy

    policy.save_rule(
        {**RULE, "name": "editable_mail", "priority": 1, "editable_params": ["body"], "risk_level": "medium"},
        actor=Person(admin_user),
        note="edit bodies",
    )
    request = submit()
    assert request.rule_name == "editable_mail"
    client.force_login(people["alice"])
    response = client.post(
        reverse("approvals:approve-with-edits", args=[request.pk]),
        {"edit:body": "y" * (settings.API_MAX_PARAMS_BYTES + 1), "revision": "1"},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 422 and response.json()["details"]["fields"] == ["edits"]
    request.refresh_from_db()
    assert request.current_revision == 1


@pytest.mark.django_db
def test_a_form_encoded_decision_still_takes_its_revision_as_digits(people, submit):
    """A JSON body's revision must be a JSON integer; a form's fields are text, so ASCII digits count."""
    request = submit()
    alice = session_api(people["alice"])
    url = f"/api/v1/requests/{request.pk}/decisions/"
    assert alice.post(url, {"decision": "reject", "revision": "²"}, format="multipart").status_code == 422
    assert alice.post(url, {"decision": "reject", "revision": "1.0"}, format="multipart").status_code == 422
    decided = alice.post(url, {"decision": "reject", "revision": str(request.current_revision)}, format="multipart")
    assert decided.status_code == 200, decided.content[:300]
