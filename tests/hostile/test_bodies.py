"""Oversized and malformed bodies on every POST endpoint that reads a body: the
answer is a JSON 4xx with a stable `code` and a `message`, never a 5xx and never
an HTML error page."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

NESTED = ("[" * 100_000 + "]" * 100_000).encode()  # deep enough to break a recursive parser
MALFORMED: dict[str, tuple[bytes, str]] = {
    "oversized": (b'{"x": "' + b"a" * (settings.API_MAX_BODY_BYTES + 10) + b'"}', "application/json"),
    "truncated json": (b'{"action_type": "send_', "application/json"),
    "invalid utf-8": (b'{"action_type": "\xff\xfe"}', "application/json"),
    "json array": (b"[1, 2, 3]", "application/json"),
    "json scalar": (b"42", "application/json"),
    "json null": (b"null", "application/json"),
    "deeply nested": (NESTED, "application/json"),
    "nan": (b'{"params": {"x": NaN}, "action_type": "a"}', "application/json"),
    "plain text": (b"hello", "text/plain"),
    "xml": (b"<?xml version='1.0'?><a/>", "application/xml"),
}


def _assert_json_4xx(response, where: str) -> dict:
    assert 400 <= response.status_code < 500, (where, response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), (where, response["Content-Type"])
    body = json.loads(response.content)
    assert body.get("code") and body.get("message"), (where, body)
    return body


def _session_client(user) -> tuple[APIClient, dict]:
    """A browser-like session with a valid CSRF pair, so only the body is wrong."""
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    secret = _get_new_csrf_string()
    client.cookies[settings.CSRF_COOKIE_NAME] = secret
    return client, {"HTTP_X_CSRFTOKEN": _mask_cipher_secret(secret)}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_agent_endpoints_refuse_bad_bodies_with_json_4xx(case, token, submit):
    pending = submit("send_email")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    body, content_type = MALFORMED[case]
    for url in (
        "/api/v1/actions/",
        "/api/v1/plans/",
        f"/api/v1/requests/{pending.pk}/cancel/",
        f"/api/v1/requests/{pending.pk}/claim/",
        f"/api/v1/requests/{pending.pk}/complete/",
    ):
        _assert_json_4xx(client.generic("POST", url, body, content_type=content_type), f"{case} {url}")


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_session_json_endpoints_refuse_bad_bodies_with_json_4xx(case, reviewing_risk_admin, submit):
    pending = submit("send_email")
    client, csrf = _session_client(reviewing_risk_admin)
    body, content_type = MALFORMED[case]
    for url in (
        f"/api/v1/requests/{pending.pk}/decisions/",
        "/rules/validate.json",
        "/rules/dry-run.json",
        "/rules/test.json",
    ):
        _assert_json_4xx(client.generic("POST", url, body, content_type=content_type, **csrf), f"{case} {url}")


def test_a_declared_length_beyond_the_limit_is_refused_before_reading(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.generic(
        "POST", "/api/v1/actions/", b"{}", content_type="application/json", CONTENT_LENGTH=str(50 * 1024 * 1024)
    )
    _assert_json_4xx(response, "huge Content-Length")
