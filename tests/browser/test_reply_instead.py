"""A reviewer replies in place of a tool from the queue in Chromium (the page's script
posts the form); the agent resumes with the reply, and the card offers it only where
the agent's host allows it."""

from __future__ import annotations

import pytest

from tests.browser.conftest import select_card
from tests.browser.test_reviewer_dashboard import api, card

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_reply_from_the_card_reaches_the_agent_in_place_of_the_tool(
    logged_in_page, people, agent_token, daphne_server
):
    bob = logged_in_page("bob", "bob-pw-123!")
    ask = api(
        daphne_server.url,
        agent_token,
        "POST",
        "/api/v1/actions/",
        {
            "action_type": "ask_user",
            "params": {"question": "Which mailbox?"},
            "allowed_decisions": ["respond", "reject"],
            "batch_id": "interrupt-1",
            "idempotency_key": "browser-reply-1",
        },
    )
    other = api(
        daphne_server.url,
        agent_token,
        "POST",
        "/api/v1/actions/",
        {
            "action_type": "archive_thread",
            "params": {"thread": "t-9"},
            "batch_id": "interrupt-1",
            "idempotency_key": "browser-reply-2",
        },
    )
    assert other["state"] == "pending_approval"
    bob.reload()
    select_card(bob, other["id"])
    assert card(bob, other["id"]).get_by_text("Reply instead").count() == 0
    select_card(bob, ask["id"])

    reply = 'The shared outbox; "B" <not A>.'
    card(bob, ask["id"]).get_by_text("Reply instead").click()
    card(bob, ask["id"]).locator("textarea[name=message]").fill(reply)
    card(bob, ask["id"]).get_by_role("button", name="Send reply").click()
    card(bob, ask["id"]).wait_for(state="detached")

    resume = api(daphne_server.url, agent_token, "GET", f"/api/v1/requests/{ask['id']}/resume/")
    assert (resume["state"], resume["resume_data"]) == ("rejected", {"action": "responded", "message": reply})
    assert not bob.dialogs
