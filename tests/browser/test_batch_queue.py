"""A batch on the queue in a real browser (Debian chromium, real daphne): calls an
agent submitted together arrive as one group, are approved all at once with the
single approval's confirm and undo (Playwright's clock drives the undo window), and
a member the core refuses is shown refused, with why, while the others are decided.
Also: the card's link to its request page, and presence that outlives a lost "gone"
no longer than its heartbeat allows."""

from __future__ import annotations

import os
import shutil

import pytest

from agents.services import issue_token
from approvals import policy, services
from approvals.models import ApprovalRequest, Decision
from approvals.people import Person
from approvals.states import Kind, State
from audit.models import AuditEvent
from tests.browser.conftest import signed_in_page
from tests.browser.test_inbox import DOCS_SCREENSHOTS, MANY, UNDO_MS, api, select, with_clock
from tests.browser.test_passkeys import _signed_in_with_a_passkey

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EMAIL = {"to": ["dana@example.com"], "subject": "Hi", "body": "Hello"}


def group_head(page):
    return page.locator("#queue-list .queue-row.group-row")


def submit_batch(server_url: str, token: str, batch_id: str, n: int = 3) -> list[str]:
    """n tool calls of one interrupt, through the agent API as a host sends them."""
    return [
        api(
            server_url,
            token,
            "/api/v1/actions/",
            {
                "action_type": "send_email",
                "target": {"mailbox": "outbox"},
                "params": {**EMAIL, "subject": f"Call {i}"},
                "idempotency_key": f"{batch_id}-{i}",
                "batch_id": batch_id,
                "run_id": "run-7",
                "tool_call_id": f"call-{i}",
            },
        )["id"]
        for i in range(n)
    ]


def test_three_calls_of_one_step_arrive_as_one_group_and_approve_all_decides_each(
    require_redis, logged_in_page, people, agent, daphne_server
):
    token = issue_token(agent, label="t").secret
    alice = with_clock(logged_in_page("alice", "alice-pw-123!"))
    ids = submit_batch(daphne_server.url, token, "interrupt-1")
    head = group_head(alice)
    head.wait_for()
    assert "3 calls from run run-7 · batch interrupt-1" in head.inner_text()
    for request_id in ids:
        alice.locator(f"#row-{request_id}.in-group").wait_for()
    listed = alice.locator("#queue-list .queue-row").evaluate_all("(rows) => rows.map((row) => row.dataset.id)")
    assert listed[0] == head.get_attribute("data-id") and set(listed[1:4]) == set(ids)

    group_id = head.get_attribute("data-id")
    # The batch arrived live into an empty queue, so nothing is selected yet (only opening
    # the queue selects its first row): j lands on the header; the pane lists each member.
    alice.keyboard.press("j")
    pane = alice.locator(f"#card-{group_id}.is-selected")
    pane.wait_for()
    assert pane.locator("tr[data-member]").count() == 3 and "Call 1" in pane.inner_text()
    alice.keyboard.press("a")  # plain a on a header approves nothing: it says what Shift+A does
    alice.locator("#flash-stack .flash").filter(has_text="Shift+A").wait_for()
    assert alice.locator("#undo-toast").is_hidden()
    alice.keyboard.press("Shift+A")
    alice.locator("#undo-toast").wait_for()
    assert not Decision.objects.filter(request_id__in=ids).exists()  # held: nothing sent yet
    alice.clock.run_for(UNDO_MS)
    alice.locator("#flash-stack .flash-success").filter(has_text="3 of 3 approved").wait_for()
    head.wait_for(state="detached")
    for request_id in ids:
        assert ApprovalRequest.objects.get(pk=request_id).state == State.APPROVED
        assert Decision.objects.filter(request_id=request_id, reviewer=people["alice"]).count() == 1
        assert AuditEvent.objects.filter(request_id=request_id, verb="decision.recorded").count() == 1


def test_a_member_the_reviewer_may_not_approve_is_shown_refused_and_the_rest_decided(
    logged_in_page, people, submit, critical_wires, artifacts_dir
):
    fine = submit("send_email", batch_id="step-9", run_id="run-9")
    for_alice = submit("send_email", batch_id="step-9", run_id="run-9", requested_for=people["alice"])
    high = submit("send_email", params=MANY, batch_id="step-9", run_id="run-9")
    submit("wire_money", params={"amount": 25000, "memo": "Supplier invoice 4411"})
    alice = with_clock(logged_in_page("alice", "alice-pw-123!"))
    head = group_head(alice)
    group_id = head.get_attribute("data-id")
    select(alice, group_id)
    pane = alice.locator(f"#card-{group_id}")
    assert "You are the person this action is for" in pane.locator(f"tr[data-member='{for_alice.pk}']").inner_text()
    alice.screenshot(path=str(artifacts_dir / "queue-batch.png"))
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":  # refresh the docs' picture on purpose only
        shutil.copy(artifacts_dir / "queue-batch.png", DOCS_SCREENSHOTS / "queue-batch.png")

    pane.locator(".approve-all-form button[type=submit]").click()
    alice.locator("#confirm-decision[open]").wait_for()  # its highest member is high: ask first
    assert "high" in alice.locator("#confirm-title").inner_text()
    alice.locator("#confirm-yes").click()
    alice.locator("#undo-toast").wait_for()
    alice.clock.run_for(UNDO_MS)
    refused = pane.locator(f"tr[data-member='{for_alice.pk}'] .member-result.is-refused")
    refused.wait_for()
    assert refused.inner_text().startswith("Refused: The person the action is for")
    assert refused.get_attribute("data-code") == "separation_of_duties"
    assert "1 refused" in pane.locator(".decided-note").inner_text()
    for done in (fine, high):
        assert pane.locator(f"tr[data-member='{done.pk}'] .member-result.is-done").count() == 1
        assert ApprovalRequest.objects.get(pk=done.pk).state == State.APPROVED
    assert ApprovalRequest.objects.get(pk=for_alice.pk).state == State.PENDING_APPROVAL
    assert not Decision.objects.filter(request_id=for_alice.pk).exists()
    alice.locator(f"#row-{for_alice.pk}").wait_for()  # still in the queue, to be decided by someone else

    pane.locator(".dismiss-decided").click()
    alice.locator(f"#card-{group_id}").wait_for(state="detached")


def test_approve_all_of_a_critical_batch_takes_one_passkey_assertion_over_the_whole_batch(
    new_context, daphne_server, people, agent, admin_user
):
    policy.save_rule(
        {"name": "transfers_critical", "priority": 5, "action_type": "transfer_funds", "risk_level": "critical"},
        actor=Person(admin_user),
        note="every transfer is critical",
    )
    batch = [
        services.submit(
            services.Submission(
                kind=Kind.ACTION,
                action_type="transfer_funds",
                params={"amount": amount, "currency": "EUR"},
                target={"account": "ACME-OPS-001"},
                batch_id="payouts",
            ),
            agent=agent,
        )
        for amount in (100, 200, 300)
    ]
    page, _ = _signed_in_with_a_passkey(new_context, daphne_server, people["alice"])
    page = with_clock(page)
    head = group_head(page)
    page.locator("#live-status.is-live").wait_for()  # select once the first sync has replaced the served rows
    select(page, head.get_attribute("data-id"))
    page.keyboard.press("Shift+A")
    page.locator("#confirm-decision[open]").wait_for()
    assert "critical" in page.locator("#confirm-title").inner_text()
    page.locator("#confirm-yes").click()
    page.locator("#undo-toast").wait_for()  # the browser signed once, for the batch's digest
    page.clock.run_for(UNDO_MS)
    page.locator("#flash-stack .flash-success").filter(has_text="3 of 3 approved").wait_for()
    assert {r.state for r in ApprovalRequest.objects.filter(pk__in=[r.pk for r in batch])} == {State.APPROVED}
    assert set(Decision.objects.filter(request__in=batch).values_list("step_up_method", flat=True)) == {"passkey"}
    recorded = AuditEvent.objects.filter(verb="decision.recorded", request_id__in=[r.pk for r in batch])
    assert len({event.metadata["step_up_credential"] for event in recorded}) == 1 and recorded.count() == 3


def test_a_batch_fits_a_phone(new_context, daphne_server, people, submit):
    for _ in range(3):
        submit("send_email", params=MANY, batch_id="a-rather-long-batch-id-" + "x" * 60, run_id="run-" + "y" * 80)
    phone = signed_in_page(
        new_context,
        daphne_server,
        "bob",
        "bob-pw-123!",
        viewport={"width": 390, "height": 844},
        is_mobile=True,
        has_touch=True,
    )
    head = group_head(phone)
    head.wait_for()
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    # The page's script selects and re-renders the list once it is live; a tap on the row the
    # server rendered, before that, can land on a row the first sync then replaces.
    phone.locator("#live-status.is-live").wait_for()
    select(phone, head.get_attribute("data-id"))
    phone.locator(".group-card.is-selected details.reject-details summary").click()
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390


def test_the_card_opens_its_request_page(logged_in_page, people, submit):
    request = submit("send_email")
    alice = logged_in_page("alice", "alice-pw-123!")
    select(alice, str(request.pk))
    alice.locator(f"#card-{request.pk} a.request-link").click()
    alice.wait_for_url(f"**/requests/{request.pk}/")
    assert "send_email" in alice.locator("main").inner_text()


def test_a_look_whose_heartbeat_stopped_is_forgotten_and_a_heartbeat_brings_it_back(
    require_redis, logged_in_page, people, submit
):
    """alice's "gone" never comes (her page's timers are frozen, her socket stays open):
    bob's page forgets her after 45 s unheard; her next heartbeat says it again."""
    request = submit("send_email")
    bob = with_clock(logged_in_page("bob", "bob-pw-123!"))
    alice = with_clock(logged_in_page("alice", "alice-pw-123!"))
    select(bob, str(request.pk))
    select(alice, str(request.pk))
    looking = bob.locator(f"#card-{request.pk} .presence")
    bob.wait_for_function(f"() => document.querySelector('#card-{request.pk} .presence').textContent.includes('alice')")
    bob.clock.run_for(50_000)  # 50 s on bob's page without a word from alice
    bob.wait_for_function(f"() => document.querySelector('#card-{request.pk} .presence').hidden")
    alice.clock.run_for(20_000)  # alice's heartbeat
    bob.wait_for_function(f"() => document.querySelector('#card-{request.pk} .presence').textContent.includes('alice')")
    assert "alice is looking at this" in looking.inner_text()
