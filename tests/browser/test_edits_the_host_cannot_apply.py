"""The keyboard path to an edit: on a card whose host runs the call as submitted
(`allowed_decisions` without `edit`), `e` opens nothing, because there is no edit form to
open; `a` still approves it, and the agent resumes with exactly what it sent."""

from __future__ import annotations

import pytest

from agents.services import issue_token
from tests.browser.conftest import select_card
from tests.browser.test_reviewer_dashboard import api, card

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EMAIL = {"action_type": "send_email", "params": {"to": ["dana@example.com"], "subject": "Hi", "body": "Hello"}}


def _focused_edit_field(page) -> str | None:
    return page.evaluate(
        "() => document.activeElement.closest('details.edit-details') ? document.activeElement.name : null"
    )


def test_e_opens_an_edit_only_where_the_host_can_apply_it(logged_in_page, people, agent, daphne_server):
    token = issue_token(agent, label="browser test").secret
    fixed = api(
        daphne_server.url,
        token,
        "POST",
        "/api/v1/actions/",
        {**EMAIL, "allowed_decisions": ["approve", "reject"], "idempotency_key": "fixed-1"},
    )["id"]
    editable = api(daphne_server.url, token, "POST", "/api/v1/actions/", {**EMAIL, "idempotency_key": "edit-1"})["id"]
    alice = logged_in_page("alice", "alice-pw-123!")

    select_card(alice, editable)
    alice.keyboard.press("e")
    assert (_focused_edit_field(alice) or "").startswith("edit:")  # the same keys reach an edit elsewhere

    select_card(alice, fixed)
    alice.keyboard.press("e")
    assert _focused_edit_field(alice) is None
    assert card(alice, fixed).locator("details.edit-details, form.edit-form").count() == 0

    alice.keyboard.press("a")  # held for the undo window, then sent
    card(alice, fixed).wait_for(state="detached")
    resume = api(daphne_server.url, token, "GET", f"/api/v1/requests/{fixed}/resume/")
    assert resume["resume_data"] == {"action": "approved", "params": EMAIL["params"]}
