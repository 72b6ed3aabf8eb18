"""The suspension's card on the queue page, as the server renders it: what the agent
wrote is shown as text (the summary through the Markdown sanitizer), the form carries
the schema as inert JSON and posts to the answer endpoint, and a queue of suspensions
costs no query per card."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from .conftest import APPROVAL_SCHEMA, decide, rule

pytestmark = pytest.mark.django_db

HOSTILE = '<img src=x onerror="alert(1)">'


def queue_html(client, people, name="alice") -> str:
    client.force_login(people[name])
    return client.get(reverse("approvals:queue")).content.decode()


def test_the_card_shows_what_the_agent_wrote_as_text_and_the_form_to_answer(suspend, client, people):
    request_id = suspend(
        title=f"Pay {HOSTILE}",
        summary=f"**Over** the limit <script>alert(2)</script> {HOSTILE}",
        suspend_payload={"amount": 150.13, "reason": HOSTILE},
        resume_schema={**APPROVAL_SCHEMA, "description": "</script><script>alert(3)</script>"},
    ).json()["id"]
    html = queue_html(client, people)
    assert "<strong>Over</strong>" in html  # Markdown rendered
    for raw in (HOSTILE, "<script>alert(2)", "</script><script>alert(3)"):
        assert raw not in html
    assert "&lt;img src=x onerror=" in html  # the payload's reason, escaped
    assert f'action="/requests/{request_id}/respond/"' in html
    assert 'name="resume_data"' in html and 'type="application/json"' in html
    assert "\\u003C/script\\u003E" in html  # the schema's text cannot end its JSON block


def test_a_proposal_is_shown_and_prefilled(suspend, client, people, reviewer_client, admin_user):
    rule(admin_user, name="two", priority=2, action_type="approval-flow.*", risk_level="high", required_approvals=2)
    request_id = suspend().json()["id"]
    decide(reviewer_client("alice"), request_id, {"decision": "respond", "resume_data": {"approved": False}})
    html = queue_html(client, people, "bob")
    assert "Proposed answer (revision 2)" in html  # alice's own approval counts: no "by" to warn of
    assert 'data-answer="{&quot;approved&quot;:false}"' in html
    assert ">{&quot;approved&quot;:false}</textarea>" in html


def test_a_queue_of_suspensions_costs_no_query_per_card(suspend, client, people):
    client.force_login(people["alice"])
    for index in range(2):
        suspend(run_id=f"a-{index}")
    with CaptureQueriesContext(connection) as few:
        client.get(reverse("approvals:queue"))
    for index in range(12):
        suspend(run_id=f"b-{index}")
    with CaptureQueriesContext(connection) as many:
        assert client.get(reverse("approvals:queue")).status_code == 200
    assert len(many.captured_queries) <= len(few.captured_queries)
