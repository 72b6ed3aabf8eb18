"""The cast and helpers of the who-may-decide stories (issue 22, item 1; tests/guards/test_authority_*.py).

ada and ben are risk-admins; carol approves wires for treasury; erin is on call; alice
reviews; audrey audits; mallory is nobody. Every password is `<name>-pw-123!`. Each attack
ends by trying `services.approve()` as the people who should not decide
(`assert_nobody_new_decides`).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from approvals import errors, policy, services
from approvals.notifications import dispatch
from approvals.people import Person
from approvals.permissions import AUDITORS, RISK_ADMINS
from audit.models import AuditEvent
from tests.fixtures.revisions import current_revision

WIRE = {"amount": 70_000, "to": "acct-9", "memo": "supplier"}
SMALL_WIRE = {"amount": 5_000, "to": "acct-9", "memo": "supplier"}
CRITICAL_WIRE = {
    "name": "wire_critical",
    "priority": 5,
    "action_type": "wire_transfer",
    "risk_level": "critical",
    "required_approvals": 1,
    "approver_group": "treasury",
    "decision_ttl_seconds": 3600,
    "execution_window_seconds": 900,
    "conditions": [{"path": "params.amount", "op": "gt", "value": 50_000}],
}
HIGH_WIRE = {
    "name": "wire_high",
    "priority": 10,
    "action_type": "wire_transfer",
    "risk_level": "high",
    "required_approvals": 1,
    "approver_group": "treasury",
    "decision_ttl_seconds": 3600,
    "execution_window_seconds": 900,
    "conditions": [],
}


def _person(name: str, *groups: str, **fields):
    user = get_user_model().objects.create_user(name, password=f"{name}-pw-123!", **fields)
    user.groups.add(*Group.objects.filter(name__in=groups))
    return user


@pytest.fixture
def wire_cast(people, admin_user):
    """Everyone, by name; the groups exist; the wire rules are in place (set up with four eyes off)."""
    treasury = Group.objects.create(name="treasury")
    Group.objects.create(name="oncall")
    people["carol"].groups.add(treasury)
    everyone = {
        **people,
        "ada": admin_user,
        "ben": _person("ben", RISK_ADMINS, is_staff=True),
        "erin": _person("erin", "oncall"),
        "audrey": _person("audrey", AUDITORS),
    }
    with override_settings(POLICY_FOUR_EYES=False):
        policy.save_rules([CRITICAL_WIRE, HIGH_WIRE], actor=Person(admin_user), note="Wires go to treasury")
    return everyone


@pytest.fixture
def wire_cast_four_eyes(settings, wire_cast):
    settings.POLICY_FOUR_EYES = True
    return wire_cast


def as_person(user) -> Person:
    """`user` deciding with the right password step-up (given whether or not the level needs one)."""
    return Person(user, step_up=services.StepUpProof.password(f"{user.get_username()}-pw-123!"))


class _Undo(Exception):
    pass


def approve_code(request_id, user) -> str:
    """Try approve() as `user`, undone whatever happens: "approved"/"voted", or the refusal's code."""
    outcome = "?"
    try:
        with transaction.atomic():
            try:
                decided = services.approve(request_id, actor=as_person(user), revision=current_revision(request_id))
                outcome = "approved" if decided.state != "pending_approval" else "voted"
            except errors.DomainError as refused:
                outcome = refused.code
            raise _Undo
    except _Undo:
        pass
    return outcome


def assert_nobody_new_decides(request_id, *users) -> None:
    """The last line of every attack: each of `users` is refused decide, with its code."""
    for user in users:
        assert approve_code(request_id, user) == errors.NOT_PERMITTED, user.get_username()


def escalate_everything(seconds: int = 120) -> int:
    return dispatch.escalate_overdue(now=timezone.now() + timedelta(seconds=seconds))


def events(verb: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(verb=verb).order_by("seq"))
