"""People and agents the approval tests tell stories about.

alice, bob and carol review; owen owns the agent and rita is who it acts for, and
both are reviewers too, so separation of duties has something to refuse.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.contrib.auth.models import Group

from agents.models import Agent
from approvals import policy, services
from approvals.permissions import REVIEWERS, RISK_ADMINS
from approvals.states import Kind
from approvals.people import Person

TWO_PERSON_TRANSFER = {
    "name": "transfer_two_person",
    "priority": 5,
    "action_type": "transfer_funds",
    "risk_level": "high",
    "required_approvals": 2,
    "editable_params": ["amount", "memo"],
    "conditions": [],
}


@pytest.fixture(autouse=True)
def fresh_counters():
    """Step-up failure counters live in the cache (Redis in CI): never carry them between tests."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def reviewers_group(db) -> Group:
    return Group.objects.get(name=REVIEWERS)


@pytest.fixture
def people(db, reviewers_group) -> dict:
    User = get_user_model()
    cast = {}
    for name in ("alice", "bob", "carol", "owen", "rita"):
        user = User.objects.create_user(name, password=f"{name}-pw-123!")
        user.groups.add(reviewers_group)
        cast[name] = user
    cast["mallory"] = User.objects.create_user("mallory", password="mallory-pw-123!")  # not a reviewer
    return cast


@pytest.fixture
def agent(people) -> Agent:
    return Agent.objects.create(name="mail-bot", owner=people["owen"])


@pytest.fixture
def admin_user(db):
    """ada, a risk-admin: the policy service refuses rule changes from anyone else."""
    ada = get_user_model().objects.create_user("ada", password="ada-pw-123!", is_staff=True)
    ada.groups.add(Group.objects.get(name=RISK_ADMINS))
    return ada


@pytest.fixture
def two_person_rule(admin_user):
    return policy.save_rule(TWO_PERSON_TRANSFER, actor=Person(admin_user), note="Two-person rule for transfers")


@pytest.fixture
def submit(agent, people):
    """Submit an action as the agent; keyword arguments override the Submission."""

    def _submit(action_type: str = "send_email", params: dict | None = None, **overrides):
        submitting_agent = overrides.pop("agent", agent)
        fields = {
            "kind": Kind.ACTION,
            "action_type": action_type,
            "params": params if params is not None else {"to": ["dana@example.com"], "subject": "Hi", "body": "Hello"},
            "target": {"mailbox": "outbox"},
            "requested_for": people["rita"],
            **overrides,
        }
        return services.submit(services.Submission(**fields), agent=submitting_agent)

    return _submit
