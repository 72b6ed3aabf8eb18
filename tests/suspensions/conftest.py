"""Seed 002's `approval-flow` workflow, as its host submits the paused `approval` step:
the suspend payload `{amount, reason}` and the resume schema zod 4 writes for
`z.object({ approved: z.boolean() })`."""

from __future__ import annotations

import pytest

from approvals import policy
from approvals.people import Person
from tests.fixtures.cache import fresh_counters

# The API tests' settings and clients, as fixtures here too.
from ..api.conftest import agent_api_settings, api, csrf_post, reviewer_client

__all__ = ["agent_api_settings", "api", "fresh_counters", "reviewer_client"]

APPROVAL_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
    "additionalProperties": False,
}

APPROVAL_STEP = {
    "title": "Approve the payment",
    "summary": "The **normalize** step found an amount above the automatic limit.",
    "workflow_id": "approval-flow",
    "step_id": "approval",
    "run_id": "run-1",
    "suspend_payload": {"amount": 150.13, "reason": "Amount exceeds automatic approval limit"},
    "resume_schema": APPROVAL_SCHEMA,
}

BIG_AMOUNTS = {
    "name": "big_amounts",
    "priority": 3,
    "action_type": "approval-flow.*",
    "risk_level": "high",
    "conditions": [{"path": "params.amount", "op": "gt", "value": 100}],
}


def rule(admin_user, **fields):
    return policy.save_rule(fields, actor=Person(admin_user), note="suspension test rule")


@pytest.fixture
def big_amounts(admin_user):
    """Suspensions of approval-flow over 100 are high risk (other amounts fall to the default)."""
    return rule(admin_user, **BIG_AMOUNTS)


@pytest.fixture
def suspend(api):  # noqa: F811 - the fixture named above
    """Submit a suspension as mail-bot: `suspend(**overrides)` -> the response."""

    def _suspend(headers: dict | None = None, **overrides):
        return api.post(
            "/api/v1/suspensions/",
            {**APPROVAL_STEP, **overrides},
            format="json",
            **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in (headers or {}).items()},
        )

    return _suspend


def decide(client, request_id, body: dict):
    """POST a decision; on the revision the request is at now unless `body` names one."""
    from tests.fixtures.revisions import current_revision

    return csrf_post(
        client, f"/api/v1/requests/{request_id}/decisions/", {"revision": current_revision(request_id), **body}
    )


@pytest.fixture
def pending(suspend):
    """Submit a suspension (overrides as for `suspend`); its id."""

    def _pending(**overrides) -> str:
        response = suspend(**overrides)
        assert response.status_code == 201, response.json()
        return response.json()["id"]

    return _pending
