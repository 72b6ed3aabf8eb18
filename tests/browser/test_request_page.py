"""The request page and reveals in a real browser (Debian chromium, real daphne): a
masked body revealed on the card (and the reveal in the audit chain), a history row
opening the request page with both approvers of a two-person approval, and history
and the request page at a phone's width without sideways scrolling."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from approvals import services
from approvals.models import ApprovalRequest
from approvals.states import State
from audit.models import AuditEvent
from tests.browser.conftest import select_card
from tests.fixtures.revisions import current_revision

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DOCS_SCREENSHOTS = Path(__file__).resolve().parent.parent.parent / "docs" / "screenshots"
PHONE = {"width": 390, "height": 844}
SECRET = "Q3 revenue was 4.2M; please keep this internal."


@pytest.fixture
def approved_transfer(submit, people, two_person_rule):
    """A two-person transfer: alice edited the amount and approved, bob approved."""
    request = submit(
        "transfer_funds",
        params={"amount": "900.00", "to": "acct-1", "memo": "rent"},
        reason="The landlord's invoice is due today.",
        context={
            "links": [{"label": "Run 12", "url": "https://ci.example.com/runs/12"}],
            "turns": [{"role": "user", "text": "Pay the rent, half now."}],
        },
    )
    services.approve_with_edits(
        request.pk,
        revision=current_revision(request.pk),
        actor=services.Person(people["alice"]),
        edits={"amount": "450.00"},
    )
    services.approve(
        request.pk,
        revision=current_revision(request.pk),
        actor=services.Person(people["bob"]),
        feedback="Matches the invoice.",
    )
    request.refresh_from_db()
    assert request.state == State.APPROVED
    return request


def test_a_masked_body_is_revealed_on_the_card_and_the_reveal_is_audited(logged_in_page, submit, people):
    request = submit(
        "send_email",
        params={"to": ["dana@example.com"], "subject": "Q3", "body": SECRET},
        reason="Dana asked for the numbers.",
    )
    alice = logged_in_page("alice", "alice-pw-123!")
    select_card(alice, request.pk)
    card = alice.locator(f"#card-{request.pk}")
    assert SECRET not in alice.content()
    assert "The agent says" in card.inner_text()

    card.locator('.reveal-btn[data-field="body"]').click()
    shown = card.locator('[data-revealed-for="body"]')
    shown.wait_for(state="visible")
    assert shown.inner_text() == SECRET
    # The edit box ("leave empty to keep") now starts with the value.
    card.locator(".edit-details summary").click()
    assert card.locator(f"#edit-{request.pk}-body").input_value() == SECRET

    [event] = AuditEvent.objects.filter(request_id=request.pk, verb="request.field_revealed")
    assert event.actor_label == "alice" and event.metadata["field"] == "body"
    assert SECRET not in str(event.metadata)


def test_a_reviewer_outside_the_group_cannot_reveal_from_a_forged_page(logged_in_page, submit, people):
    """mallory signs in, then posts the reveal the card would have (she sees no card)."""
    request = submit("send_email", params={"to": ["dana@example.com"], "subject": "Q3", "body": SECRET})
    mallory = logged_in_page("mallory", "mallory-pw-123!")
    answer = mallory.evaluate(
        """async (url) => {
        const token = document.querySelector("meta[name=csrf-token]").content;
        const response = await fetch(url, {method: "POST", credentials: "same-origin",
            headers: {"Content-Type": "application/json", "X-CSRFToken": token, Accept: "application/json"},
            body: JSON.stringify({field: "body"})});
        return {status: response.status, text: await response.text()};
    }""",
        f"/requests/{request.pk}/reveal/",
    )
    assert answer["status"] == 404 and SECRET not in answer["text"]
    assert not AuditEvent.objects.filter(request_id=request.pk, verb="request.field_revealed").exists()


def test_a_history_row_opens_the_request_page_with_both_approvers(
    logged_in_page, approved_transfer, people, artifacts_dir
):
    carol = logged_in_page("carol", "carol-pw-123!")
    carol.goto("/history/")
    row = carol.locator(f'a.row-link[href="/requests/{approved_transfer.pk}/"]')
    assert "Edited by alice" in carol.locator(".history-row", has=row).inner_text()
    row.click()
    carol.wait_for_url(f"**/requests/{approved_transfer.pk}/")
    decisions = carol.locator("#decisions .decision-who").all_inner_texts()
    assert sorted(decisions) == ["alice", "bob"]
    assert "edited by alice" in carol.locator("#revisions").inner_text()
    assert "The agent says" in carol.locator(".agent-claims").inner_text()
    assert "request.approved" in carol.locator("#audit").inner_text()
    carol.screenshot(path=str(artifacts_dir / "request-page.png"), full_page=True)
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":  # refresh the docs' pictures on purpose only
        DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(artifacts_dir / "request-page.png", DOCS_SCREENSHOTS / "request-page.png")


@pytest.mark.parametrize("where", ["history", "request"])
def test_history_and_the_request_page_fit_a_phone(logged_in_page, approved_transfer, people, artifacts_dir, where):
    carol = logged_in_page("carol", "carol-pw-123!")
    carol.set_viewport_size(PHONE)
    carol.goto("/history/" if where == "history" else f"/requests/{approved_transfer.pk}/")
    carol.locator("main").wait_for()
    assert carol.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    # The sign-out button is still on screen, not cut off by the header, behind its Menu.
    carol.locator("#menu-toggle").click()
    box = carol.locator("form[action='/logout/'] button, .usermenu button").first.bounding_box()
    assert box is not None and box["x"] + box["width"] <= PHONE["width"]
    carol.screenshot(path=str(artifacts_dir / f"{where}-phone.png"), full_page=True)
    assert ApprovalRequest.objects.filter(pk=approved_transfer.pk).exists()
