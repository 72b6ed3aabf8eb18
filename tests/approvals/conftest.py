"""The approval tests' own setup; the cast (alice, bob, carol, owen, rita, mallory,
ada, mail-bot) comes from the suite's fixture plugin (tests/fixtures/cast.py).

The wire story shared by the attack and batch-decision tests: a `wire` transfer is
medium (the reviewers decide, editable amount and account) unless the amount is
over a million, when it is critical and only the treasury group decides, two of
them. tess and trent are treasury; vera is in both.
"""

from __future__ import annotations

import pytest

from approvals import policy
from approvals.models import ApprovalRequest
from approvals.people import Person
from tests.fixtures.cache import fresh_counters  # noqa: F401 (autouse in this folder)

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


@pytest.fixture
def wire_policy(admin_user, treasurers):
    policy.save_rules([WIRE_LARGE, WIRE], actor=Person(admin_user), note="wires: large ones are treasury's")


@pytest.fixture
def wire(submit, wire_policy):
    """`wire(amount, to=...)`: mail-bot asks to wire `amount` from the main ledger."""

    def _wire(amount: int, to: str = "acct-supplier") -> ApprovalRequest:
        return submit("wire", params={"amount": amount, "to": to, "memo": "invoice 42"}, target={"ledger": "main"})

    return _wire
