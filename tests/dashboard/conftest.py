"""The dashboard tests use the suite's cast (tests/fixtures/cast.py: alice, bob,
carol review; owen owns mail-bot; rita is who it acts for; mallory is nobody)."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.fixtures.cache import fresh_counters  # noqa: F401 (autouse in this folder)

from .queue_story import finance, six_requests  # noqa: F401 (fixtures: the queue stories')

PASSWORDS = {name: f"{name}-pw-123!" for name in ("alice", "bob", "carol", "owen", "rita", "mallory")}


@pytest.fixture
def browser_client():
    """A client that enforces CSRF like a browser would meet it."""
    return Client(enforce_csrf_checks=True)
