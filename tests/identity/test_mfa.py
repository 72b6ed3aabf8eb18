"""Second factors through allauth.mfa: an authenticator app (TOTP) with recovery codes.

alice enrolls an authenticator app; from then on her password alone no longer signs her
in: the code her app shows now (computed here from the secret, at a frozen clock) does,
and each of her recovery codes does exactly once. Who may decide critical requests must
enroll at their first sign-in. Every enrollment, removal and spent recovery code is in
the audit chain.
"""

from __future__ import annotations

import time

from django.contrib.auth.models import Group
from django.test import Client

from approvals import policy
from approvals.people import Person
from approvals.permissions import RISK_ADMINS
from audit.chain import verify_chain
from audit.models import AuditEvent
from controlplane.accounts.mfa_policy import required_groups

from .conftest import ACTIVATE, sign_in, totp_code

AUTHENTICATE = "/accounts/2fa/authenticate/"
RECOVERY_CODES = "/accounts/2fa/recovery-codes/"


def events(verb: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(verb=verb).order_by("seq"))


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def recovery_codes(client: Client) -> list[str]:
    return list(client.get(RECOVERY_CODES).context["unused_codes"])


def password_step(username: str) -> Client:
    """A new client past the password, at the second-factor step."""
    client = Client()
    response = sign_in(client, username)
    assert response.status_code == 302 and response["Location"].startswith(AUTHENTICATE)
    assert not signed_in(client)
    return client


def test_after_enrolling_the_password_alone_no_longer_signs_in_but_the_current_code_does(
    people, clock, nobody_required, enroll_totp
):
    alice = Client()
    sign_in(alice, "alice")
    secret = enroll_totp(alice)
    enrolled = {event.metadata["type"] for event in events("auth.mfa_enrolled")}
    assert enrolled == {"totp", "recovery_codes"}
    assert all(event.actor_label == "alice" for event in events("auth.mfa_enrolled"))

    clock.tick(90)  # the enrollment's code has expired; the app now shows another
    alice = password_step("alice")
    response = alice.post(AUTHENTICATE, {"code": totp_code(secret, time.time())})
    assert response.status_code == 302 and response["Location"] == "/" and signed_in(alice)
    assert events("auth.signed_in")[-1].metadata["methods"] == ["password", "totp"]
    assert alice.get("/").status_code == 200
    assert secret not in str([event.canonical for event in AuditEvent.objects.all()])


def test_a_stale_or_wrong_code_is_refused_and_audited(people, clock, nobody_required, enroll_totp):
    alice = Client()
    sign_in(alice, "alice")
    secret = enroll_totp(alice)
    stale = totp_code(secret, time.time())
    clock.tick(300)

    alice = password_step("alice")
    for code in (stale, "000000"):
        response = alice.post(AUTHENTICATE, {"code": code})
        assert response.status_code == 200 and not signed_in(alice)
    refused = [event.metadata["factor"] for event in events("auth.sign_in_failed")]
    assert refused == ["mfa_code", "mfa_code"]
    assert stale not in str([event.canonical for event in AuditEvent.objects.all()])


def test_each_recovery_code_signs_in_once(people, clock, nobody_required, enroll_totp):
    alice = Client()
    sign_in(alice, "alice")
    enroll_totp(alice)
    first, second, *rest = recovery_codes(alice)
    assert len(rest) == 8

    alice = password_step("alice")
    assert alice.post(AUTHENTICATE, {"code": first}).status_code == 302 and signed_in(alice)
    (used,) = events("auth.recovery_code_used")
    assert used.actor_label == "alice" and used.metadata["remaining"] == 9
    assert events("auth.signed_in")[-1].metadata["methods"] == ["password", "recovery_codes"]

    again = password_step("alice")
    assert again.post(AUTHENTICATE, {"code": first}).status_code == 200 and not signed_in(again)
    assert again.post(AUTHENTICATE, {"code": second}).status_code == 302 and signed_in(again)
    assert [event.metadata["remaining"] for event in events("auth.recovery_code_used")] == [9, 8]
    assert first not in str([event.canonical for event in AuditEvent.objects.all()])
    assert verify_chain().ok


def test_removing_the_authenticator_app_is_audited(people, clock, nobody_required, enroll_totp):
    alice = Client()
    sign_in(alice, "alice")
    enroll_totp(alice)
    assert alice.post("/accounts/2fa/totp/deactivate/").status_code == 302
    removed = events("auth.mfa_removed")
    assert {event.metadata["type"] for event in removed} == {"totp", "recovery_codes"}  # the codes go with it
    assert {event.actor_label for event in removed} == {"alice"}
    assert sign_in(Client(), "alice")["Location"] == "/"  # the password alone signs in again


# --- Who must enroll ------------------------------------------------------------------------------


def test_a_member_of_a_required_group_is_held_at_enrollment_until_enrolled(people, clock, settings, enroll_totp):
    settings.MFA_REQUIRED_GROUPS = ["reviewers"]
    alice = Client()
    response = sign_in(alice, "alice")
    assert response.status_code == 302 and response["Location"] == ACTIVATE and signed_in(alice)

    assert alice.get("/")["Location"] == ACTIVATE
    answer = alice.get("/api/v1/requests/")
    assert answer.status_code == 403 and answer.json()["code"] == "mfa_enrollment_required"

    enroll_totp(alice)
    assert alice.get("/").status_code == 200
    assert sign_in(Client(), "mallory")["Location"] == "/"  # mallory is in no required group


def test_by_default_the_groups_that_may_decide_critical_requests_must_enroll(people, admin_user, settings):
    settings.MFA_REQUIRED_GROUPS = None
    assert required_groups() == set()  # the seed policy has no critical rule
    treasurers = Group.objects.create(name="treasurers")
    policy.save_rule(
        {
            "name": "payments_critical",
            "priority": 5,
            "action_type": "pay_*",
            "risk_level": "critical",
            "approver_group": "treasurers",
            "escalation_group": RISK_ADMINS,
        },
        actor=Person(admin_user),
        note="payments are critical",
    )
    policy.save_rule(
        {"name": "wipes_step_up", "priority": 6, "action_type": "wipe_*", "risk_level": "high", "step_up": True},
        actor=Person(admin_user),
        note="wipes need step-up",
    )
    assert required_groups() == {treasurers.name, RISK_ADMINS, "reviewers"}


def test_guessing_codes_is_braked_after_five_wrong_ones(people, clock, nobody_required, enroll_totp):
    """Past the password, a code has a million values: allauth's limit stops an online search."""
    alice = Client()
    sign_in(alice, "alice")
    secret = enroll_totp(alice)
    clock.tick(60)

    guesser = password_step("alice")
    for guess in ("000001", "000002", "000003", "000004", "000005"):
        assert guesser.post(AUTHENTICATE, {"code": guess}).status_code == 200
    response = guesser.post(AUTHENTICATE, {"code": totp_code(secret, time.time())})
    assert response.status_code == 200 and not signed_in(guesser)
    assert "Too many failed login attempts" in response.content.decode()
