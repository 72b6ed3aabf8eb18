"""Shared fixtures: named people, a seeded policy, and real-service gates.

Tests that need PostgreSQL or Redis skip with a printed reason when the service is
missing; with REQUIRE_SERVICES=1 (as .ci/run sets) the same situation fails.
"""

from __future__ import annotations

import os

import pytest
from django.db import connection

REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES") == "1"


def missing_service(reason: str) -> None:
    """Skip (bare machine) or fail (CI) because a real service is not available."""
    if REQUIRE_SERVICES:
        pytest.fail(f"REQUIRE_SERVICES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def require_postgres():
    if connection.vendor != "postgresql":
        missing_service(f"needs PostgreSQL (set DATABASE_URL); this run uses {connection.vendor}")


@pytest.fixture
def require_redis():
    from django.conf import settings

    if not settings.REDIS_URL:
        missing_service("needs Redis (set REDIS_URL)")
    import redis

    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        missing_service(f"Redis at {settings.REDIS_URL} is not reachable: {exc}")


@pytest.fixture(autouse=True)
def policy_changes_apply_at_once(settings):
    """Rule changes made as test setup apply at once (POLICY_FOUR_EYES off).

    Four eyes on policy has its own tests (tests/tuning/test_four_eyes.py), which
    turn it back on explicitly.
    """
    settings.POLICY_FOUR_EYES = False


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Real hashing costs ~0.5 s a user; tests create dozens."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def daphne_server(django_db_setup, django_db_blocker):
    """One real daphne process on the test database for the whole session.

    Tests that use it need committed data: mark them `django_db(transaction=True)`.
    """
    from tests.live import DaphneServer

    with django_db_blocker.unblock():
        server = DaphneServer()
    yield server
    server.stop()
