"""The story the revision stories share (tests/guards/test_revision_*.py, issue 22 item 2): mail-bot,
owned by owen, asks to wire 100; owen proposes an edit to 9,999,999, which makes the request
revision 2, critical, treasury's to decide; vera (a reviewer and in treasury) still has
revision 1 on her screen. `revision_path(name)` is that person deciding through one path (the
JSON API, the dashboard's form, the page script's JSON).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from approvals import policy
from approvals.models import ApprovalRequest, Decision
from approvals.people import Person
from tests.fixtures.cache import fresh_counters  # noqa: F401 (autouse in this module)
from tests.identity.conftest import enroll_totp, local_provider, nobody_required, sign_in, totp_code  # noqa: F401
from tests.identity.test_provider_step_up import back_from_the_provider, sso_alice, step_up_provider, to_the_provider  # noqa: F401

WIRE_LARGE = {
    "name": "wire_large",
    "priority": 1,
    "action_type": "wire",
    "risk_level": "critical",
    "required_approvals": 2,
    "approver_group": "treasury",
    "editable_params": ["amount", "to", "memo"],
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
PAYROLL = {
    "name": "payroll_critical",
    "priority": 3,
    "action_type": "run_payroll",
    "risk_level": "critical",
    "editable_params": ["amount"],
}
CRITICAL_ANSWERS = {
    "name": "critical_answers",
    "priority": 3,
    "action_type": "approval-flow.*",
    "risk_level": "critical",
}
PATHS = ("api", "form", "keyboard")
JSON_ACCEPT = {"HTTP_ACCEPT": "application/json"}
CHALLENGES = "/api/v1/step-up/challenges/"


@pytest.fixture
def treasury_wire(submit, admin_user, treasurers):
    """`wire(amount)`: mail-bot asks to wire `amount`; over a million it is treasury's, critical."""
    policy.save_rules([WIRE_LARGE, WIRE], actor=Person(admin_user), note="wires: large ones are treasury's")

    def _wire(amount: int) -> ApprovalRequest:
        return submit(
            "wire", params={"amount": amount, "to": "acct-supplier", "memo": "invoice 42"}, target={"ledger": "main"}
        )

    return _wire


@pytest.fixture
def payroll(submit, admin_user):
    """A critical run_payroll (the amount editable): every approval needs a step-up."""
    policy.save_rule(PAYROLL, actor=Person(admin_user), note="payroll is critical")
    return lambda amount=100: submit("run_payroll", params={"amount": amount})


@dataclass
class Answer:
    status: int
    code: str | None
    messages: list[str]


class Path:
    """One way a signed-in person sends a decision: the JSON API, the dashboard's plain
    form (answered with a redirect and a message) or the page script's post of that
    form (answered in JSON)."""

    def __init__(self, name: str, user, host: str = "testserver") -> None:
        self.name = name
        self.client = APIClient(HTTP_HOST=host) if name == "api" else Client(HTTP_HOST=host)
        self.client.force_login(user)

    def send(
        self,
        request,
        decision: str,
        *,
        revision: int | None,
        edits: dict | None = None,
        message: str | None = None,
        answer: Any = None,
        password: str | None = None,
        feedback: str = "",
    ) -> Answer:
        """`revision` None: the decision names none."""
        if self.name == "api":
            body: dict[str, Any] = {"decision": decision, "feedback": feedback}
            if revision is not None:
                body["revision"] = revision
            if edits is not None:
                body["edits"] = edits
            if message is not None:
                body["message"] = message
            if answer is not None:
                body["resume_data"] = answer
            if password is not None:
                body["step_up"] = {"method": "password", "password": password}
            response = self.client.post(f"/api/v1/requests/{request.pk}/decisions/", body, format="json")
            return Answer(response.status_code, response.json().get("code"), [])
        view = {
            "approve": "approvals:approve-with-edits" if edits else "approvals:approve",
            "reject": "approvals:reject",
            "respond": "approvals:respond",
        }[decision]
        form = {
            f"edit:{key}": value if isinstance(value, str) else json.dumps(value)
            for key, value in (edits or {}).items()
        }
        form["feedback"] = feedback
        if revision is not None:
            form["revision"] = str(revision)
        if message is not None:
            form["message"] = message
        if answer is not None:
            form["resume_data"] = json.dumps(answer)
        if password is not None:
            form["password"] = password
        headers = JSON_ACCEPT if self.name == "keyboard" else {}
        response = self.client.post(reverse(view, args=[request.pk]), form, **headers)
        if self.name == "keyboard":
            return Answer(response.status_code, response.json().get("code"), [])
        return Answer(response.status_code, None, [str(m) for m in response.wsgi_request._messages])


@pytest.fixture(params=PATHS)
def revision_path(request, people, treasurers):
    """`path("vera")`: vera deciding through this test's path."""
    everyone = {**people, **treasurers}
    return lambda name: Path(request.param, everyone[name])


def assert_refused(answer: Answer, path_name: str, code: str, status: int, *, says: str) -> None:
    if path_name == "form":
        assert answer.status == 302 and any(says in m for m in answer.messages), answer
    else:
        assert (answer.status, answer.code) == (status, code), answer


def snapshot(request) -> tuple:
    """Everything a refused decision must leave as it was."""
    fresh = ApprovalRequest.objects.get(pk=request.pk)
    votes = list(Decision.objects.filter(request=fresh).values_list("reviewer__username", "revision", "verdict"))
    return fresh.state, fresh.current_revision, fresh.current_params(), votes


@pytest.fixture
def alice_api(people) -> APIClient:
    api = APIClient()
    api.force_login(people["alice"])
    return api


def decide_with(api: APIClient, request, body: dict, if_match: str):
    return api.post(f"/api/v1/requests/{request.pk}/decisions/", body, format="json", HTTP_IF_MATCH=if_match)
