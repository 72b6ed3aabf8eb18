"""The approval stories' cast, plus a risk admin (ada is staff; here she also runs
the rule editor) and agents with tokens for the hostile-input tests."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from agents.services import issue_token
from approvals.permissions import RISK_ADMINS
from tests.approvals.conftest import (  # noqa: F401  (fixtures)
    admin_user,
    agent,
    people,
    reviewers_group,
    submit,
)


@pytest.fixture(autouse=True)
def _api_settings(settings):
    settings.AGENT_TOKEN_RATE_LIMIT = (100_000, 60)
    settings.OUTBOUND_URL_ALLOWLIST = ["hooks.example.com"]


@pytest.fixture
def risk_admin(people):
    """alice reviews and edits rules: one session reaches every session form."""
    people["alice"].groups.add(Group.objects.get(name=RISK_ADMINS))
    return people["alice"]


@pytest.fixture
def token(agent) -> str:
    return issue_token(agent).secret
