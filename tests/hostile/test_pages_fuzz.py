"""Hostile query strings and form fields on the pages people use: whatever a
browser (or a script with a session) sends, no page answers 5xx, and a refused
decision changes nothing. The API has its own schema-driven run (test_stateful)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.models import ApprovalRequest

PAGES = ["/", "/history/", "/audit/", "/rules/", "/rules/metrics/", "/rules/history/", "/queue/sync.json"]
KNOWN_PARAMS = [
    "action_type",
    "agent",
    "risk",
    "state",
    "expiring",
    "page",
    "q",
    "actor",
    "verb",
    "request",
    "from",
    "to",
    "since",
    "until",
    "seq",
    "order",
    "period",
    "table",
    "kind",
]

hostile_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "\x00",
            "%00",
            "-1",
            "0",
            "99999999999999999999",
            "1e309",
            "NaN",
            "../../etc",
            "<script>",
            "2026-13-45",
            "'; DROP TABLE x; --",
            "\u202e",
            "ａ",
            " ",
            "\t=1+1",
        ]
    ),
)
query_strings = st.dictionaries(
    st.one_of(st.sampled_from(KNOWN_PARAMS), st.text(min_size=1, max_size=10)), hostile_text, max_size=4
)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def auditor_admin(admin_user, people):
    """One user who may see every page: a superuser in the reviewers' group."""
    admin_user.groups.add(*people["alice"].groups.all())
    return admin_user


@FUZZ
@given(page=st.sampled_from(PAGES), query=query_strings)
def test_no_page_answers_5xx_to_any_query_string(client, auditor_admin, page, query):
    client.force_login(auditor_admin)
    response = client.get(page, query)
    assert response.status_code < 500, (page, query)


@FUZZ
@given(
    verdict=st.sampled_from(["approve", "reject", "approve-with-edits"]),
    form=st.dictionaries(
        st.one_of(
            st.sampled_from(["feedback", "step_up", "edit:to", "edit:subject", "masked:to", "revision", "next"]),
            st.text(min_size=1, max_size=12),
        ),
        hostile_text,
        max_size=5,
    ),
)
def test_no_decision_form_answers_5xx_and_a_refusal_changes_nothing(client, people, submit, verdict, form):
    pending = submit("send_email")
    client.force_login(people["alice"])
    response = client.post(f"/requests/{pending.pk}/{verdict}/", form)
    assert response.status_code < 500, (verdict, form)
    pending.refresh_from_db()
    if response.status_code >= 400:
        assert pending.state == "pending_approval", (verdict, form)
    ApprovalRequest.objects.filter(pk=pending.pk).delete()


@FUZZ
@given(
    body=st.one_of(
        hostile_text,
        st.dictionaries(
            st.sampled_from(["field", "value", "path"]),
            st.one_of(hostile_text, st.integers(), st.none(), st.lists(hostile_text, max_size=2)),
            max_size=2,
        ),
    )
)
def test_no_reveal_answers_5xx_and_only_a_masked_param_is_ever_revealed(client, people, submit, body):
    import json

    from audit.models import AuditEvent

    pending = submit("send_email", params={"to": ["d@example.com"], "subject": "s", "body": "HIDDEN-BODY"})
    client.force_login(people["alice"])
    raw = body if isinstance(body, str) else json.dumps(body)
    response = client.post(f"/requests/{pending.pk}/reveal/", raw, content_type="application/json")
    assert response.status_code < 500, body
    revealed = AuditEvent.objects.filter(request_id=pending.pk, verb="request.field_revealed").exists()
    assert revealed == (isinstance(body, dict) and body.get("field") == "body") == (response.status_code == 200)
    if response.status_code != 200:
        assert "HIDDEN-BODY" not in response.content.decode()
    ApprovalRequest.objects.filter(pk=pending.pk).delete()
