"""Named subjects for audit tests.

Requests and agents are stand-ins with the attributes audit.chain reads (`pk`,
`agent_id`, `name`), so these tests do not depend on other apps' models.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from audit.chain import Actor


@pytest.fixture
def alice(django_user_model):
    """A reviewer."""
    return django_user_model.objects.create_user(username="alice", password="unused-password-1")


@pytest.fixture
def mail_bot() -> SimpleNamespace:
    """An agent that sends mail."""
    return SimpleNamespace(pk=7, name="mail-bot")


@pytest.fixture
def refund_request(mail_bot) -> SimpleNamespace:
    """A request from mail-bot to refund an order."""
    return SimpleNamespace(pk=uuid.UUID("6f1c1f52-4c7e-4d59-9d3a-1f2e3d4c5b6a"), agent_id=mail_bot.pk)


@pytest.fixture
def system() -> Actor:
    return Actor.system()


@pytest.fixture(autouse=True)
def start_from_an_empty_log(request):
    """Give every database test an empty audit log, so seqs in tests start at 1.

    post_migrate (after migrate and after each test flush) seeds the policy, which
    records `policy.changed`; these tests are about the log itself, so they clear
    it through the maintenance path first (rolled back with the test, or flushed).
    """
    marker = request.node.get_closest_marker("django_db")
    if marker is None:
        return
    transactional = marker.kwargs.get("transaction", bool(marker.args and marker.args[0]))
    request.getfixturevalue("transactional_db" if transactional else "db")

    from django.db import connection

    from audit.db import maintenance
    from audit.models import AuditEvent

    with maintenance(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {AuditEvent._meta.db_table}")
