"""The pages' scripts in a real browser (Debian chromium) against the real daphne server:
they load as ES modules under the site's CSP without a console error, branch on the
error codes the server hands them (a name it does not register throws), and keep
the emergency banner in the server's own words."""

from __future__ import annotations

import subprocess
import sys

import pytest
from playwright.sync_api import expect

from approvals import policy, services
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import Kind, State
from controlplane.http.codes import as_script_data
from tests.live import ROOT, child_environment

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def watch_for_errors(page) -> list[str]:
    """Every console error and uncaught exception from now on (a CSP refusal is a console error)."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def scripts(page) -> list[tuple[str, str]]:
    """(src, type) of every external script on the page."""
    found = page.eval_on_selector_all("script[src]", "els => els.map(e => [e.getAttribute('src'), e.type])")
    return [tuple(pair) for pair in found]


def test_every_page_script_loads_as_a_module_and_runs_without_a_console_error(logged_in_page, people, admin_user):
    alice = logged_in_page("alice", "alice-pw-123!")
    errors = watch_for_errors(alice)
    alice.reload()
    assert scripts(alice) == [
        ("/static/js/topbar.js", "module"),
        ("/static/js/queue.js", "module"),
        ("/static/js/reveal.js", "module"),
    ]
    assert errors == []  # modules run before the load event that reload() waits for
    alice.locator("#live-status.is-live").wait_for()  # the socket connected
    alice.keyboard.press("?")
    alice.locator("#shortcuts[open]").wait_for()  # the shortcuts are bound

    page = logged_in_page(admin_user, "ada-pw-123!")
    errors += watch_for_errors(page)
    page.goto("/rules/")
    assert scripts(page) == [("/static/js/topbar.js", "module"), ("/static/rules/list.js", "module")]
    assert errors == []
    page.locator("#rules-table tbody tr[data-rule] .move-down").first.click()
    page.locator("#reorder-bar").wait_for()  # reordering shows the save bar

    page.goto("/rules/send_email_default/edit/")
    assert scripts(page) == [("/static/js/topbar.js", "module"), ("/static/rules/editor.js", "module")]
    assert errors == []
    # A GET. A locator wait, not wait_for_function: a string predicate polled after its
    # first try is eval'd in the page, which the CSP (rightly) refuses.
    expect(page.locator("#sample-pick option").first).not_to_have_text("(loading…)")
    page.fill("#f-priority", "7")
    page.wait_for_selector("#validation.valid")  # a JSON POST, CSRF token included

    assert errors == []


def test_a_code_the_server_does_not_register_throws(logged_in_page, people):
    alice = logged_in_page("alice", "alice-pw-123!")
    outcome = alice.evaluate("""async () => {
        const { CODES } = await import("/static/js/codes.js");
        const read = (name) => { try { return ["value", CODES[name]]; } catch (e) { return [e.name, e.message]; } };
        return {
            known: read("STEP_UP_REQUIRED"),
            unknown: read("STEP_UP_NEEDED"),
            lowercase: read("step_up_required"),
            table: Object.fromEntries(Object.entries(CODES)),
        };
    }""")
    assert outcome["known"] == ["value", "step_up_required"]
    assert outcome["unknown"][0] == "UnknownErrorCode" and "STEP_UP_NEEDED" in outcome["unknown"][1]
    assert outcome["lowercase"][0] == "UnknownErrorCode"
    # The page holds the server's table: every code registered in this process, named the same way.
    assert as_script_data().items() <= outcome["table"].items()
    assert all(value.upper() == name for name, value in outcome["table"].items())


def test_a_wrong_step_up_password_is_refused_and_the_field_asks_again(logged_in_page, people, agent, admin_user):
    policy.save_rule(
        {"name": "transfers_critical", "priority": 5, "action_type": "transfer_funds", "risk_level": "critical"},
        actor=Person(admin_user),
        note="every transfer is critical",
    )
    transfer = services.submit(
        services.Submission(
            kind=Kind.ACTION,
            action_type="transfer_funds",
            params={"amount": 900, "currency": "EUR"},
            target={"account": "ACME-OPS-001"},
        ),
        agent=agent,
    )
    alice = logged_in_page("alice", "alice-pw-123!")
    alice.clock.install()  # the approval is held for its undo window; the test runs the clock past it
    alice.reload()
    errors = watch_for_errors(alice)
    alice.locator(f"#row-{transfer.pk}").click()
    card = alice.locator(f"#card-{transfer.pk}")
    password = card.locator(".approve-form input[type=password]")
    password.fill("not-my-password")
    card.locator(".approve-form button[type=submit]").click()
    alice.locator("#confirm-yes").click()  # critical: asked first
    alice.locator("#undo-toast").wait_for()
    alice.clock.run_for(5000)

    alice.locator(".flash-warning", has_text="not right").wait_for()  # the step_up_failed branch
    assert password.input_value() == ""
    assert password.evaluate("field => field === document.activeElement")
    assert card.is_visible()
    assert ApprovalRequest.objects.get(pk=transfer.pk).state == State.PENDING_APPROVAL
    assert not [e for e in errors if "403" not in e]  # the refusal's 403 is the only console noise


def emergency_stop(*args: str) -> None:
    """Switch the stop the way an operator does, in a process of its own (its push to the
    reviewers' sockets goes through Redis, like the server's)."""
    done = subprocess.run(
        [sys.executable, "manage.py", "emergency_stop", *args],
        cwd=ROOT,
        env=child_environment(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_the_emergency_banner_follows_the_stop_live_in_the_servers_words(require_redis, logged_in_page, people, agent):
    alice = logged_in_page("alice", "alice-pw-123!")
    alice.locator("#live-status.is-live").wait_for()
    banner = alice.locator("#emergency-banner")
    assert banner.is_hidden()

    emergency_stop("--reason", "drill")
    banner.wait_for()
    assert "is on for every agent" in banner.inner_text()

    emergency_stop("--off")
    banner.wait_for(state="hidden")

    emergency_stop("--agent", agent.name)
    alice.locator(".emergency-detail[data-scope=agents]:visible").wait_for()
    live = banner.inner_text()
    assert f"is on for {agent.name}: nothing of theirs" in live and "every agent" not in live
    alice.reload()  # what the server renders is what the script showed
    assert banner.inner_text() == live

    alice.locator("#live-status.is-live").wait_for()
    emergency_stop("--agent", agent.name, "--off")
    banner.wait_for(state="hidden")
