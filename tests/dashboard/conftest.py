"""The dashboard tests reuse the approval tests' cast (alice, bob, carol review;
owen owns mail-bot; rita is who it acts for; mallory is nobody)."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from tests.approvals.conftest import (  # noqa: F401  (fixtures)
    admin_user,
    agent,
    people,
    reviewers_group,
    submit,
    two_person_rule,
)

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
