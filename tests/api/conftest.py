"""Agents with tokens and API clients for them, on top of the suite's cast
(tests/fixtures/cast.py).

mail-bot (owned by owen) and its rival ops-bot each hold a token; reviewers
alice, bob and carol sign in with sessions.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from agents.models import Agent
from agents.services import issue_token


@pytest.fixture(autouse=True)
def agent_api_settings(settings):
    settings.AGENT_TOKEN_RATE_LIMIT = (10_000, 60)
    settings.OUTBOUND_URL_ALLOWLIST = ["127.0.0.1", "hooks.example.com"]
    settings.OUTBOUND_ALLOW_PRIVATE = True  # tests call back to loopback servers
    settings.CALLBACK_PUSH_TASK = False  # tests call deliver_due_callbacks() themselves


@pytest.fixture
def rival(people) -> Agent:
    return Agent.objects.create(name="ops-bot", owner=people["carol"])


@pytest.fixture
def rival_token(rival) -> str:
    return issue_token(rival).secret


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def api(token) -> APIClient:
    """mail-bot's client."""
    return bearer(token)


@pytest.fixture
def rival_api(rival_token) -> APIClient:
    return bearer(rival_token)


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


@pytest.fixture
def reviewer_client(people):
    """A session client for one named reviewer, with CSRF enforced like a browser's."""

    def _client(name: str) -> APIClient:
        client = APIClient(enforce_csrf_checks=True)
        client.force_login(people[name])
        return client

    return _client


def csrf_post(client: APIClient, url: str, data: dict):
    """POST as a browser would: fetch the CSRF cookie first, echo it in X-CSRFToken."""
    from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret

    secret = _get_new_csrf_string()
    client.cookies["csrftoken"] = secret
    return client.post(url, data, format="json", HTTP_X_CSRFTOKEN=_mask_cipher_secret(secret))


EMAIL = {
    "action_type": "send_email",
    "target": {"mailbox": "outbox"},
    "params": {"to": ["dana@example.com"], "subject": "Hi", "body": "Hello"},
}
PLAN_MD = "# Refactor the auth module\n\n1. Extract the token check.\n2. Add tests.\n"


@pytest.fixture
def rival_agent(rival) -> Agent:
    return rival
