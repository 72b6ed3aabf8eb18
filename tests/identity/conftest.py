"""Identity tests: signing in through allauth, its audit events, second factors.

They use the suite's cast (tests/fixtures/cast.py; every password `<name>-pw-123!`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

LOGIN = reverse("login")


@pytest.fixture(autouse=True)
def fresh_counters():
    """Throttle counters and used-code marks live in the cache: never carry them over."""
    cache.clear()
    yield
    cache.clear()


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
    value = struct.unpack(">I", mac[offset:offset + 4])[0] & 0x7FFFFFFF
    return str(value % 10**digits).zfill(digits)
