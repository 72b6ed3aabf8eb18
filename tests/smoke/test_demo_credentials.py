"""`manage.py demo_credentials`: the demo people get new passwords, printed, that sign in;
refused on a Redis deployment and before the demo is seeded."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.core.management.base import CommandError

pytestmark = pytest.mark.django_db


def test_it_resets_and_prints_each_demo_persons_password(settings):
    settings.REDIS_URL = ""
    call_command("seed_demo", stdout=io.StringIO())
    out = io.StringIO()
    call_command("demo_credentials", stdout=out)
    printed = dict(re.findall(r"^\s+(\S+)\s+password: (\S+)", out.getvalue(), re.M))
    assert set(printed) == {"reviewer", "reviewer2", "risk-admin", "risk-admin2", "auditor"}
    assert authenticate(username="reviewer", password=printed["reviewer"]) is not None
    again = io.StringIO()
    call_command("demo_credentials", stdout=again)  # a second run: the first passwords stop working
    assert authenticate(username="reviewer", password=printed["reviewer"]) is None


def test_it_is_refused_on_a_redis_deployment_and_before_seeding(settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/11"
    with pytest.raises(CommandError, match="embedded demo"):
        call_command("demo_credentials", stdout=io.StringIO())
    settings.REDIS_URL = ""
    with pytest.raises(CommandError, match="No demo people"):
        call_command("demo_credentials", stdout=io.StringIO())
