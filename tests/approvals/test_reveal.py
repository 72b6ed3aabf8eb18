"""Revealing a masked param: only to someone who may decide the request, one
top-level masked param at a time, each reveal an audit event naming the field (never
its value); through the service, the page's endpoint and the reviewer API alike."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from agents.services import issue_token
from approvals import errors, services
from approvals.errors import DomainError
from audit.models import AuditEvent
from tests.api.conftest import csrf_post
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db

SECRET = "The Q3 numbers: revenue 4.2M, churn 3%."


@pytest.fixture
def email(submit):
    """A send_email whose body the seeded rule masks."""
    request = submit("send_email", params={"to": ["dana@example.com"], "subject": "Q3", "body": SECRET})
    assert "body" in request.classification["masked_params"]
    return request


def reveals(request) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(request_id=request.pk, verb="request.field_revealed"))


# --- The service ---------------------------------------------------------------------------


def test_a_reviewer_who_may_decide_reads_the_masked_value_and_the_chain_says_so(email, people):
    revealed = services.reveal_field(email.pk, "body", actor=services.Person(people["alice"]))
    assert (revealed.field, revealed.value, revealed.revision) == ("body", SECRET, 1)
    [event] = reveals(email)
    assert event.actor_label == "alice"
    assert event.metadata == {"field": "body", "revision": 1}
    assert SECRET not in json.dumps(event.metadata)


def test_each_reveal_is_its_own_event(email, people):
    for _ in range(2):
        services.reveal_field(email.pk, "body", actor=services.Person(people["alice"]))
    assert len(reveals(email)) == 2


@pytest.mark.parametrize("who", ["mallory", "audrey"])
def test_someone_who_may_not_decide_is_refused_and_nothing_is_recorded(email, people, auditor, who):
    user = auditor if who == "audrey" else people[who]
    with pytest.raises(DomainError) as refused:
        services.reveal_field(email.pk, "body", actor=services.Person(user))
    assert refused.value.code == errors.NOT_PERMITTED
    assert reveals(email) == []


@pytest.mark.parametrize(
    "path",
    [
        "subject",
        "to",
        "nope",
        "../body",
        "body/../subject",
        "body.x",
        " body",
        "BODY",
        "",
        None,
        7,
        ["body"],
        {"field": "body"},
    ],
)
def test_only_a_masked_param_of_the_request_can_be_revealed(email, people, path):
    with pytest.raises(DomainError) as refused:
        services.reveal_field(email.pk, path, actor=services.Person(people["alice"]))
    assert refused.value.code == errors.FIELD_NOT_MASKED
    assert reveals(email) == []


def test_a_masked_param_the_agent_did_not_set_has_nothing_to_reveal(submit, people):
    request = submit("send_email", params={"to": ["dana@example.com"], "subject": "Q3"})
    with pytest.raises(DomainError) as refused:
        services.reveal_field(request.pk, "body", actor=services.Person(people["alice"]))
    assert refused.value.code == errors.FIELD_NOT_MASKED


def test_the_revealed_value_is_the_current_revisions(submit, people, admin_user):
    """Once a reviewer edits the body, a reveal shows the edited one (what would run)."""
    from approvals import policy

    policy.save_rule(
        {
            "name": "email_two_person",
            "priority": 5,
            "action_type": "send_email",
            "risk_level": "high",
            "required_approvals": 2,
            "editable_params": ["body"],
            "masked_params": ["body"],
            "conditions": [],
        },
        actor=services.Person(admin_user),
        note="two people read mail",
    )
    request = submit("send_email", params={"to": ["dana@example.com"], "subject": "Q3", "body": SECRET})
    services.approve_with_edits(
        request.pk,
        revision=current_revision(request.pk),
        actor=services.Person(people["alice"]),
        edits={"body": "Shorter."},
    )
    revealed = services.reveal_field(request.pk, "body", actor=services.Person(people["bob"]))
    assert (revealed.value, revealed.revision) == ("Shorter.", 2)


def test_nothing_is_revealed_once_the_request_is_decided(email, people):
    services.reject(email.pk, revision=current_revision(email.pk), actor=services.Person(people["bob"]), feedback="no")
    with pytest.raises(DomainError) as refused:
        services.reveal_field(email.pk, "body", actor=services.Person(people["alice"]))
    assert refused.value.code == errors.ILLEGAL_TRANSITION
    assert reveals(email) == []


def test_nothing_is_revealed_past_the_deadline(email, people):
    from datetime import timedelta

    from django.utils import timezone

    type(email).objects.filter(pk=email.pk).update(decide_by=timezone.now() - timedelta(seconds=1))
    with pytest.raises(DomainError) as refused:
        services.reveal_field(email.pk, "body", actor=services.Person(people["alice"]))
    assert refused.value.code == errors.ILLEGAL_TRANSITION


# --- The page's endpoint (session + CSRF) ------------------------------------------------------


def _page_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def _page_reveal(client: Client, request, field):
    from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret

    secret = _get_new_csrf_string()
    client.cookies["csrftoken"] = secret
    return client.post(
        f"/requests/{request.pk}/reveal/",
        json.dumps({"field": field}),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=_mask_cipher_secret(secret),
        HTTP_ACCEPT="application/json",
    )


def test_the_card_offers_reveal_and_never_ships_the_value(email, people):
    page = _page_client(people["alice"]).get("/").content.decode()
    assert f'data-reveal-url="/requests/{email.pk}/reveal/"' in page and 'data-field="body"' in page
    assert SECRET not in page


def test_the_page_endpoint_reveals_for_a_reviewer(email, people):
    response = _page_reveal(_page_client(people["alice"]), email, "body")
    assert response.status_code == 200
    assert response.json() == {"field": "body", "value": SECRET, "revision": 1, "edit_value": SECRET}
    assert [e.actor_label for e in reveals(email)] == ["alice"]


def test_the_page_endpoint_needs_the_csrf_token(email, people):
    client = _page_client(people["alice"])
    response = client.post(
        f"/requests/{email.pk}/reveal/", json.dumps({"field": "body"}), content_type="application/json"
    )
    assert response.status_code == 403 and SECRET not in response.content.decode()
    assert reveals(email) == []


@pytest.mark.parametrize(("who", "status", "code"), [("mallory", 404, "not_found"), ("audrey", 403, "not_permitted")])
def test_the_page_endpoint_refuses_in_the_error_shape(email, people, auditor, who, status, code):
    user = auditor if who == "audrey" else people[who]
    response = _page_reveal(_page_client(user), email, "body")
    assert response.status_code == status
    assert response.json()["code"] == code and response.json()["message"]
    assert SECRET not in response.content.decode()


@pytest.mark.parametrize("field", ["subject", "../../etc/passwd", None, {"$ne": 1}])
def test_the_page_endpoint_refuses_other_fields_with_422(email, people, field):
    response = _page_reveal(_page_client(people["alice"]), email, field)
    assert response.status_code == 422 and response.json()["code"] == "field_not_masked"


def test_the_page_endpoint_answers_a_malformed_body_without_a_500(email, people):
    from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret

    client = _page_client(people["alice"])
    secret = _get_new_csrf_string()
    client.cookies["csrftoken"] = secret
    response = client.post(
        f"/requests/{email.pk}/reveal/",
        "{not json",
        content_type="application/json",
        HTTP_X_CSRFTOKEN=_mask_cipher_secret(secret),
    )
    assert response.status_code in (400, 422) and "code" in response.json()


# --- The reviewer API -----------------------------------------------------------------------


def _api(user) -> APIClient:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def test_the_api_reveals_for_a_reviewer(email, people):
    response = csrf_post(_api(people["bob"]), f"/api/v1/requests/{email.pk}/reveal/", {"field": "body"})
    assert response.status_code == 200
    assert response.json() == {"field": "body", "value": SECRET, "revision": 1}
    assert [e.actor_label for e in reveals(email)] == ["bob"]


@pytest.mark.parametrize(
    ("who", "field", "status", "code"),
    [
        ("mallory", "body", 404, "not_found"),
        ("audrey", "body", 403, "not_permitted"),
        ("alice", "subject", 422, "field_not_masked"),
        ("alice", "../body", 422, "field_not_masked"),
    ],
)
def test_the_api_refuses_in_the_registered_shape(email, people, auditor, who, field, status, code):
    user = auditor if who == "audrey" else people[who]
    response = csrf_post(_api(user), f"/api/v1/requests/{email.pk}/reveal/", {"field": field})
    assert response.status_code == status
    assert response.json()["code"] == code
    assert SECRET not in response.content.decode()
    assert reveals(email) == []


def test_the_api_refuses_a_missing_field_as_a_validation_error(email, people):
    response = csrf_post(_api(people["alice"]), f"/api/v1/requests/{email.pk}/reveal/", {})
    assert response.status_code == 422 and response.json()["code"] == "validation_error"


def test_the_agent_token_cannot_reveal_even_its_own_request(email, agent):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_token(agent).secret}")
    response = client.post(f"/api/v1/requests/{email.pk}/reveal/", {"field": "body"}, format="json")
    assert response.status_code in (401, 403) and "code" in response.json()
    assert SECRET not in response.content.decode()
    assert reveals(email) == []


def test_a_missing_request_is_404(people):
    import uuid

    response = csrf_post(_api(people["alice"]), f"/api/v1/requests/{uuid.uuid4()}/reveal/", {"field": "body"})
    assert response.status_code == 404 and response.json()["code"] == "not_found"
