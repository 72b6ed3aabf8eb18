"""A reviewer adds a passkey and signs in with password + passkey, in Debian's chromium
with a virtual authenticator (Chrome DevTools Protocol `WebAuthn.addVirtualAuthenticator`).

WebAuthn needs a secure context and a domain name as its relying party, so this page
talks to the test server as http://localhost rather than 127.0.0.1.
"""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from tests.browser.conftest import _server_can_check

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AUTHENTICATOR = {"protocol": "ctap2", "transport": "internal", "hasResidentKey": True,
                 "hasUserVerification": True, "isUserVerified": True, "automaticPresenceSimulation": True}


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

