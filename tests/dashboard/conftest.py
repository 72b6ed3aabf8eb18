"""The dashboard tests use the suite's cast (tests/fixtures/cast.py: alice, bob,
carol review; owen owns mail-bot; rita is who it acts for; mallory is nobody)."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

PASSWORDS = {name: f"{name}-pw-123!" for name in ("alice", "bob", "carol", "owen", "rita", "mallory")}


@pytest.fixture(autouse=True)
def fresh_login_counters():
    """Throttle counters live in the cache (Redis in CI): never carry them between tests."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def browser_client():
    """A client that enforces CSRF like a browser would meet it."""
    return Client(enforce_csrf_checks=True)


@pytest.fixture
def login_as(client):
    def _login(user):
        client.force_login(user)
        return client

    return _login
