"""An agent's reason and context: accepted on actions and plans, limited in size and
shape, stored as the agent's own declarations, part of the idempotent body, audited
as digests, and shown on the card as the agent's claim, escaped."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from agents.api.serializers import CONTEXT_MAX_LINKS, CONTEXT_MAX_TURNS, REASON_MAX_CHARS, TURN_MAX_CHARS
from approvals.models import ApprovalRequest
from audit.models import AuditEvent
from tests.api.conftest import EMAIL, PLAN_MD

pytestmark = pytest.mark.django_db


CONTEXT = {
    "links": [{"label": "Run 42", "url": "https://ci.example.com/runs/42"}],
    "turns": [
        {"role": "user", "text": "Email Dana the Q3 numbers."},
        {"role": "assistant", "text": "Drafting the email now."},
    ],
}
REASON = "Dana asked for the Q3 numbers in this thread."


def _submit(api, body, key=None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return api.post("/api/v1/actions/", body, format="json", **headers)


def test_an_action_carries_its_reason_and_context_into_the_request_and_the_answer(api):
    response = _submit(api, {**EMAIL, "reason": REASON, "context": CONTEXT})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["reason"] == REASON and body["context"] == CONTEXT
    stored = ApprovalRequest.objects.get(pk=body["id"])
    assert (stored.reason, stored.context) == (REASON, CONTEXT)
    assert api.get(f"/api/v1/requests/{stored.pk}/").json()["context"] == CONTEXT


def test_a_plan_carries_them_too(api):
    response = api.post(
        "/api/v1/plans/",
        {
            "path": "plans/x.md",
            "plan": PLAN_MD,
            "reason": "The CI is red.",
            "context": {"links": [{"url": "https://example.com/t/1"}]},
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    stored = ApprovalRequest.objects.get(pk=response.json()["id"])
    assert stored.reason == "The CI is red."
    assert stored.context == {"links": [{"label": "", "url": "https://example.com/t/1"}]}


def test_without_them_the_request_holds_empty_declarations(api):
    body = _submit(api, EMAIL).json()
    assert (body["reason"], body["context"]) == ("", {})


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"reason": "x" * (REASON_MAX_CHARS + 1)}, "reason"),
        ({"context": {"links": [{"url": f"https://e.com/{i}"} for i in range(CONTEXT_MAX_LINKS + 1)]}}, "context"),
        ({"context": {"turns": [{"role": "user", "text": "t"}] * (CONTEXT_MAX_TURNS + 1)}}, "context"),
        ({"context": {"turns": [{"role": "user", "text": "t" * (TURN_MAX_CHARS + 1)}]}}, "context"),
        ({"context": {"turns": [{"role": "user"}]}}, "context"),
        ({"context": {"links": [{"label": "no url"}]}}, "context"),
        ({"context": {"links": "https://e.com"}}, "context"),
        ({"context": {"notes": "anything else"}}, "context"),
        ({"context": ["not", "an", "object"]}, "context"),
        ({"reason": {"not": "text"}}, "reason"),
    ],
    ids=[
        "long-reason",
        "many-links",
        "many-turns",
        "long-turn",
        "turn-without-text",
        "link-without-url",
        "links-not-a-list",
        "unknown-key",
        "context-not-object",
        "reason-not-text",
    ],
)
def test_a_malformed_or_oversized_claim_is_a_422_naming_the_field(api, extra, field):
    response = _submit(api, {**EMAIL, **extra})
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "validation_error" and body["message"]
    assert field in json.dumps(body["details"])
    assert not ApprovalRequest.objects.exists()


def test_the_same_key_with_another_reason_is_another_body(api):
    first = _submit(api, {**EMAIL, "reason": REASON}, key="k-1")
    assert _submit(api, {**EMAIL, "reason": REASON}, key="k-1").json()["id"] == first.json()["id"]
    reused = _submit(api, {**EMAIL, "reason": "Something else entirely."}, key="k-1")
    assert reused.status_code == 422 and reused.json()["code"] == "idempotency_key_reused"


def test_an_empty_reason_digests_like_a_body_without_one(api):
    """Agents that never send a reason keep replaying requests made before the field existed."""
    first = _submit(api, EMAIL, key="k-2")
    again = _submit(api, {**EMAIL, "reason": "", "context": {}}, key="k-2")
    assert again["Idempotent-Replayed"] == "true" and again.json()["id"] == first.json()["id"]


def test_the_submission_event_records_that_a_reason_was_given_not_its_text(api):
    body = _submit(api, {**EMAIL, "reason": REASON, "context": CONTEXT}).json()
    event = AuditEvent.objects.get(request_id=body["id"], verb="request.submitted")
    assert set(event.metadata["reason"]) == {"hmac", "size"}
    assert event.metadata["context"]["links"] == 1 and event.metadata["context"]["turns"] == 2
    assert "Dana asked" not in json.dumps(event.metadata) and "Drafting" not in json.dumps(event.metadata)


def test_without_a_reason_the_event_says_nothing_about_one(api):
    body = _submit(api, EMAIL).json()
    metadata = AuditEvent.objects.get(request_id=body["id"], verb="request.submitted").metadata
    assert "reason" not in metadata and "context" not in metadata


def test_the_schema_documents_both_on_submission_and_on_the_request(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]
    action = (
        components["ActionSubmissionRequest"]["properties"]
        if "ActionSubmissionRequest" in components
        else components["ActionSubmission"]["properties"]
    )
    assert action["reason"]["maxLength"] == REASON_MAX_CHARS
    context_ref = json.dumps(action["context"])
    assert "Context" in context_ref
    assert {"reason", "context"} <= set(components["ApprovalRequest"]["properties"])


# --- On the card ----------------------------------------------------------------------------


def _card_html(login_as, people) -> str:
    return login_as(people["alice"]).get("/").content.decode()


def _claims(page: str) -> str:
    """The agent's section of the (one) card."""
    start = page.index('<section class="agent-claims"')
    return page[start : page.index("</section>", start)]


def test_the_card_shows_the_reason_labelled_as_the_agents_claim(api, login_as, people):
    _submit(api, {**EMAIL, "reason": REASON, "context": CONTEXT})
    page = _card_html(login_as, people)
    assert "The agent says" in page and "Agent's claim" in page
    assert REASON in page
    assert '<a href="https://ci.example.com/runs/42" rel="noopener noreferrer nofollow"' in page
    assert "Drafting the email now." in page


def test_hostile_claims_are_escaped_and_only_web_urls_become_links(api, login_as, people):
    _submit(
        api,
        {
            **EMAIL,
            "reason": "<script>alert(1)</script> Approve now!",
            "context": {
                "links": [
                    {"label": "<b>run</b>", "url": "javascript:alert(1)"},
                    {"label": "data", "url": "data:text/html,<script>alert(2)</script>"},
                    {"label": "no host", "url": "https:///nohost"},
                ],
                "turns": [{"role": "<img src=x onerror=alert(3)>", "text": "</li><script>alert(4)</script>"}],
            },
        },
    )
    page = _claims(_card_html(login_as, people))
    assert "<script>alert" not in page and "<img src=x" not in page and "<b>run</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'href="javascript:' not in page and 'href="data:' not in page and 'href="https:///nohost"' not in page
    assert page.count("(not a web link)") == 3


@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reason=st.text(min_size=1, max_size=200).filter(lambda s: s.strip() and "\x00" not in s))
def test_any_reason_renders_as_its_escaped_text(api, login_as, people, reason):
    from django.template.defaultfilters import linebreaksbr

    ApprovalRequest.objects.all().delete()
    response = _submit(api, {**EMAIL, "reason": reason})
    if response.status_code != 201:  # lone surrogates and the like: refused at the edge, never rendered
        assert response.status_code in (400, 422)
        return
    page = _card_html(login_as, people)
    stored = ApprovalRequest.objects.get().reason
    # Escaped, with line breaks as <br> and nothing else of the text read as markup.
    blockquote = _claims(page).split('<blockquote class="agent-reason">', 1)[1].split("</blockquote>", 1)[0]
    assert blockquote == linebreaksbr(stored, autoescape=True)
    assert "<" not in blockquote.replace("<br>", "")
