"""What the queue stories share (tests/dashboard/test_queue_*.py): the queue's and the sync's
addresses, the finance group and its requests, and reading the card ids off a page.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals import policy
from approvals.models import ApprovalRequest
from approvals.people import Person

QUEUE = reverse("approvals:queue")
SYNC = reverse("approvals:queue-sync")


def card_ids(response) -> list[str]:
    return [card.id for card in response.context["cards"]]


@pytest.fixture
def finance(admin_user, people) -> Group:
    """A second approver group with its own rule: carol alone sits in it."""
    group = Group.objects.create(name="finance")
    people["carol"].groups.add(group)
    policy.save_rule(
        {
            "name": "wire_finance",
            "priority": 4,
            "action_type": "wire_*",
            "risk_level": "high",
            "approver_group": "finance",
            "editable_params": ["amount"],
        },
        actor=Person(admin_user),
        note="finance approves wires",
    )
    return group


def _queries(client, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


@pytest.fixture
def six_requests(submit) -> list[ApprovalRequest]:
    return [submit("send_email") for _ in range(6)]


class _Rollback(Exception):
    pass


@contextmanager
def rolled_back():
    """Undo what the block wrote: each hypothesis example starts from the same rows."""
    try:
        with transaction.atomic():
            yield
            raise _Rollback
    except _Rollback:
        pass
