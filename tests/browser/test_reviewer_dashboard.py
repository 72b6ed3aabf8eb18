"""Reviewers in a real browser (Debian chromium) against the real daphne server:
live cards, decisions reaching the agent, and plans that cannot run script."""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.request
from pathlib import Path

import pytest

from approvals import policy, services
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import Kind, State
from tests.fixtures.revisions import current_revision

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DOCS_SCREENSHOTS = Path(__file__).resolve().parent.parent.parent / "docs" / "screenshots"


def api(server_url: str, token: str, method: str, path: str, body: dict | None = None) -> dict:
    """Call the agent API the way an agent does: bearer token, JSON, no cookies."""
    request = urllib.request.Request(
        server_url + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=15) as response:
        return json.load(response)


def settle(page) -> None:
    """Wait until every image on the page has loaded or failed (what fires onload and
    onerror) and the tasks queued before now (a clicked link's navigation) have run.

    A dialog any of them opened blocks the page until the test's handler dismisses
    it (and records it in `page.dialogs`), so it is recorded by the time this returns.
    """
    page.evaluate("""() => Promise.all([...document.images].map((image) => image.complete ? null
        : new Promise((done) => { image.addEventListener("load", done); image.addEventListener("error", done); })))
        .then(() => new Promise((done) => setTimeout(done)))""")


@pytest.fixture
def submit_demo(agent, people, admin_user):
    """A realistic queue: an email, a mass mailing, a critical two-person transfer, a revised plan."""

    def _submit() -> None:
        policy.save_rule(
            {
                "name": "transfer_funds_critical",
                "priority": 5,
                "action_type": "transfer_funds",
                "risk_level": "critical",
                "required_approvals": 2,
                "editable_params": ["amount", "memo"],
                "conditions": [{"path": "impact.amount", "op": "gt", "value": 10000}],
            },
            actor=Person(admin_user),
            note="large transfers need two people",
        )
        rita = people["rita"]

        def action(action_type, params, target, **extra):
            return services.submit(
                services.Submission(
                    kind=Kind.ACTION, action_type=action_type, params=params, target=target, requested_for=rita, **extra
                ),
                agent=agent,
            )

        action(
            "send_email",
            {"to": ["dana@example.com"], "subject": "Quarterly numbers", "body": "Attached."},
            {"mailbox": "outbox"},
        )
        action(
            "send_email",
            {
                "to": [f"customer{i}@example.com" for i in range(14)],
                "subject": "Price change",
                "body": "Prices change on Monday.",
            },
            {"mailbox": "outbox", "list": "customers"},
        )
        transfer = action(
            "transfer_funds",
            {"amount": 25000, "currency": "EUR", "memo": "Supplier invoice 4411", "to_iban": "DE89370400440532013000"},
            {"account": "ACME-OPS-001"},
        )
        services.approve(
            transfer.pk,
            revision=current_revision(transfer.pk),
            actor=services.Person(people["bob"], step_up=services.StepUpProof.password("bob-pw-123!")),
        )
        first = services.submit(
            services.Submission(
                kind=Kind.PLAN,
                plan_path="plans/migrate-orders.md",
                plan_title="Migrate the orders database",
                plan_markdown="# Migrate the orders database\n\n1. Snapshot\n2. Run migrations\n3. Switch traffic\n",
            ),
            agent=agent,
        )
        services.reject(
            first.pk,
            revision=current_revision(first.pk),
            actor=services.Person(people["carol"]),
            feedback="Add a rollback step and the expected downtime.",
        )
        services.submit(
            services.Submission(
                kind=Kind.PLAN,
                plan_path="plans/migrate-orders.md",
                plan_title="Migrate the orders database",
                supersedes=first,
                plan_markdown=(
                    "# Migrate the orders database\n\n1. Snapshot\n2. Run migrations **in one transaction**\n"
                    "3. Switch traffic (about 30 s read-only)\n4. Rollback: restore the snapshot\n"
                ),
            ),
            agent=agent,
        )

    return _submit


def card(page, request_id: str):
    return page.locator(f"#card-{request_id}")


def test_two_reviewers_see_a_card_live_and_one_approval_removes_it_for_both(
    require_redis, logged_in_page, people, agent_token, daphne_server, artifacts_dir
):
    alice = logged_in_page("alice", "alice-pw-123!")
    bob = logged_in_page("bob", "bob-pw-123!")
    for page in (alice, bob):
        page.locator("#live-status.is-live").wait_for()

    submitted = api(
        daphne_server.url,
        agent_token,
        "POST",
        "/api/v1/actions/",
        {
            "action_type": "send_email",
            "target": {"mailbox": "outbox"},
            "params": {"to": ["dana@example.com"], "subject": "Quarterly numbers", "body": "Numbers attached."},
            "idempotency_key": "browser-approve-1",
        },
    )
    request_id = submitted["id"]

    for page in (alice, bob):  # no reload: the socket brought it (a row; its card shows once selected)
        page.locator(f"#row-{request_id}").wait_for()
        assert re.match(r"^\(1\) Queue", page.title())
    assert "Numbers attached." not in alice.content()  # the body is masked by the seeded rule
    alice.screenshot(path=str(artifacts_dir / "queue-live-card.png"))

    alice.clock.install()  # the approval is held for its undo window; the test moves the clock past it
    alice.reload()
    alice.locator("#live-status.is-live").wait_for()
    alice.locator(f"#row-{request_id}").click()
    alice.locator(f"#card-{request_id} .approve-form button[type=submit]").click()
    alice.locator("#undo-toast").wait_for()
    alice.clock.run_for(5000)
    card(bob, request_id).wait_for(state="detached")
    card(alice, request_id).wait_for(state="detached")
    # Counts come from the server's resync after the push, never counted down in the browser.
    bob.wait_for_function("() => document.title.startsWith('Queue')")
    assert alice.locator("#empty-state").is_visible()

    assert ApprovalRequest.objects.get(pk=request_id).state == State.APPROVED
    resume = api(daphne_server.url, agent_token, "GET", f"/api/v1/requests/{request_id}/resume/")
    assert resume["resume_data"]["action"] == "approved"


def test_rejection_feedback_reaches_the_agent_verbatim(
    require_redis, logged_in_page, people, agent_token, daphne_server
):
    bob = logged_in_page("bob", "bob-pw-123!")
    bob.locator("#live-status.is-live").wait_for()
    submitted = api(
        daphne_server.url,
        agent_token,
        "POST",
        "/api/v1/plans/",
        {
            "path": "plans/rotate-keys.md",
            "plan": "# Rotate the API keys\n\n1. Issue new keys\n2. Revoke the old ones at once\n",
            "idempotency_key": "browser-reject-1",
        },
    )
    request_id = submitted["id"]
    bob.locator(f"#row-{request_id}").wait_for()
    feedback = 'Keep the old keys for 24 hours: clients "cache" them <and> some retry late.'
    bob.keyboard.press("j")
    bob.keyboard.press("r")
    bob.keyboard.type(feedback)
    bob.keyboard.press("Control+Enter")
    card(bob, request_id).wait_for(state="detached")

    resume = api(daphne_server.url, agent_token, "GET", f"/api/v1/requests/{request_id}/resume/")
    assert resume["state"] == "rejected"
    assert resume["resume_data"]["action"] == "rejected"
    assert resume["resume_data"]["feedback"] == feedback


def test_a_hostile_plan_renders_inert(logged_in_page, people, agent_token, daphne_server, artifacts_dir):
    hostile = (
        "# Innocent plan\n\n"
        "<script>alert('script')</script>\n\n"
        "<img src=x onerror=\"alert('onerror')\">\n\n"
        "[click me](javascript:alert('link'))\n\n"
        "<a href=\"javascript:alert('raw link')\">raw</a>\n\n"
        "1. Do the **real** work\n"
    )
    submitted = api(
        daphne_server.url,
        agent_token,
        "POST",
        "/api/v1/plans/",
        {
            "path": "plans/hostile.md",
            "plan": hostile,
            "idempotency_key": "browser-xss-1",
        },
    )
    alice = logged_in_page("alice", "alice-pw-123!")
    alice.locator(f"#row-{submitted['id']}").click()  # the pane shows the selected request
    plan = card(alice, submitted["id"]).locator(".plan")
    plan.wait_for()
    assert plan.locator("strong").inner_text() == "real"
    alice.locator(f"#card-{submitted['id']}").click()
    settle(alice)  # any handler that slipped through has had its chance to fire

    assert alice.dialogs == []
    assert plan.locator("script, img, iframe, svg, [onerror], [onload], [style]").count() == 0
    assert alice.locator("a[href^='javascript' i]").count() == 0
    # No inline script anywhere on the page; JSON data blocks (the error codes) are never run.
    assert alice.locator("script:not([src]):not([type='application/json'])").count() == 0
    card(alice, submitted["id"]).screenshot(path=str(artifacts_dir / "card-hostile-plan.png"))


def test_screenshots_of_a_busy_queue(logged_in_page, people, agent_token, daphne_server, artifacts_dir, submit_demo):
    submit_demo()
    alice = logged_in_page("alice", "alice-pw-123!")
    alice.locator(".queue-row").first.wait_for()
    alice.keyboard.press("j")
    alice.screenshot(path=str(artifacts_dir / "queue.png"))
    alice.locator(".queue-row.risk-red").first.click()
    critical = alice.locator(".card.risk-red.is-selected")
    critical.screenshot(path=str(artifacts_dir / "card-critical.png"))
    alice.keyboard.press("?")
    alice.locator("#shortcuts[open]").wait_for()
    alice.screenshot(path=str(artifacts_dir / "shortcuts.png"))
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":  # refresh the README's pictures on purpose only
        DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for name in ("card-critical.png",):  # the queue's own pictures: tests/browser/test_inbox.py
            shutil.copy(artifacts_dir / name, DOCS_SCREENSHOTS / name)
