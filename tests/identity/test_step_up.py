"""Step-up with an authenticator app: once alice has one, deciding a critical request
takes its current code (each code once), on the page and in the API alike; her password
alone no longer does. Without an app, the password step-up is unchanged
(tests/dashboard/test_decisions.py)."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest, Decision
from approvals.states import State

from .conftest import password_of, sign_in, totp_code

JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture
def alice_with_app(client, people, clock, nobody_required, enroll_totp):
    """alice, signed in on `client` with an authenticator app; the app's secret."""
    sign_in(client, "alice")
    return enroll_totp(client)


def approve(client, request, **form):
    return client.post(reverse("approvals:approve", args=[request.pk]), {"revision": "1", **form}, **JSON)


def test_the_card_asks_for_the_apps_code(client, alice_with_app, submit, critical_rule):
    submit("run_payroll", params={"amount": 1})
    html = client.get(reverse("approvals:queue")).content.decode()
    assert 'name="code"' in html and "Critical: confirm with a code from your authenticator app" in html
    assert 'name="password"' not in html


def test_the_password_alone_no_longer_decides_but_the_current_code_does_once(
    client, alice_with_app, submit, critical_rule, clock
):
    first = submit("run_payroll", params={"amount": 1})
    second = submit("run_payroll", params={"amount": 2})
    clock.tick(60)

    refused = approve(client, first, password=password_of("alice"))
    assert refused.status_code == 403 and refused.json()["code"] == "step_up_required"
    assert refused.json()["details"]["method"] == "totp"

    code = totp_code(alice_with_app, time.time())
    assert approve(client, first, code=code).json()["state"] == "approved"
    assert Decision.objects.get(request=first).step_up_method == "totp"

    replayed = approve(client, second, code=code)  # seen over her shoulder, used again
    assert replayed.status_code == 403 and replayed.json()["code"] == "step_up_failed"
    assert ApprovalRequest.objects.get(pk=second.pk).state == State.PENDING_APPROVAL


def test_the_api_takes_the_same_code_and_refuses_a_password(alice_with_app, people, submit, critical_rule, clock):
    request = submit("run_payroll", params={"amount": 1})
    api = APIClient()
    api.force_login(people["alice"])
    url = f"/api/v1/requests/{request.pk}/decisions/"
    clock.tick(60)

    by_password = api.post(
        url,
        {"decision": "approve", "revision": 1, "step_up": {"method": "password", "password": password_of("alice")}},
        format="json",
    )
    assert by_password.status_code == 403 and by_password.json()["code"] == "step_up_required"
    no_code = api.post(url, {"decision": "approve", "revision": 1, "step_up": {"method": "totp"}}, format="json")
    assert no_code.status_code == 422

    code = totp_code(alice_with_app, time.time())
    answer = api.post(
        url, {"decision": "approve", "revision": 1, "step_up": {"method": "totp", "code": code}}, format="json"
    )
    assert answer.status_code == 200 and answer.json()["state"] == "approved"


def test_a_reviewer_without_an_app_still_confirms_with_the_password(client, people, submit, critical_rule):
    request = submit("run_payroll", params={"amount": 1})
    client.force_login(people["bob"])
    assert approve(client, request, code="123456").json()["details"]["method"] == "password"
    assert approve(client, request, password=password_of("bob")).json()["state"] == "approved"


def test_a_passkey_challenge_is_only_for_someone_with_a_passkey(people, submit, critical_rule):
    request = submit("run_payroll", params={"amount": 1})
    api = APIClient()
    api.force_login(people["bob"])
    asked = api.post(
        "/api/v1/step-up/challenges/",
        {"decision": "approve", "requests": [{"id": str(request.pk), "revision": 1}]},
        format="json",
    )
    assert asked.status_code == 409 and asked.json()["code"] == "no_passkey"
    unsigned = api.post(
        f"/api/v1/requests/{request.pk}/decisions/",
        {"decision": "approve", "revision": 1, "step_up": {"method": "passkey", "assertion": {}}},
        format="json",
    )
    assert unsigned.status_code == 422 and "nonce" in str(unsigned.json()["details"])
