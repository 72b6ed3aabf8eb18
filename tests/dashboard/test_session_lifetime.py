"""A signed-in session ends after 30 idle minutes and 12 hours after sign-in, however
busy: the next page asks to sign in again and the JSON API refuses the cookie."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time

SIGN_IN = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
def alice_client(client, people):
    with freeze_time(SIGN_IN):
        client.force_login(people["alice"])
    return client


def signed_in(client) -> bool:
    response = client.get("/")
    return response.status_code == 200


def test_a_session_idle_past_the_timeout_is_signed_out(alice_client, settings):
    assert settings.SESSION_IDLE_TIMEOUT_SECONDS == 30 * 60
    with freeze_time(SIGN_IN + timedelta(minutes=29)):
        assert signed_in(alice_client)
    with freeze_time(SIGN_IN + timedelta(minutes=29 + 31)):
        response = alice_client.get("/")
        assert response.status_code == 302 and "/login/" in response["Location"]
    with freeze_time(SIGN_IN + timedelta(minutes=61)):
        assert not signed_in(alice_client)  # flushed, not merely refused once


def test_a_busy_session_still_ends_at_its_absolute_lifetime(alice_client, submit):
    pending = submit("send_email")
    minute = 0
    while minute < 12 * 60:
        with freeze_time(SIGN_IN + timedelta(minutes=minute)):
            assert signed_in(alice_client), f"signed out after {minute} active minutes"
        minute += 20
    with freeze_time(SIGN_IN + timedelta(hours=12, minutes=1)):
        refused = alice_client.post(
            f"/api/v1/requests/{pending.pk}/decisions/", {"decision": "approve"}, content_type="application/json"
        )
        assert refused.status_code in (401, 403)
        assert refused.json()["code"] in ("not_authenticated", "authentication_failed", "csrf_failed")
        assert not signed_in(alice_client)


def test_an_active_reviewer_costs_at_most_one_session_write_a_minute(alice_client):
    with freeze_time(SIGN_IN + timedelta(minutes=5)):
        assert signed_in(alice_client)  # stamps last-seen
    with freeze_time(SIGN_IN + timedelta(minutes=5, seconds=30)):
        from django.contrib.sessions.models import Session

        before = Session.objects.get().expire_date
        assert signed_in(alice_client)
        assert Session.objects.get().expire_date == before  # no save within the minute


def test_session_cookies_are_secure_and_http_only_outside_debug(settings):
    assert not settings.DEBUG
    assert settings.SESSION_COOKIE_SECURE and settings.CSRF_COOKIE_SECURE and settings.SESSION_COOKIE_HTTPONLY
    assert settings.SECURE_HSTS_SECONDS >= 180 * 24 * 60 * 60
