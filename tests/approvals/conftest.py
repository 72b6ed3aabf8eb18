"""The approval tests' own setup; the cast (alice, bob, carol, owen, rita, mallory,
ada, mail-bot) comes from the suite's fixture plugin (tests/fixtures/cast.py).

The wire story shared by the attack and batch-decision tests: a `wire` transfer is
medium (the reviewers decide, editable amount and account) unless the amount is
over a million, when it is critical and only the treasury group decides, two of
them. tess and trent are treasury; vera is in both.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache

from approvals import policy
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.permissions import REVIEWERS

WIRE_LARGE = {
    "name": "wire_large",
    "priority": 1,
    "action_type": "wire",
    "risk_level": "critical",
    "required_approvals": 2,
    "approver_group": "treasury",
    "editable_params": ["amount", "to"],
    "conditions": [{"path": "params.amount", "op": "gt", "value": 1_000_000}],
}
WIRE = {
    "name": "wire",
    "priority": 2,
    "action_type": "wire",
    "risk_level": "medium",
    "required_approvals": 1,
    "approver_group": "reviewers",
    "editable_params": ["amount", "to", "memo"],
}


@pytest.fixture(autouse=True)
def fresh_counters():
    """Step-up failure counters live in the cache (Redis in CI): never carry them between tests."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def treasury(people, django_user_model) -> dict:
    """tess, trent and vera, in treasury; vera reviews too."""
    group = Group.objects.create(name="treasury")
    cast = {}
    for name in ("tess", "trent", "vera"):
        user = django_user_model.objects.create_user(name, password=f"{name}-pw-123!")
        user.groups.add(group)
        cast[name] = user
    cast["vera"].groups.add(Group.objects.get(name=REVIEWERS))
    return cast


@pytest.fixture
def wire_policy(admin_user, treasury):
    policy.save_rules([WIRE_LARGE, WIRE], actor=Person(admin_user), note="wires: large ones are treasury's")


@pytest.fixture
def wire(submit, wire_policy):
    """`wire(amount, to=...)`: mail-bot asks to wire `amount` from the main ledger."""

    def _wire(amount: int, to: str = "acct-supplier") -> ApprovalRequest:
        return submit("wire", params={"amount": amount, "to": to, "memo": "invoice 42"}, target={"ledger": "main"})

    return _wire
