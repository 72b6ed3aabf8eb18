"""What the masking stories share (tests/guards/test_masking_*.py; DESIGN.md, issue 22 item 4): a
rule that masks mail's params, a canary (a unique random string and a number) seeded into one
request's masked params, and the requests the surfaces are driven with.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from approvals import policy
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import State
from audit.chain import digest
from audit.models import AuditEvent

# The rule that classifies the canary: body and amount masked, two approvals (so an
# edit and a vote leave it pending), subject and body editable.
MASKED_MAIL = {
    "name": "masked_mail",
    "priority": 1,
    "action_type": "send_email",
    "risk_level": "high",
    "required_approvals": 2,
    "masked_params": ["body", "amount"],
    "editable_params": ["subject", "body"],
    "conditions": [],
}
# A probe that masks nothing and tests the masked body: the attack.
PROBE = {
    "name": "probe",
    "priority": 2,
    "action_type": "send_email",
    "risk_level": "medium",
    "masked_params": [],
    "conditions": [{"path": "params.body", "op": "matches", "value": "^s"}],
}


@dataclass
class Canary:
    """A unique random string and a number, and everything that must never carry them."""

    text: str = field(default_factory=lambda: f"canary{secrets.token_hex(12)}")
    number: int = field(default_factory=lambda: 100_000_000 + secrets.randbelow(800_000_000))
    edited: str = field(default_factory=lambda: f"canary{secrets.token_hex(12)}")

    @property
    def needles(self) -> dict[str, str]:
        """What must not appear: each value, a truncated prefix of the strings, and the
        keyed digest (audit.privacy's HMAC) of each value."""
        found = {
            "text": self.text,
            "text prefix": self.text[:16],
            "number": str(self.number),
            "edited": self.edited,
            "edited prefix": self.edited[:16],
        }
        for name, value in (("text", self.text), ("number", self.number), ("edited", self.edited)):
            found[f"{name} digest"] = digest(value)["hmac"]
        return found

    def assert_absent(self, surface: str, text: str) -> None:
        leaked = [name for name, needle in self.needles.items() if needle in text]
        assert not leaked, f"{surface} leaks the masked {', '.join(leaked)}"


def _user(name: str, *groups: str):
    user = get_user_model().objects.create_user(name, password=f"{name}-pw-123!", email=f"{name}@example.com")
    for group in groups:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


@pytest.fixture
def masked_rule(risk_admin):
    return policy.save_rule(MASKED_MAIL, actor=Person(risk_admin), note="mail bodies and amounts are masked")


@pytest.fixture
def canary() -> Canary:
    return Canary()


@pytest.fixture
def seeded(canary, masked_rule, submit) -> ApprovalRequest:
    """The canary request, pending: body and amount masked."""
    request = submit(
        "send_email", {"to": ["dana@example.com"], "subject": "Quarterly", "body": canary.text, "amount": canary.number}
    )
    assert request.state == State.PENDING_APPROVAL and set(request.classification["masked_params"]) == {
        "body",
        "amount",
    }
    return request


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _post_json(client: Client, url: str, payload: dict):
    return client.post(url, data=json.dumps(payload), content_type="application/json", HTTP_ACCEPT="application/json")


def _probe_reveals(request) -> int:
    return AuditEvent.objects.filter(
        request_id=request.pk, verb__in=("rules.masked_probe", "request.field_revealed")
    ).count()
