"""No page is a password oracle: every password or code check is throttled, audited, and ends a session.

Mallory holds alice's signed-in session (a laptop left open) and wants her password, or
a working code, to keep access after the session ends. Each allauth page that checks
alice's password or code (the password change's current password, re-authentication by
password, re-authentication by a TOTP or a recovery code) refuses a wrong one with an
`auth.password_check_failed` row naming the page, never the text typed; the third wrong
one in a row (`STEP_UP_FAILURE_LIMIT`, shared with step-up) ends the session. With the
limit raised, the same pages wait longer after each wrong one past the free failures,
refuse even the right secret during a wait, and take the right one once it is over: the
sign-in throttle, not a second one. At the sign-in's second-factor step the same throttle
holds (there is no session yet to end).

A last test walks allauth's URL patterns, finds each page whose form takes a password or
a code, posts a wrong one, and asserts that it was counted: a page allauth adds later
that checks a secret fails it until it goes through the throttle.
"""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from audit.chain import verify_chain
from audit.models import AuditEvent
from tests.fixtures.cache import fresh_counters  # noqa: F401 (autouse in this folder)
from tests.identity.conftest import (
    ACTIVATE,
    clock,  # noqa: F401 (a fixture: the frozen clock)
    password_of,
    sign_in,
    totp_code,
)

PASSWORD_CHANGE = "/accounts/password/change/"
REAUTHENTICATE = "/accounts/reauthenticate/"
MFA_REAUTHENTICATE = "/accounts/2fa/reauthenticate/"
MFA_AUTHENTICATE = "/accounts/2fa/authenticate/"
RECOVERY_CODES = "/accounts/2fa/recovery-codes/"
MALLORYS_ADDRESS = "203.0.113.66"
WRONG = "Winter2026!"
NEW_PASSWORD = "a-New-passphrase-2026!"
SIGNED_OUT = "you have been signed out"
WAIT = "try again in"


@pytest.fixture(autouse=True)
def nobody_must_enroll(settings):
    settings.MFA_REQUIRED_GROUPS = []


@pytest.fixture
def alices_session(people, clock) -> Client:
    """alice's signed-in browser, now in mallory's hands (mallory's address)."""
    client = Client(REMOTE_ADDR=MALLORYS_ADDRESS)
    assert sign_in(client, "alice").status_code == 302
    return client


@pytest.fixture
def alice_with_totp(people, clock, django_capture_on_commit_callbacks) -> tuple[Client, str]:
    """alice signed in with an authenticator app enrolled: (her session, the app's secret)."""
    client = Client(REMOTE_ADDR=MALLORYS_ADDRESS)
    assert sign_in(client, "alice").status_code == 302
    secret = client.get(ACTIVATE).context["form"].secret
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(ACTIVATE, {"code": totp_code(secret, time.time())}).status_code == 302
    return client, secret


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def events(verb: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(verb=verb).order_by("seq"))


def page_errors(response) -> str:
    assert response.status_code == 200, (response.status_code, response.get("Location"))
    form = response.context["form"]
    return " ".join(str(error) for errors in form.errors.values() for error in errors)


def fresh_code(secret: str, clock) -> str:
    """The app's next code (each code is accepted once, so step past the last one used)."""
    clock.tick(30)
    return totp_code(secret, time.time())


# Each page that checks a signed-in person's secret: its URL, its purpose as audited, the
# factor, and how to post a guess there (`right` for the right secret).
def password_change_post(client: Client, guess: str):
    return client.post(PASSWORD_CHANGE, {"oldpassword": guess, "password1": NEW_PASSWORD, "password2": NEW_PASSWORD})


def reauthenticate_post(client: Client, guess: str):
    return client.post(REAUTHENTICATE, {"password": guess})


def mfa_reauthenticate_post(client: Client, guess: str):
    return client.post(MFA_REAUTHENTICATE, {"code": guess})


PASSWORD_PAGES = [
    pytest.param(password_change_post, "password_change", id="password-change"),
    pytest.param(reauthenticate_post, "reauthenticate", id="reauthenticate"),
]


# --- Wrong ones are audited and end the session -------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("post,purpose", PASSWORD_PAGES)
def test_three_wrong_passwords_on_a_page_end_the_session_and_each_is_audited(alices_session, post, purpose):
    for left in (2, 1):
        response = post(alices_session, f"{WRONG}{left}")
        assert page_errors(response) and SIGNED_OUT not in page_errors(response)
        assert signed_in(alices_session)
    response = post(alices_session, WRONG)
    assert SIGNED_OUT in page_errors(response)
    assert not signed_in(alices_session)
    assert alices_session.get("/").status_code == 302, "the session is gone: the queue sends her to sign in"

    failed = events("auth.password_check_failed")
    assert [(e.metadata["purpose"], e.metadata["factor"], e.metadata["failures"]) for e in failed] == [
        (purpose, "password", 1),
        (purpose, "password", 2),
        (purpose, "password", 3),
    ]
    assert all(e.actor_label == "alice" for e in failed)
    (ended,) = events("auth.session_ended")
    assert ended.metadata == {
        "reason": "password_check_failures",
        "purpose": purpose,
        "failures": 3,
        "session_ended": True,
    }
    assert WRONG not in str([event.canonical for event in AuditEvent.objects.all()]), "never what was typed"
    assert verify_chain().ok


@pytest.mark.django_db
def test_guesses_spread_over_pages_count_together(alices_session):
    """Two pages and a third: still three in a row, one session end."""
    password_change_post(alices_session, WRONG)
    reauthenticate_post(alices_session, WRONG)
    assert signed_in(alices_session)
    response = password_change_post(alices_session, WRONG)
    assert SIGNED_OUT in page_errors(response) and not signed_in(alices_session)


@pytest.mark.django_db
def test_wrong_step_ups_and_wrong_passwords_count_together(alices_session, people):
    """Two wrong step-up proofs (step-up's own counter) and one wrong password: signed out."""
    from approvals.services.step_up import count_wrong_proof

    count_wrong_proof(people["alice"])
    count_wrong_proof(people["alice"])
    response = reauthenticate_post(alices_session, WRONG)
    assert SIGNED_OUT in page_errors(response) and not signed_in(alices_session)


@pytest.mark.django_db
def test_a_right_password_starts_the_count_again(alices_session):
    password_change_post(alices_session, WRONG)
    reauthenticate_post(alices_session, WRONG)
    assert reauthenticate_post(alices_session, password_of("alice")).status_code == 302
    password_change_post(alices_session, WRONG)
    password_change_post(alices_session, WRONG)
    assert signed_in(alices_session), "two wrong since the right one"


@pytest.mark.django_db
def test_three_wrong_codes_at_mfa_reauthentication_end_the_session(alice_with_totp):
    client, secret = alice_with_totp
    for guess in ("000001", "000002"):
        assert page_errors(mfa_reauthenticate_post(client, guess))
        assert signed_in(client)
    assert SIGNED_OUT in page_errors(mfa_reauthenticate_post(client, "000003"))
    assert not signed_in(client)
    failed = events("auth.password_check_failed")
    assert {(e.metadata["purpose"], e.metadata["factor"]) for e in failed} == {("mfa_reauthenticate", "mfa_code")}
    assert len(failed) == 3
    assert not [e for e in events("auth.sign_in_failed") if e.metadata.get("factor") == "mfa_code"], (
        "counted once, as a signed-in person's check"
    )


@pytest.mark.django_db
def test_a_wrong_recovery_code_at_mfa_reauthentication_counts_like_a_wrong_totp(alice_with_totp):
    client, _secret = alice_with_totp
    real = list(client.get(RECOVERY_CODES).context["unused_codes"])
    for guess in ("aaaa1111", "bbbb2222"):
        assert guess not in real
        mfa_reauthenticate_post(client, guess)
    assert SIGNED_OUT in page_errors(mfa_reauthenticate_post(client, "cccc3333"))
    assert not signed_in(client)


@pytest.mark.django_db
def test_the_right_code_and_a_recovery_code_still_reauthenticate(alice_with_totp, clock):
    client, secret = alice_with_totp
    mfa_reauthenticate_post(client, "000001")
    assert mfa_reauthenticate_post(client, fresh_code(secret, clock)).status_code == 302
    recovery = client.get(RECOVERY_CODES).context["unused_codes"][0]
    assert mfa_reauthenticate_post(client, recovery).status_code == 302
    assert signed_in(client)


# --- Wrong ones get slower: the sign-in throttle -------------------------------------------------


@pytest.fixture
def patient_limit(settings):
    """Session end out of the way, so the throttle's waits show: 2 free failures, then 1 s, 2 s, 4 s."""
    settings.STEP_UP_FAILURE_LIMIT = 100
    settings.LOGIN_FREE_FAILURES = 2
    settings.LOGIN_DELAY_BASE_SECONDS = 1


@pytest.mark.django_db
@pytest.mark.parametrize("post,purpose", PASSWORD_PAGES)
def test_wrong_passwords_get_slower_and_the_right_one_works_after_the_wait(
    alices_session, patient_limit, clock, post, purpose
):
    for _ in range(2):
        assert WAIT not in page_errors(post(alices_session, WRONG))
    assert "try again in 1 second" in page_errors(post(alices_session, WRONG))
    during = post(alices_session, password_of("alice"))
    assert WAIT in page_errors(during), "the right password during a wait is refused before it is checked"
    clock.tick(2)
    assert "try again in 2 seconds" in page_errors(post(alices_session, WRONG))
    clock.tick(60)  # past the wait, and past allauth's own per-minute limit on these pages (kept as a brake)
    assert post(alices_session, password_of("alice")).status_code == 302, "after the wait the right one works"
    throttled = events("auth.throttled")
    assert [e.metadata["via"] for e in throttled] == [purpose, purpose]
    assert [e.metadata["delay_seconds"] for e in throttled] == [1, 2]


@pytest.mark.django_db
def test_page_failures_count_with_sign_in_failures_for_the_account(alices_session, patient_limit, clock):
    """One throttle: guesses on the password page make mallory's sign-in attempts wait too."""
    for _ in range(3):
        reauthenticate_post(alices_session, WRONG)
    response = Client(REMOTE_ADDR=MALLORYS_ADDRESS).post("/login/", {"login": "alice", "password": WRONG})
    assert WAIT in " ".join(str(e) for e in response.context["form"].non_field_errors())
    elsewhere = Client(REMOTE_ADDR="198.51.100.7")
    assert sign_in(elsewhere, "alice").status_code == 302, "never a hard lock: alice at her desk signs in"


@pytest.mark.django_db
def test_wrong_codes_at_mfa_reauthentication_get_slower(alice_with_totp, patient_limit, settings, clock):
    settings.LOGIN_DELAY_BASE_SECONDS = 60  # longer than a code lives, so a fresh right code meets the wait
    client, secret = alice_with_totp
    for guess in ("000001", "000002"):
        assert WAIT not in page_errors(mfa_reauthenticate_post(client, guess))
    assert "try again in 60 seconds" in page_errors(mfa_reauthenticate_post(client, "000003"))
    assert WAIT in page_errors(mfa_reauthenticate_post(client, fresh_code(secret, clock)))
    clock.tick(31)
    assert mfa_reauthenticate_post(client, fresh_code(secret, clock)).status_code == 302


@pytest.mark.django_db
def test_the_sign_in_code_step_is_throttled_by_the_same_throttle(alice_with_totp, settings, clock):
    """Past the password, at the second factor: the sign-in throttle holds (no session to end)."""
    settings.LOGIN_FREE_FAILURES = 2
    settings.LOGIN_DELAY_BASE_SECONDS = 60  # longer than a code lives
    _client, secret = alice_with_totp
    clock.tick(60)
    guesser = Client(REMOTE_ADDR=MALLORYS_ADDRESS)
    assert sign_in(guesser, "alice")["Location"].startswith(MFA_AUTHENTICATE)
    for guess in ("000001", "000002"):
        assert WAIT not in page_errors(guesser.post(MFA_AUTHENTICATE, {"code": guess}))
    assert WAIT in page_errors(guesser.post(MFA_AUTHENTICATE, {"code": "000003"}))
    assert WAIT in page_errors(guesser.post(MFA_AUTHENTICATE, {"code": fresh_code(secret, clock)}))
    assert not signed_in(guesser)
    assert [e.metadata["via"] for e in events("auth.throttled")] == ["mfa_sign_in"]
    assert len([e for e in events("auth.sign_in_failed") if e.metadata["factor"] == "mfa_code"]) == 3
    clock.tick(31)
    assert guesser.post(MFA_AUTHENTICATE, {"code": fresh_code(secret, clock)}).status_code == 302
    assert signed_in(guesser)


@pytest.mark.django_db
def test_wrong_step_up_passwords_meet_the_same_throttle(alices_session, patient_limit, clock, submit, critical_rule):
    """Step-up keeps its own session end, and its wrong passwords count for the account's waits too."""
    from django.urls import reverse

    request = submit("run_payroll", params={"amount": 1})
    url = reverse("approvals:approve", args=[request.pk])

    def approve(password: str):
        return alices_session.post(url, {"password": password, "revision": "1"}, HTTP_ACCEPT="application/json")

    for _ in range(3):
        assert approve(WRONG).json()["code"] == "step_up_failed"
    during = approve(password_of("alice"))
    assert during.status_code == 429 and during.json()["code"] == "step_up_throttled"
    assert during.json()["details"]["retry_after"] == 1
    assert [e.metadata["via"] for e in events("auth.throttled")] == ["step_up"]
    clock.tick(2)
    assert approve(password_of("alice")).json()["state"] == "approved"


@pytest.mark.django_db
def test_the_admins_password_change_asks_for_the_current_password(alices_session, people):
    """Django's admin would change it without the current one: it sends staff to allauth's page."""
    people["alice"].is_staff = True
    people["alice"].save()
    response = alices_session.get("/admin/password_change/")
    assert response.status_code == 302 and response["Location"] == PASSWORD_CHANGE


# --- No page is missed ---------------------------------------------------------------------------

# Pages whose form takes a secret but checks nothing a guesser could learn, with why.
NOT_A_CHECK = {
    "account_signup": "sign-up is closed (the adapter refuses it)",
    "account_login": "the sign-in page: AccountAdapter.authenticate, tests/dashboard/test_sign_in_throttling.py",
    "account_set_password": "only for someone without a password: there is no current one to guess",
    "mfa_activate_totp": "checks a code for the secret the page itself just showed, not a stored one",
    "mfa_authenticate": "the sign-in's second-factor step: test_the_sign_in_code_step_is_throttled_by_...",
}
SECRET_FIELD_NAMES = {"password", "oldpassword", "code"}


def allauth_pages() -> list[tuple[str, str]]:
    """(path, url name) of every allauth page without URL arguments."""

    def walk(patterns, prefix: str):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif (
                isinstance(pattern, URLPattern)
                and pattern.name
                and "<" not in str(pattern.pattern)
                and "(?P" not in str(pattern.pattern)
            ):
                yield "/" + prefix + str(pattern.pattern), pattern.name

    (accounts,) = [
        p for p in get_resolver().url_patterns if isinstance(p, URLResolver) and str(p.pattern) == "accounts/"
    ]
    return sorted(set(walk(accounts.url_patterns, "accounts/")))


def secret_fields(form) -> set[str]:
    return {name for name in form.fields if name in SECRET_FIELD_NAMES}


@pytest.mark.django_db
def test_every_allauth_page_that_checks_a_password_or_code_counts_a_wrong_one(alice_with_totp):
    client, _secret = alice_with_totp
    checked, pages_with_secrets = [], []
    for path, name in allauth_pages():
        page = client.get(path)
        form = page.context.get("form") if page.status_code == 200 and page.context else None
        fields = secret_fields(form) if form is not None else set()
        if not fields or name in NOT_A_CHECK:
            continue
        pages_with_secrets.append(name)
        before = AuditEvent.objects.filter(verb="auth.password_check_failed").count()
        data = {field: "000000" if field == "code" else WRONG for field in fields}
        data |= {field: NEW_PASSWORD for field in ("password1", "password2") if field in form.fields}
        client.post(path, data)
        after = AuditEvent.objects.filter(verb="auth.password_check_failed").count()
        assert after == before + 1, f"{path} ({name}) checked {sorted(fields)} without the throttle"
        checked.append(name)
        cache.clear()  # each page on its own: the session must survive to reach the next one
    assert {"account_change_password", "account_reauthenticate", "mfa_reauthenticate"} <= set(checked), checked
    assert checked == pages_with_secrets
