"""A reviewer adds a passkey and signs in with password + passkey, in Debian's chromium
with a virtual authenticator (Chrome DevTools Protocol `WebAuthn.addVirtualAuthenticator`).

WebAuthn needs a secure context and a domain name as its relying party, so this page
talks to the test server as http://localhost rather than 127.0.0.1.
"""

from __future__ import annotations

import pytest

from approvals import policy, services
from approvals.models import ApprovalRequest, Decision
from approvals.people import Person
from approvals.states import Kind, State
from audit.models import AuditEvent
from tests.browser.conftest import _server_can_check, confirm_decision, select_card

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AUTHENTICATOR = {
    "protocol": "ctap2",
    "transport": "internal",
    "hasResidentKey": True,
    "hasUserVerification": True,
    "isUserVerified": True,
    "automaticPresenceSimulation": True,
}


def on_localhost(url: str) -> str:
    return url.replace("127.0.0.1", "localhost")


def test_add_a_passkey_then_sign_in_with_password_and_passkey(new_context, daphne_server, people):
    _server_can_check(people["alice"], "alice-pw-123!")
    server = on_localhost(daphne_server.url)
    context = new_context(base_url=server)
    page = context.new_page()
    devtools = context.new_cdp_session(page)
    devtools.send("WebAuthn.enable")
    authenticator = devtools.send("WebAuthn.addVirtualAuthenticator", {"options": AUTHENTICATOR})["authenticatorId"]

    def password_step() -> None:
        page.goto("/login/")
        page.fill("#id_login", "alice")
        page.fill("#id_password", "alice-pw-123!")
        page.click("form button[type=submit]")

    password_step()
    page.wait_for_url(server + "/")
    page.goto("/accounts/2fa/webauthn/add/")
    page.fill("input[name=name]", "laptop")
    page.click("#mfa_webauthn_add")
    page.wait_for_url(server + "/accounts/2fa/recovery-codes/")
    assert devtools.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]

    page.click("header button:has-text('Sign out')")
    page.wait_for_url(server + "/login/")
    password_step()
    page.wait_for_url(server + "/accounts/2fa/authenticate/")
    page.click("#mfa_webauthn_authenticate")
    page.wait_for_url(server + "/")

    enrolled = AuditEvent.objects.filter(verb="auth.mfa_enrolled", actor_label="alice")
    assert "webauthn" in {event.metadata["type"] for event in enrolled}
    latest = AuditEvent.objects.filter(verb="auth.signed_in", actor_label="alice").order_by("-seq").first()
    assert latest.metadata["methods"] == ["password", "webauthn"]


DECIDE_BY_API = """async ({ a, b, revision }) => {
  const csrf = document.querySelector("meta[name=csrf-token]").content;
  const post = async (url, body) => {
    const answer = await fetch(url, { method: "POST", body: JSON.stringify(body), headers: {
      "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf } });
    return { status: answer.status, body: await answer.json() };
  };
  const decide = (id, step_up) => post(`/api/v1/requests/${id}/decisions/`, { decision: "approve", revision, step_up });
  const signFor = async (id) => {
    const challenge = await post("/api/v1/step-up/challenges/", { decision: "approve", requests: [{ id, revision }] });
    const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(challenge.body.publicKey);
    const credential = await navigator.credentials.get({ publicKey });
    return { method: "passkey", nonce: challenge.body.nonce, assertion: credential.toJSON() };
  };
  const bare = await decide(a);
  const byPassword = await decide(a, { method: "password", password: "alice-pw-123!" });
  const madeForA = await signFor(a);
  const onB = await decide(b, madeForA);
  const forA = await signFor(a);
  const onA = await decide(a, forA);
  const replayed = await decide(b, forA);
  return { bare, byPassword, onB, onA, replayed };
}"""


def test_a_critical_decision_takes_a_passkey_assertion_made_for_it_once(
    new_context, daphne_server, people, agent, admin_user
):
    policy.save_rule(
        {"name": "transfers_critical", "priority": 5, "action_type": "transfer_funds", "risk_level": "critical"},
        actor=Person(admin_user),
        note="every transfer is critical",
    )
    a, b, on_card = (
        services.submit(
            services.Submission(
                kind=Kind.ACTION,
                action_type="transfer_funds",
                params={"amount": amount, "currency": "EUR"},
                target={"account": "ACME-OPS-001"},
            ),
            agent=agent,
        )
        for amount in (100, 200, 300)
    )
    page, server = _signed_in_with_a_passkey(new_context, daphne_server, people["alice"])

    select_card(page, on_card.pk)
    card = page.locator(f"#card-{on_card.pk}")
    card.get_by_text("with your passkey").wait_for()
    card.locator(".approve-form button[type=submit]").click()
    confirm_decision(page)  # critical: asked explicitly, then held for the undo window
    card.wait_for(state="detached")
    assert ApprovalRequest.objects.get(pk=on_card.pk).state == State.APPROVED
    vote = Decision.objects.get(request=on_card)
    assert vote.step_up_method == "passkey"
    recorded = AuditEvent.objects.get(verb="decision.recorded", request_id=on_card.pk)
    assert recorded.metadata["step_up"] == "passkey" and recorded.metadata["step_up_credential"]

    answers = page.evaluate(DECIDE_BY_API, {"a": str(a.pk), "b": str(b.pk), "revision": 1})
    assert answers["bare"]["status"] == 403 and answers["bare"]["body"]["code"] == "step_up_required"
    assert answers["byPassword"]["body"]["details"]["method"] == "passkey"
    assert answers["onB"]["status"] == 403 and answers["onB"]["body"]["code"] == "step_up_failed"
    assert answers["onA"]["status"] == 200 and answers["onA"]["body"]["state"] == "approved"
    assert answers["replayed"]["status"] == 403
    assert ApprovalRequest.objects.get(pk=b.pk).state == State.PENDING_APPROVAL


def _signed_in_with_a_passkey(new_context, daphne_server, user):
    """A page on http://localhost signed in as `user`, who has just added a passkey."""
    _server_can_check(user, "alice-pw-123!")
    server = on_localhost(daphne_server.url)
    context = new_context(base_url=server)
    page = context.new_page()
    devtools = context.new_cdp_session(page)
    devtools.send("WebAuthn.enable")
    devtools.send("WebAuthn.addVirtualAuthenticator", {"options": AUTHENTICATOR})
    page.goto("/login/")
    page.fill("#id_login", user.get_username())
    page.fill("#id_password", "alice-pw-123!")
    page.click("form button[type=submit]")
    page.wait_for_url(server + "/")
    page.goto("/accounts/2fa/webauthn/add/")
    page.click("#mfa_webauthn_add")
    page.wait_for_url(server + "/accounts/2fa/recovery-codes/")
    page.goto("/")
    return page, server
