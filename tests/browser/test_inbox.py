"""The reviewer's inbox in a real browser (Debian chromium, real daphne): triage order,
counts that match the list, keys that act only on the selected request with an undo
window and a confirm, drafts that survive another reviewer's decision, presence, and
a queue that fits a phone.

The undo window is driven with Playwright's clock (`page.clock`), not by sleeping:
the page's timers run exactly when the test says, so nothing here depends on speed.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request
from pathlib import Path

import pytest

from agents.models import Agent
from agents.services import issue_token
from approvals import services
from approvals.models import ApprovalRequest, Decision
from approvals.states import State
from tests.browser.conftest import signed_in_page, wait_for_address
from tests.fixtures.revisions import current_revision

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DOCS_SCREENSHOTS = Path(__file__).resolve().parent.parent.parent / "docs" / "screenshots"
UNDO_MS = 5000
MANY = {"to": [f"p{i}@example.com" for i in range(12)], "subject": "Price change", "body": "Monday."}


def api(server_url: str, token: str, path: str, body: dict) -> dict:
    """Submit the way an agent does: bearer token, JSON, no cookies."""
    request = urllib.request.Request(
        server_url + path,
        method="POST",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=15) as response:
        return json.load(response)


def row_ids(page) -> list[str]:
    return page.locator("#queue-list .queue-row").evaluate_all("(rows) => rows.map((row) => row.dataset.id)")


def eventually(condition, within: float = 10.0) -> bool:
    """Whether `condition()` holds within `within` seconds (a request the page sent as it
    left has no page left to wait on)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def with_clock(page):
    """The queue again, with the page's timers under the test's control."""
    page.clock.install()
    page.reload()
    page.locator("#live-status.is-live").wait_for()
    return page


def select(page, request_id: str) -> None:
    page.locator(f"#row-{request_id}").click()
    page.locator(f"#row-{request_id}[aria-selected=true]").wait_for()
    page.locator(f"#card-{request_id}.is-selected").wait_for()


def test_a_critical_request_submitted_last_is_on_top_and_the_order_can_be_switched(
    logged_in_page, people, submit, critical_wires
):
    first = submit("send_email")
    submit("send_email", params=MANY)
    submit("send_email")
    critical = submit("wire_money", params={"amount": 5})  # last in, first to decide
    alice = logged_in_page("alice", "alice-pw-123!")
    assert row_ids(alice)[0] == str(critical.pk)
    assert "highest risk, then the nearest deadline" in alice.locator("#queue-summary").inner_text()
    alice.locator(".order-switch a[data-order=age]").click()
    wait_for_address(alice, "/?order=age")
    assert row_ids(alice)[0] == str(first.pk) and row_ids(alice)[-1] == str(critical.pk)
    assert "Oldest first" in alice.locator("#queue-summary").inner_text()


def test_counts_under_a_filter_follow_the_list_as_agents_submit(
    require_redis, logged_in_page, people, agent, critical_wires, daphne_server
):
    other = Agent.objects.create(name="report-bot", owner=people["owen"])
    mine, theirs = issue_token(agent, label="t").secret, issue_token(other, label="t").secret
    alice = logged_in_page("alice", "alice-pw-123!")
    alice.goto("/?agent=mail-bot")
    alice.locator("#live-status.is-live").wait_for()

    def submitted(token, action_type, params, key):
        return api(
            daphne_server.url,
            token,
            "/api/v1/actions/",
            {"action_type": action_type, "target": {"mailbox": "outbox"}, "params": params, "idempotency_key": key},
        )

    submitted(theirs, "wire_money", {"amount": 1}, "other-1")  # filtered out: must not count
    for i in range(3):
        last = submitted(mine, "wire_money", {"amount": i}, f"wire-{i}")
    last_email = submitted(mine, "send_email", {"to": ["d@example.com"], "subject": "s", "body": "b"}, "mail-1")
    alice.locator(f"#row-{last['id']}").wait_for()
    alice.locator(f"#row-{last_email['id']}").wait_for()
    alice.wait_for_function("() => document.getElementById('queue-count').textContent === '4'")
    shown = {level: alice.locator(f"[data-risk-count={level}]").inner_text() for level in ("critical", "medium")}
    assert shown == {"critical": "3", "medium": "1"}
    assert alice.locator("#queue-list .queue-row").count() == 4
    assert alice.locator("#queue-list .queue-row.risk-red").count() == 3
    assert alice.title().startswith("(4) Queue")


def test_a_acts_only_on_the_selected_request(logged_in_page, people, submit):
    first, second = submit("send_email"), submit("send_email")
    alice = with_clock(logged_in_page("alice", "alice-pw-123!"))
    ids = row_ids(alice)
    alice.locator(f"#row-{ids[0]}[aria-selected=true]").wait_for()  # the queue opens on its first row
    assert alice.locator(".card.is-selected").count() == 1
    alice.keyboard.press("a")
    alice.locator("#undo-toast").wait_for()
    alice.locator("#undo-button").click()
    assert alice.locator("#undo-toast").is_hidden()
    assert not Decision.objects.filter(request_id__in=[first.pk, second.pk]).exists()


def test_undo_within_the_window_sends_nothing_and_the_window_closing_sends_it(logged_in_page, people, submit):
    request = submit("send_email")
    alice = with_clock(logged_in_page("alice", "alice-pw-123!"))
    alice.keyboard.press("j")
    alice.keyboard.press("a")
    alice.locator("#undo-toast").wait_for()
    alice.clock.run_for(UNDO_MS - 1000)
    alice.locator("#undo-button").click()
    alice.clock.run_for(UNDO_MS * 2)  # well past the window: the cancelled timer never fires
    assert alice.locator("#undo-toast").is_hidden()
    assert alice.locator(f"#card-{request.pk}").is_visible()
    assert not Decision.objects.filter(request_id=request.pk).exists()
    assert ApprovalRequest.objects.get(pk=request.pk).state == State.PENDING_APPROVAL

    alice.keyboard.press("a")  # again, and this time let the window close
    alice.locator("#undo-toast").wait_for()
    alice.clock.run_for(UNDO_MS)
    alice.locator(f"#card-{request.pk}").wait_for(state="detached")
    alice.locator("#flash-stack .flash-success").wait_for()
    assert ApprovalRequest.objects.get(pk=request.pk).state == State.APPROVED
    assert alice.locator("#flash-stack .flash").count() == 1  # one toast for the outcome, not two


def test_moving_on_sends_the_held_approval(logged_in_page, people, submit):
    first, second = submit("send_email"), submit("send_email")
    alice = with_clock(logged_in_page("alice", "alice-pw-123!"))
    ids = row_ids(alice)
    select(alice, ids[0])
    alice.keyboard.press("a")
    alice.locator("#undo-toast").wait_for()
    alice.keyboard.press("j")  # the reviewer moves on before the window closes
    alice.locator(f"#card-{ids[0]}").wait_for(state="detached")
    assert ApprovalRequest.objects.get(pk=ids[0]).state == State.APPROVED
    assert ApprovalRequest.objects.get(pk=ids[1]).state == State.PENDING_APPROVAL
    assert {str(first.pk), str(second.pk)} == set(ids)


def test_leaving_the_page_sends_the_held_approval(logged_in_page, people, submit):
    request = submit("send_email")
    alice = with_clock(logged_in_page("alice", "alice-pw-123!"))
    select(alice, str(request.pk))
    alice.keyboard.press("a")
    alice.locator("#undo-toast").wait_for()
    alice.goto("/history/")  # leaving is not undoing: the decision goes with the page
    assert eventually(lambda: ApprovalRequest.objects.get(pk=request.pk).state == State.APPROVED)


def test_high_and_critical_ask_before_anything(logged_in_page, people, submit, critical_wires):
    high = submit("send_email", params=MANY)
    wire = submit("wire_money", params={"amount": 5})
    alice = with_clock(logged_in_page("alice", "alice-pw-123!"))
    select(alice, str(high.pk))
    alice.keyboard.press("a")
    alice.locator("#confirm-decision[open]").wait_for()
    assert "high" in alice.locator("#confirm-title").inner_text()
    alice.locator("#confirm-decision button[value=cancel]").click()
    alice.locator("#confirm-decision").wait_for(state="hidden")
    assert alice.locator("#undo-toast").is_hidden()
    alice.clock.run_for(UNDO_MS * 2)
    assert not Decision.objects.filter(request_id=high.pk).exists()

    select(alice, str(wire.pk))  # critical: the step-up proof, then the confirm, then the undo window
    alice.locator(f"#card-{wire.pk} input[name=password]").fill("alice-pw-123!")
    alice.locator(f"#card-{wire.pk} .approve-form button[type=submit]").click()
    alice.locator("#confirm-decision[open]").wait_for()
    assert "critical" in alice.locator("#confirm-title").inner_text()
    alice.locator("#confirm-yes").click()
    alice.locator("#undo-toast").wait_for()
    assert not Decision.objects.filter(request_id=wire.pk).exists()
    alice.clock.run_for(UNDO_MS)
    alice.locator(f"#card-{wire.pk}").wait_for(state="detached")
    assert ApprovalRequest.objects.get(pk=wire.pk).state == State.APPROVED


def named(user, first: str, last: str) -> None:
    user.first_name, user.last_name = first, last
    user.save(update_fields=["first_name", "last_name"])


def test_a_draft_survives_another_reviewers_decision(require_redis, logged_in_page, people, submit):
    named(people["alice"], "Alice", "Liddell")  # people read her full name, never her username
    request = submit("send_email")
    bob = logged_in_page("bob", "bob-pw-123!")
    bob.locator("#live-status.is-live").wait_for()
    select(bob, str(request.pk))
    bob.keyboard.press("r")
    draft = "The subject line is wrong:\nsay <which> quarter."
    bob.keyboard.type(draft)

    alice = with_clock(logged_in_page("alice", "alice-pw-123!"))
    select(alice, str(request.pk))
    alice.keyboard.press("a")
    alice.locator("#undo-toast").wait_for()
    alice.clock.run_for(UNDO_MS)

    card = bob.locator(f"#card-{request.pk}.is-decided")
    card.wait_for()
    assert "Decided by Alice Liddell (approved)" in card.locator(".decided-note").inner_text()
    feedback = card.locator("textarea[name=feedback]")
    assert feedback.input_value() == draft and feedback.evaluate("(el) => el.readOnly")
    assert card.locator("button[type=submit]:not([disabled])").count() == 0
    assert "approved by Alice Liddell" in bob.locator("#flash-stack").inner_text()
    assert bob.locator("#flash-stack .flash").count() == 1
    card.locator(".dismiss-decided").click()
    bob.locator(f"#card-{request.pk}").wait_for(state="detached")


def test_a_draft_survives_another_reviewers_vote_that_redraws_the_card(
    require_redis, logged_in_page, people, submit, two_person_rule
):
    transfer = submit("transfer_funds", params={"amount": 5})
    bob = logged_in_page("bob", "bob-pw-123!")
    bob.locator("#live-status.is-live").wait_for()
    select(bob, str(transfer.pk))
    bob.keyboard.press("r")
    bob.keyboard.type("Half now, half next week.")
    services.approve(
        transfer.pk, revision=current_revision(transfer.pk), actor=services.Person(people["alice"])
    )  # one of two: the card is redrawn
    card = bob.locator(f"#card-{transfer.pk}")
    card.locator(".quorum-text", has_text="1 of 2").wait_for()
    assert card.locator("textarea[name=feedback]").input_value() == "Half now, half next week."


def test_presence_shows_who_else_is_looking(require_redis, logged_in_page, people, submit):
    named(people["alice"], "Alice", "Liddell")  # bob has no full name: his username stands in
    request = submit("send_email")
    other = submit("send_email")
    alice = logged_in_page("alice", "alice-pw-123!")
    bob = logged_in_page("bob", "bob-pw-123!")
    for page in (alice, bob):
        page.locator("#live-status.is-live").wait_for()
    select(alice, str(request.pk))
    select(bob, str(request.pk))
    bob.locator(f"#card-{request.pk} .presence", has_text="Alice Liddell is looking at this").wait_for()
    alice.locator(f"#card-{request.pk} .presence", has_text="bob is looking at this").wait_for()
    assert "Alice Liddell" in bob.locator(f"#row-{request.pk} .row-presence").inner_text()

    select(alice, str(other.pk))  # alice moves on
    bob.locator(f"#card-{request.pk} .presence").wait_for(state="hidden")
    bob.locator(f"#row-{other.pk} .row-presence", has_text="Alice Liddell").wait_for()
    alice.context.close()  # her socket closes: her presence ends with it
    bob.locator(f"#row-{other.pk} .row-presence").wait_for(state="hidden")


def test_the_queue_fits_a_phone_and_both_screenshots(
    new_context, daphne_server, people, submit, critical_wires, artifacts_dir
):
    for _ in range(3):
        submit("send_email")
    submit("send_email", params=MANY)
    critical = submit("wire_money", params={"amount": 25000, "memo": "Supplier invoice 4411"})
    desktop = signed_in_page(new_context, daphne_server, "alice", "alice-pw-123!")
    select(desktop, str(critical.pk))
    desktop.screenshot(path=str(artifacts_dir / "queue-desktop.png"))

    phone = signed_in_page(
        new_context,
        daphne_server,
        "bob",
        "bob-pw-123!",
        viewport={"width": 390, "height": 844},
        is_mobile=True,
        has_touch=True,
    )
    phone.locator("#queue-list .queue-row").first.wait_for()
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    select(phone, str(critical.pk))
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    phone.locator("#menu-toggle").click()  # the phone header is one line; its menu holds the rest
    for reachable in (".whoami", ".usermenu button[type=submit]"):  # the name and Sign out
        box = phone.locator(reachable).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, reachable
    phone.locator("#menu-toggle").click()
    phone.locator(f"#card-{critical.pk} details.reject-details summary").click()
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    phone.evaluate("window.scrollTo(0, 0)")
    phone.screenshot(path=str(artifacts_dir / "queue-phone.png"), full_page=True)
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":  # refresh the README's pictures on purpose only
        DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for name in ("queue-desktop.png", "queue-phone.png"):
            shutil.copy(artifacts_dir / name, DOCS_SCREENSHOTS / name)
