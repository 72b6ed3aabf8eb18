"""Fixtures for the execution engine: named people, an agent, and real processes.

Tests that use a worker see committed data only, so they take
`django_db(transaction=True)`.
"""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from agents.models import Agent
from approvals import services
from approvals.permissions import REVIEWERS
from approvals.states import Kind
from tests.fixtures.revisions import current_revision

from .harness import Receiver


@pytest.fixture
def broker(request):
    """The broker the workers share: Redis in CI (required there), else the filesystem one."""
    if django_settings.REDIS_URL:
        request.getfixturevalue("require_redis")
        return "redis"
    return "filesystem"


@pytest.fixture
def reviewer_alice(db):
    user = get_user_model().objects.create_user("alice", password="alice-pw-123!")
    user.groups.add(Group.objects.get(name=REVIEWERS))
    return user


@pytest.fixture
def ops_bot(db):
    owner = get_user_model().objects.create_user("owen", password="owen-pw-123!")
    return Agent.objects.create(name="ops-bot", owner=owner)


@pytest.fixture
def outbound_loopback(settings):
    settings.OUTBOUND_URL_ALLOWLIST = ["127.0.0.1"]
    settings.OUTBOUND_ALLOW_PRIVATE = True


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.stop()


@pytest.fixture
def ops_submit(ops_bot):
    """Submit an action as the agent."""

    def _submit(action_type: str, params: dict | None = None, target: dict | None = None, **overrides):
        submitting_agent = overrides.pop("agent", ops_bot)
        return services.submit(
            services.Submission(
                kind=Kind.ACTION, action_type=action_type, params=params or {}, target=target or {}, **overrides
            ),
            agent=submitting_agent,
        )

    return _submit


@pytest.fixture
def approved(ops_submit, reviewer_alice):
    """Submit and have alice approve: `approved("notify_webhook", params, target)`."""

    def _approved(action_type: str, params: dict | None = None, target: dict | None = None):
        request = ops_submit(action_type, params, target)
        return services.approve(
            request.pk, revision=current_revision(request.pk), actor=services.Person(reviewer_alice)
        )

    return _approved
