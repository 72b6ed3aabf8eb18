"""Tuning tests use the suite's cast (tests/fixtures/cast.py); ada is the risk admin here, and ben
the second risk-admin four eyes on policy needs. carol approves for treasury.

`make_requests` stores requests in bulk (rows as classification left them) for the
volume checks: thousands of `services.submit` calls would cost minutes and test
nothing the approval tests do not already.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from approvals import policy
from approvals.models import ApprovalRequest, ParamsRevision
from approvals.people import Person
from approvals.permissions import RISK_ADMINS
from approvals.states import Kind, State


class _Rollback(Exception):
    pass


@contextmanager
def rolled_back() -> Iterator[None]:
    """Undo everything the block wrote: each hypothesis example starts from the same rows."""
    try:
        with transaction.atomic():
            yield
            raise _Rollback
    except _Rollback:
        pass


@pytest.fixture
def ben(db):
    """ben, a second risk-admin: the other pair of eyes on ada's policy changes."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("ben", password="ben-pw-123!", is_staff=True)
    user.groups.add(Group.objects.get(name=RISK_ADMINS))
    return user


@pytest.fixture
def four_eyes(settings):
    """Four eyes on policy, as in production (tests/conftest.py turns it off for setup)."""
    settings.POLICY_FOUR_EYES = True


WIRE_TRANSFER = {
    "name": "wire_transfer",
    "priority": 5,
    "action_type": "wire_transfer",
    "risk_level": "high",
    "required_approvals": 1,
    "approver_group": "treasury",
    "decision_ttl_seconds": 3600,
    "execution_window_seconds": 900,
    "editable_params": ["memo", "amount"],
    "masked_params": [],
    "conditions": [{"path": "params.amount", "op": "gt", "value": 1000}],
}


@pytest.fixture
def treasury_desk(people, treasury) -> Group:
    """The treasury desk: carol approves wires."""
    people["carol"].groups.add(treasury)
    return treasury


@pytest.fixture
def wire_rule(risk_admin, treasury_desk):
    """Wires over 1,000 are high and go to treasury (set up as if four eyes were off)."""
    from django.test import override_settings

    from approvals import policy

    with override_settings(POLICY_FOUR_EYES=False):
        return policy.save_rule(WIRE_TRANSFER, actor=Person(risk_admin), note="Wires go to treasury")


@pytest.fixture
def email_is_not_destructive(risk_admin):
    """This team's policy does not count "send" as destructive, so a low email rule can apply
    (by default the verb keeps every low rule off send_email)."""
    from approvals.policy.rules.seed import SEED_DESTRUCTIVE_VERBS

    policy.set_destructive_verbs(
        [verb for verb in SEED_DESTRUCTIVE_VERBS if verb != "send"],
        actor=Person(risk_admin),
        note="our outbound mail is reviewed by its own rules",
    )


@pytest.fixture
def make_requests(agent) -> Callable[..., list[ApprovalRequest]]:
    """Bulk-store requests: `make_requests([(action_type, params), ...], **fields)`.

    Each gets revision 1 with its params, and (to prove the dry-run reads the CURRENT
    revision) a stale revision 0 holding other params. `fields` set any column;
    `created_at` may be a datetime or a callable of the index.
    """

    def _make(calls: Sequence[tuple[str, dict[str, Any]]], *, start: datetime | None = None, **fields):
        start = start or timezone.now() - timedelta(days=1)
        requests = []
        for index, (action_type, _params) in enumerate(calls):
            values = {key: (value(index) if callable(value) else value) for key, value in fields.items()}
            requests.append(
                ApprovalRequest(
                    id=uuid.uuid4(),
                    kind=Kind.ACTION,
                    agent=agent,
                    action_type=action_type,
                    target={"mailbox": "outbox"},
                    target_hash="0" * 64,
                    state=values.pop("state", State.PENDING_APPROVAL),
                    created_at=values.pop("created_at", start + timedelta(seconds=index)),
                    current_revision=1,
                    **values,
                )
            )
        ApprovalRequest.objects.bulk_create(requests)
        revisions = []
        for request, (_, params) in zip(requests, calls):
            revisions.append(ParamsRevision(request=request, number=0, params={"stale": True, "to": ["x@y.z"] * 50}))
            revisions.append(ParamsRevision(request=request, number=1, params=params))
        ParamsRevision.objects.bulk_create(revisions)
        return requests

    return _make


@pytest.fixture
def admin_client(client, risk_admin):
    """The test client, signed in as ada (a risk-admin)."""
    client.force_login(risk_admin)
    return client
