"""Real processes for the scale-out, load and fault tests: daphne servers and
Celery workers on the test database, and helpers to meet them the way a browser
and an agent do (session cookie + Origin, CSRF double submit, bearer tokens).

Every test here needs committed data (`django_db(transaction=True)`) and the real
services: PostgreSQL for concurrent writers, Redis for the channel layer and broker.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret
from django.test import Client


@pytest.fixture
def services_up(require_postgres, require_redis):
    """PostgreSQL and Redis are both reachable (skip with a reason, or fail in CI)."""


def session_cookies(user) -> dict[str, str]:
    """Cookies of a signed-in browser for `user`: a database session every server
    process shares, and a CSRF cookie whose masked form goes in `X-CSRFToken`."""
    client = Client()
    client.force_login(user)
    return {
        settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value,
        settings.CSRF_COOKIE_NAME: _get_new_csrf_string(),
    }


def cookie_header(cookies: dict[str, str]) -> str:
    return "; ".join(f"{name}={value}" for name, value in cookies.items())


def csrf_headers(cookies: dict[str, str]) -> dict[str, str]:
    """Headers for a session POST that passes Django's CSRF check (double submit)."""
    return {"Cookie": cookie_header(cookies), "X-CSRFToken": _mask_cipher_secret(cookies[settings.CSRF_COOKIE_NAME])}
