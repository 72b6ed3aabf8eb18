"""A reviewer adds an authenticator app in the browser, signs in with it, and decides a
critical request with its code: the pages allauth serves in the site's shell, and the
card's step-up field asking for a code instead of the password."""

from __future__ import annotations

import time

import pytest

from approvals import policy, services
from approvals.models import ApprovalRequest, Decision
from approvals.people import Person
from approvals.states import Kind, State
from tests.browser.conftest import confirm_decision, select_card
from tests.identity.conftest import totp_code

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

STEP = 30


def test_enroll_an_app_sign_in_with_it_and_decide_a_critical_request_with_a_code(
    logged_in_page, people, agent, admin_user
):
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
    server = alice.server_url

    alice.click("text=Two-factor")
    alice.goto("/accounts/2fa/totp/activate/")
    secret = alice.locator("#authenticator_secret").input_value()
    alice.fill("input[name=code]", totp_code(secret, time.time()))
    alice.click("main form button[type=submit]")
    alice.wait_for_url(server + "/accounts/2fa/recovery-codes/")

    alice.click("header button:has-text('Sign out')")
    alice.wait_for_url(server + "/login/")
    alice.fill("#id_login", "alice")
    alice.fill("#id_password", "alice-pw-123!")
    alice.click("form button[type=submit]")
    alice.wait_for_url(server + "/accounts/2fa/authenticate/")
    alice.fill("input[name=code]", totp_code(secret, time.time()))
    alice.click("main form button[type=submit]")
    alice.wait_for_url(server + "/")

    select_card(alice, transfer.pk)
    card = alice.locator(f"#card-{transfer.pk}")
    field = card.locator(".approve-form input[name=code]")
    assert card.locator(".approve-form input[name=password]").count() == 0
    field.fill(totp_code(secret, time.time() + STEP))  # the current code was spent signing in
    card.locator(".approve-form button[type=submit]").click()
    confirm_decision(alice)  # critical: asked explicitly, then held for the undo window
    card.wait_for(state="detached")
    assert ApprovalRequest.objects.get(pk=transfer.pk).state == State.APPROVED
    assert Decision.objects.get(request=transfer).step_up_method == "totp"
