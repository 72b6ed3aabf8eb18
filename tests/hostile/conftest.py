"""The suite's cast (tests/fixtures/cast.py) and mail-bot's token, plus a risk admin
(alice, who here also runs the rule editor) for the hostile-input tests."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from approvals.permissions import RISK_ADMINS

# The stateful run's ledger asserts on the test's behalf; its failures read like the test's own.
pytest.register_assert_rewrite("tests.hostile.stateful")


@pytest.fixture(autouse=True)
def hostile_settings(settings):
    settings.AGENT_TOKEN_RATE_LIMIT = (100_000, 60)
    settings.OUTBOUND_URL_ALLOWLIST = ["hooks.example.com"]


@pytest.fixture
def reviewing_risk_admin(people):
    """alice reviews and edits rules: one session reaches every session form."""
    people["alice"].groups.add(Group.objects.get(name=RISK_ADMINS))
    return people["alice"]
