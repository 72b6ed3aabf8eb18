"""A signed-in reviewer's browser posting without a CSRF token (what a forged
cross-site form does) is refused on every session-authenticated form and API,
and nothing changes."""

from __future__ import annotations

import pytest
from django.test import Client

from approvals import policy
from approvals.models import ApprovalRequest, RiskRule
from approvals.people import Person
from approvals.states import State
from audit.models import AuditEvent

pytestmark = pytest.mark.django_db

RULE = {
    "name": "docs_medium",
    "priority": 50,
    "action_type": "update_document",
    "risk_level": "medium",
    "conditions": [],
}


def test_every_session_post_without_a_csrf_token_is_refused(reviewing_risk_admin, submit):
    pending = submit("send_email")
    policy.save_rule(RULE, actor=Person(reviewing_risk_admin), note="a rule to aim at")
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewing_risk_admin)
    events_before = AuditEvent.objects.count()
    rules_before = list(RiskRule.objects.values_list("name", "enabled", "priority"))
    forged = {
        f"/requests/{pending.pk}/approve/": {"revision": "1"},
        f"/requests/{pending.pk}/reject/": {"feedback": "forged", "revision": "1"},
        f"/requests/{pending.pk}/approve-with-edits/": {"edit:subject": "forged", "revision": "1"},
        f"/requests/{pending.pk}/step-up-challenge/": {"decision": "approve", "revision": "1"},
        f"/api/v1/requests/{pending.pk}/decisions/": {"decision": "approve", "revision": 1},
        f"/requests/{pending.pk}/reveal/": {"field": "body"},
        "/queue/batch/decide/": {"decision": "approve", "request": f"{pending.pk}:1"},
        f"/api/v1/requests/{pending.pk}/reveal/": {"field": "body"},
        f"/rules/requests/{pending.pk}/extend-deadline/": {"seconds": "60", "reason": "forged"},
        "/rules/new/": {"rule_json": '{"name": "evil", "priority": 1, "action_type": "*", "risk_level": "low"}'},
        "/rules/docs_medium/edit/": {
            "rule_json": '{"name": "docs_medium", "priority": 1, "action_type": "*", "risk_level": "low"}'
        },
        "/rules/docs_medium/toggle/": {"enabled": "0"},
        "/rules/docs_medium/delete/": {},
        "/rules/docs_medium/notifications/": {"webhook_url": "https://evil.example/"},
        "/rules/reorder/": {"order": "docs_medium"},
        "/rules/history/1/restore/": {},
        "/rules/validate.json": {},
        "/rules/dry-run.json": {},
        "/rules/test.json": {},
        "/logout/": {},
    }
    for url, data in forged.items():
        response = client.post(url, data)
        assert response.status_code == 403, (url, response.status_code)
    assert ApprovalRequest.objects.get(pk=pending.pk).state == State.PENDING_APPROVAL
    assert list(RiskRule.objects.values_list("name", "enabled", "priority")) == rules_before
    assert AuditEvent.objects.count() == events_before
    assert client.get("/").status_code == 200  # still signed in: the forged logout did nothing
