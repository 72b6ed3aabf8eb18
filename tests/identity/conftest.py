"""Identity tests: signing in through allauth, its audit events, second factors.

They use the suite's cast (tests/fixtures/cast.py; every password `<name>-pw-123!`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
import time

import pytest
from django.test import Client
from django.urls import reverse
from freezegun import freeze_time

from tests.fixtures.cache import fresh_counters  # noqa: F401 (autouse in this folder)
from tests.identity.provider import LocalProvider

LOGIN = reverse("login")
ACTIVATE = "/accounts/2fa/totp/activate/"


def password_of(username: str) -> str:
    return f"{username}-pw-123!"


def sign_in(client: Client, username: str, password: str | None = None, **extra: str):
    return client.post(LOGIN, {"login": username, "password": password or password_of(username), **extra})


def totp_code(secret: str, at: float, *, step: int = 30, digits: int = 6) -> str:
    """RFC 6238 computed here, not by allauth, so the test checks allauth against the standard."""
    key = base64.b32decode(secret.upper() + "=" * (-len(secret) % 8))
    counter = struct.pack(">Q", int(at // step))
    mac = hmac.new(key, counter, hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    value = struct.unpack(">I", mac[offset : offset + 4])[0] & 0x7FFFFFFF
    return str(value % 10**digits).zfill(digits)


@pytest.fixture
def clock():
    with freeze_time("2026-12-01 09:00:00") as frozen:
        yield frozen


@pytest.fixture
def nobody_required(settings):
    settings.MFA_REQUIRED_GROUPS = []


@pytest.fixture
def enroll_totp(django_capture_on_commit_callbacks):
    """`enroll_totp(client)`: enroll an authenticator app on the signed-in client; its secret.

    allauth announces the enrollment once its transaction commits; the test's own
    transaction never does, so the announcement runs when the request's block ends."""

    def _enroll(client: Client) -> str:
        page = client.get(ACTIVATE)
        assert page.status_code == 200
        secret = page.context["form"].secret
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(ACTIVATE, {"code": totp_code(secret, time.time())})
        assert response.status_code == 302, response
        return secret

    return _enroll


@pytest.fixture(scope="module")
def local_provider():
    """The in-process OpenID provider (tests/identity/provider.py), one per test module."""
    provider = LocalProvider()
    yield provider
    provider.stop()
