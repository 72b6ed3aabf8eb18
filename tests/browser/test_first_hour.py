"""The first hour, as a reviewer sees it (Debian chromium against the real daphne server):
a phone whose filters never cover the card, a header that collapses to one line, and
what each card and row says about itself (issue 27)."""

from __future__ import annotations

import pytest

from tests.browser.conftest import select_card, signed_in_page

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
LONG_BODY = "\n\n".join(f"Paragraph {i}: the quarterly numbers, line by line." for i in range(40))


def signed_in(new_context, daphne_server, username: str, **options):
    return signed_in_page(new_context, daphne_server, username, f"{username}-pw-123!", **options)


def covered_by(page, selector: str) -> str | None:
    """What covers the middle of `selector`'s visible part (None when nothing does)."""
    return page.evaluate(
        """(selector) => {
          const el = document.querySelector(selector);
          const box = el.getBoundingClientRect();
          const top = Math.max(box.top, 0), bottom = Math.min(box.bottom, innerHeight);
          if (bottom <= top) return "off screen";
          const hit = document.elementFromPoint(box.left + box.width / 2, (top + bottom) / 2);
          return el.contains(hit) ? null : (hit.className || hit.tagName);
        }""",
        selector,
    )


def test_on_a_phone_the_filters_scroll_away_and_never_cover_the_card(
    new_context, daphne_server, people, submit, artifacts_dir
):
    for _ in range(3):
        submit("send_email")
    long = submit("send_email", params={"to": ["dana@example.com"], "subject": "Numbers", "body": LONG_BODY})
    phone = signed_in(new_context, daphne_server, "bob", **PHONE)
    select_card(phone, long.pk)
    card = f"#card-{long.pk}"
    phone.evaluate("document.getElementById('flash-stack').replaceChildren()")  # the sign-in toast fades on its own
    for fraction in (0.3, 0.6, 0.9):
        phone.evaluate(
            "([selector, f]) => { const box = document.querySelector(selector).getBoundingClientRect();"
            " window.scrollTo(0, scrollY + box.top + box.height * f - innerHeight / 2); }",
            [f"{card} .card-body", fraction],
        )
        assert covered_by(phone, card) is None, fraction  # nothing but the card's own parts
        sidebar = phone.locator(".sidebar").bounding_box()
        assert sidebar["y"] + sidebar["height"] <= 0 or sidebar["y"] >= 844, "the sidebar stays on screen"
    phone.screenshot(path=str(artifacts_dir / "phone-scrolled-card.png"))
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390


def test_the_phone_header_is_one_line_and_its_menu_opens_the_pages_and_sign_out(new_context, daphne_server, people):
    phone = signed_in(new_context, daphne_server, "alice", **PHONE)
    header = phone.locator(".topbar").bounding_box()
    assert header["height"] <= 56, header
    assert not phone.locator(".mainnav").is_visible() and not phone.locator(".usermenu").is_visible()
    phone.locator("#menu-toggle").click()
    assert phone.locator("#menu-toggle").get_attribute("aria-expanded") == "true"
    for reachable in (".mainnav a[data-nav=history]", ".whoami", ".usermenu button[type=submit]"):
        box = phone.locator(reachable).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, reachable
    phone.keyboard.press("Escape")
    assert not phone.locator(".usermenu").is_visible()


def test_on_a_desktop_the_header_has_no_menu_button(logged_in_page, people):
    alice = logged_in_page("alice", "alice-pw-123!")
    assert not alice.locator("#menu-toggle").is_visible()
    assert alice.locator(".mainnav").is_visible() and alice.locator(".whoami").is_visible()


SUSPENSION_SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "Pay the invoice?"},
        "limit": {"type": "number", "default": 150.13},
        "channel": {"enum": ["email", "sms"], "title": "Channel"},
        "note": {"type": "string", "description": "Why, for the record"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "contact": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    },
    "required": ["approved", "channel"],
}


@pytest.fixture
def suspended(agent, daphne_server):
    """mail-bot pauses a workflow step for a typed answer; returns the request's id."""
    import json
    import urllib.request

    from agents.services import issue_token

    token = issue_token(agent, label="first hour").secret
    body = {
        "title": "Approve the payment",
        "summary": "**Over the limit.** The invoice is above the monthly cap.",
        "workflow_id": "approval-flow",
        "step_id": "approval",
        "idempotency_key": "first-hour-1",
        "suspend_payload": {"amount": 150.13},
        "resume_schema": SUSPENSION_SCHEMA,
    }
    request = urllib.request.Request(
        daphne_server.url + "/api/v1/suspensions/",
        method="POST",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=15) as response:
        return json.load(response)["id"]


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_a_suspension_offers_only_its_answer_form_and_reject_laid_out_in_line(
    new_context, daphne_server, people, suspended, artifacts_dir, viewport
):
    page = signed_in(new_context, daphne_server, "alice", **(PHONE if viewport == "phone" else {}))
    select_card(page, suspended)
    card = page.locator(f"#card-{suspended}")
    card.locator(".respond-form .sf-field").first.wait_for()
    assert card.locator(".approve-form").count() == 0  # no bare Approve that can only fail
    assert card.locator(".edit-details").count() == 0
    assert card.locator(".reject-details summary").is_visible()
    assert card.locator(".respond-form button[type=submit]").inner_text() == "Send answer"
    # The generated fields share one left edge and one width: labels above their inputs.
    lefts = card.locator(".schema-fields > .sf-object > .sf-field > :is(input[type=text], input[type=number], select)")
    boxes = [lefts.nth(i).bounding_box() for i in range(lefts.count())]
    assert len(boxes) >= 3
    assert len({round(box["x"]) for box in boxes}) == 1, boxes
    assert len({round(box["width"]) for box in boxes}) == 1, boxes
    page.keyboard.press("a")  # the approve key takes the reviewer to the form, it sends nothing
    page.locator(".flash", has_text="Answer the step's form").wait_for()
    assert page.evaluate("document.activeElement.closest('.respond-form') !== null")
    card.screenshot(path=str(artifacts_dir / f"suspension-card-{viewport}.png"))
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


LONG_RULE = {
    "name": "mail_to_the_whole_partner_directory_after_hours_" + "x" * 45,
    "priority": 2,
    "action_type": "send_email",
    "risk_level": "high",
    "masked_params": ["subject"],
    "conditions": [{"path": "params.subject", "op": "contains", "value": "Board"}],
}


def test_each_row_says_what_the_request_is_and_marks_the_agents_own_words(
    logged_in_page, people, submit, admin_user, artifacts_dir
):
    from approvals import policy
    from approvals.people import Person

    policy.save_rule(LONG_RULE, actor=Person(admin_user), note="board mail is masked")
    prices = submit("send_email", params={"to": ["a@x.com", "b@x.com"], "subject": "Price change", "body": "b"})
    monday = submit("send_email", params={"to": ["c@x.com"], "subject": "Monday", "body": "b"})
    claimed = submit("send_email", reason="The customer asked for it.\nSecond line.")
    hostile = submit("send_email", reason="<img src=x onerror=alert(document.cookie)> {params[body]}")
    secret = submit("send_email", params={"to": ["d@x.com"], "subject": "Board: secret merger", "body": "b"})
    alice = logged_in_page("alice", "alice-pw-123!")

    def summary(request):
        return alice.locator(f"#row-{request.pk} .row-summary")

    assert summary(prices).inner_text() == "“Price change” to 2 recipient(s)"
    assert summary(monday).inner_text() == "“Monday” to 1 recipient(s)"
    assert "is-agents-own" not in summary(prices).get_attribute("class")
    # The agent's reason is its claim: marked so, first line only.
    assert "is-agents-own" in summary(claimed).get_attribute("class")
    assert summary(claimed).inner_text().endswith("The customer asked for it.")
    assert summary(claimed).locator(".agent-claims-badge").inner_text() == "AGENT"
    # The agent's words are text: no markup runs, no template is filled from them.
    assert summary(hostile).inner_text().endswith("<img src=x onerror=alert(document.cookie)> {params[body]}")
    assert alice.dialogs == [] and alice.locator("#queue-list img").count() == 0
    # A template naming a masked param shows the mask, never the value.
    assert "secret merger" not in alice.locator("#queue-list").inner_text()
    assert summary(secret).inner_text() == "“••••••” to 1 recipient(s)"
    # The summary never replaces the action type and target.
    assert alice.locator(f"#row-{prices.pk} .row-title").inner_text() == "send_email"
    assert "outbox" in alice.locator(f"#row-{prices.pk} .row-target").inner_text()

    # Card glitches: the long rule name wraps inside the card, no "Unknown []" fact.
    select_card(alice, secret.pk)
    card = alice.locator(f"#card-{secret.pk}")
    assert "secret merger" not in card.inner_text()
    assert "Unknown" not in card.locator(".impact").inner_text()
    rule_box, why_box = card.locator(".rule code").bounding_box(), card.locator(".why").bounding_box()
    assert rule_box["x"] + rule_box["width"] <= why_box["x"] + why_box["width"] + 1
    alice.screenshot(path=str(artifacts_dir / "queue-summaries.png"))


def test_the_confirm_names_the_request_not_the_cards_links(logged_in_page, people, submit, critical_wires):
    wire = submit("wire_money", params={"amount": 25000, "to": "ACME", "currency": "EUR"})
    alice = logged_in_page("alice", "alice-pw-123!")
    select_card(alice, wire.pk)
    alice.locator(f"#card-{wire.pk} .approve-form input[type=password]").fill("alice-pw-123!")
    alice.locator(f"#card-{wire.pk} .approve-form button[type=submit]").click()
    alice.locator("#confirm-decision[open]").wait_for()
    text = alice.locator("#confirm-decision .confirm-what").inner_text()
    assert text == "wire_money from mail-bot on behalf of rita: 25000 EUR to ACME."
    assert "Request page" not in text and "submitted" not in text
    alice.locator("#confirm-decision button[value=cancel]").click()


def test_history_filters_by_outcome_decider_and_day_and_says_answered_for_a_suspension(
    logged_in_page, people, submit, suspended, artifacts_dir
):
    from datetime import timedelta

    from django.utils import timezone

    from approvals import services
    from approvals.models import ApprovalRequest
    from approvals.people import Person
    from tests.fixtures.revisions import current_revision

    by_alice = submit("send_email", params={"to": ["a@x.com"], "subject": "One", "body": "b"})
    by_bob = submit("send_email", params={"to": ["b@x.com"], "subject": "Two", "body": "b"})
    old = submit("send_email", params={"to": ["c@x.com"], "subject": "Three", "body": "b"})
    services.approve(by_alice.pk, revision=current_revision(by_alice.pk), actor=Person(people["alice"]))
    services.reject(by_bob.pk, revision=current_revision(by_bob.pk), actor=Person(people["bob"]), feedback="no")
    services.reject(old.pk, revision=current_revision(old.pk), actor=Person(people["bob"]), feedback="no")
    ApprovalRequest.objects.filter(pk=old.pk).update(decided_at=timezone.now() - timedelta(days=10))
    carol = logged_in_page("carol", "carol-pw-123!")

    # The suspension is answered through its form; the toast names it by its title.
    carol.goto("/")
    select_card(carol, suspended)
    form = carol.locator(f"#card-{suspended} form.respond-form")
    form.locator(".sf-field").first.wait_for()
    form.get_by_label("approved").check()
    form.get_by_label("Channel").select_option(label="sms")
    form.locator("fieldset.sf-object").get_by_label("name").fill("Dana")
    form.locator("button[type=submit]").click()
    toast = carol.locator(".flash", has_text="Approve the payment")
    toast.wait_for()
    assert "approval-flow.approval" not in toast.inner_text() and "answered" in toast.inner_text()

    carol.goto("/history/")
    row_of = {
        r: carol.locator("tr.history-row", has=carol.locator(f"a[href='/requests/{r.pk}/']"))
        for r in (by_alice, by_bob, old)
    }
    answered = carol.locator("tr.history-row", has=carol.locator(f"a[href='/requests/{suspended}/']"))
    assert "Edited" not in answered.inner_text() and "Answered by carol" in answered.inner_text()
    assert all(row.count() == 1 for row in row_of.values())

    carol.select_option("#f-outcome", "rejected")
    carol.click("#filters button[type=submit]")
    carol.wait_for_url("**/history/?*outcome=rejected*")
    assert row_of[by_alice].count() == 0 and row_of[by_bob].count() == 1 and row_of[old].count() == 1

    carol.select_option("#f-decided-by", "bob")
    carol.fill("#f-decided-from", (timezone.localdate() - timedelta(days=1)).isoformat())
    carol.click("#filters button[type=submit]")
    carol.wait_for_url("**decided_by=bob**")
    assert row_of[by_bob].count() == 1 and row_of[old].count() == 0 and row_of[by_alice].count() == 0
    assert carol.locator("#f-decided-by").input_value() == "bob"  # the filters in use stay selected
    carol.screenshot(path=str(artifacts_dir / "history-filters.png"))

    carol.goto("/history/?decided_by=alice")  # an approver of it decided it, too
    assert row_of[by_alice].count() == 1 and row_of[by_bob].count() == 0


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_approve_and_reject_stay_in_view_while_a_long_card_scrolls(
    new_context, daphne_server, people, submit, artifacts_dir, viewport
):
    long = submit("send_email", reason="\n".join(f"Line {i} of why." for i in range(60)))
    page = signed_in(new_context, daphne_server, "carol", **(PHONE if viewport == "phone" else {}))
    select_card(page, long.pk)
    page.evaluate("document.getElementById('flash-stack').replaceChildren()")  # the sign-in toast fades on its own
    card = f"#card-{long.pk}"
    height = page.viewport_size["height"]
    assert page.locator(card).bounding_box()["height"] > 1.5 * height  # long: the bar would be below the fold
    page.locator(f"{card} .card-body").scroll_into_view_if_needed()
    page.evaluate(
        "(selector) => document.querySelector(selector).scrollIntoView({block: 'start'})", f"{card} .agent-claims"
    )
    for selector in (f"{card} .approve-form button[type=submit]", f"{card} .reject-details summary"):
        box = page.locator(selector).bounding_box()
        assert box and 0 <= box["y"] and box["y"] + box["height"] <= height, (selector, box)
        assert covered_by(page, selector) is None, selector
    assert covered_by(page, f"{card} .agent-claims") is None  # the card is visible above the bar
    page.screenshot(path=str(artifacts_dir / f"sticky-actions-{viewport}.png"))
    page.keyboard.press("r")  # the bar's controls work where they stand
    page.locator(f"{card} details.reject-details[open] textarea").wait_for()


def test_the_queue_opens_on_its_first_row_and_the_selection_is_in_the_url_and_kept_on_reload(
    logged_in_page, people, submit, critical_wires
):
    wire = submit("wire_money", params={"amount": 5})  # critical: first in the urgency order
    emails = [submit("send_email"), submit("send_email")]
    alice = logged_in_page("alice", "alice-pw-123!")
    alice.locator(f"#row-{wire.pk}[aria-selected=true]").wait_for()
    alice.locator(f"#card-{wire.pk}.is-selected").wait_for()
    assert alice.evaluate("location.hash") == f"#selected={wire.pk}"

    alice.keyboard.press("j")
    second = alice.locator("#queue-list .queue-row").nth(1).get_attribute("data-id")
    alice.locator(f"#card-{second}.is-selected").wait_for()
    assert alice.evaluate("location.hash") == f"#selected={second}"
    assert second in {str(e.pk) for e in emails}
    history_length = alice.evaluate("history.length")

    alice.reload()
    alice.locator(f"#card-{second}.is-selected").wait_for()
    assert alice.locator(f"#row-{second}").get_attribute("aria-selected") == "true"
    assert alice.evaluate("history.length") == history_length  # j/k replace, they do not push

    # A link naming a request that is no longer in the queue opens on the first row instead.
    alice.goto(f"/#selected={'0' * 8}-0000-0000-0000-{'0' * 12}")
    alice.reload()
    alice.locator(f"#card-{wire.pk}.is-selected").wait_for()
    assert alice.evaluate("location.hash") == f"#selected={wire.pk}"
