"""Signing in is slowed down after repeated failures, never locked.

Mallory guesses alice's password from her own address. After the account's free
failures, each wrong guess makes mallory's address wait longer (1 s, 2 s, 4 s, ...),
and her attempts during a wait are refused before the password is checked. Alice,
from her desk, signs in all along. Every wait is in the audit chain, once.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from freezegun import freeze_time

from audit.chain import digest, verify_chain
from audit.models import AuditEvent
from controlplane.accounts import signin as auth
from controlplane.accounts.signin import SignInThrottle, SignInWaiting, delay_for

from .conftest import PASSWORDS

LOGIN = reverse("login")
ADMIN_LOGIN = "/admin/login/"
MALLORYS_ADDRESS = "203.0.113.66"
ALICES_DESK = "198.51.100.7"
SECOND_GUESSER = "192.0.2.44"
WRONG = "Winter2026!"
NOT_CHECKED = "Please enter a correct username and password"  # the ordinary refusal


@pytest.fixture
def throttle_clock():
    with freeze_time("2026-11-29 09:00:00") as frozen:
        yield frozen


def from_address(address: str) -> Client:
    return Client(REMOTE_ADDR=address)


def sign_in(client: Client, username: str, password: str, *, url: str = LOGIN):
    return client.post(url, {"login": username, "password": password})


def refusal(response) -> str:
    """The alert a refused sign-in shows ("" when it signed in)."""
    assert response.status_code in (200, 302), response.status_code
    if response.status_code == 302:
        return ""
    return " ".join(str(error) for error in response.context["form"].non_field_errors())


def waits(response) -> int | None:
    """The seconds a refusal asks to wait, or None when it is not a wait."""
    text = refusal(response)
    prefix = "Too many failed sign-ins for this account from here; try again in "
    if not text.startswith(prefix):
        return None
    return int(text.removeprefix(prefix).split()[0])


def throttled_events() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(verb="auth.throttled").order_by("seq"))


def use_up_free_failures(client: Client, username: str = "alice") -> None:
    for _ in range(settings.LOGIN_FREE_FAILURES):
        response = sign_in(client, username, WRONG)
        assert NOT_CHECKED in refusal(response) and waits(response) is None


# --- Growing delays, for that address only ------------------------------------------------------


def test_after_the_free_failures_each_wrong_guess_makes_that_address_wait_twice_as_long(people, throttle_clock):
    mallory = from_address(MALLORYS_ADDRESS)
    use_up_free_failures(mallory)

    seen = []
    for _ in range(4):
        response = sign_in(mallory, "alice", WRONG)
        seen.append(waits(response))
        throttle_clock.tick(seen[-1])
    assert seen == [1, 2, 4, 8]


def test_during_a_wait_even_the_right_password_is_refused_from_that_address_then_accepted_after_it(
    people, throttle_clock
):
    alice_on_the_train = from_address(MALLORYS_ADDRESS)
    use_up_free_failures(alice_on_the_train)
    assert waits(sign_in(alice_on_the_train, "alice", WRONG)) == 1
    throttle_clock.tick(1)
    assert waits(sign_in(alice_on_the_train, "alice", WRONG)) == 2

    throttle_clock.tick(1)
    refused = sign_in(alice_on_the_train, "alice", PASSWORDS["alice"])
    assert waits(refused) == 1 and "_auth_user_id" not in alice_on_the_train.session

    throttle_clock.tick(1)
    assert sign_in(alice_on_the_train, "alice", PASSWORDS["alice"]).status_code == 302


def test_alice_signs_in_from_her_desk_while_mallorys_address_is_waiting(people, throttle_clock):
    mallory = from_address(MALLORYS_ADDRESS)
    use_up_free_failures(mallory)
    assert waits(sign_in(mallory, "alice", WRONG)) == 1

    alice = from_address(ALICES_DESK)
    assert sign_in(alice, "alice", PASSWORDS["alice"]).status_code == 302
    assert waits(sign_in(mallory, "alice", PASSWORDS["alice"])) == 1  # mallory's address still waits


def test_the_delay_grows_with_the_accounts_failures_from_any_address(people, throttle_clock):
    use_up_free_failures(from_address(MALLORYS_ADDRESS))
    # A second guesser's very first failure already waits: the account is past its free failures.
    assert waits(sign_in(from_address(SECOND_GUESSER), "alice", WRONG)) == 1
    assert waits(sign_in(from_address(MALLORYS_ADDRESS), "alice", WRONG)) == 2


def test_other_accounts_from_the_same_address_are_not_slowed(people, throttle_clock):
    shared_proxy = from_address(MALLORYS_ADDRESS)
    use_up_free_failures(shared_proxy, "alice")
    assert waits(sign_in(shared_proxy, "alice", WRONG)) == 1
    assert sign_in(shared_proxy, "bob", PASSWORDS["bob"]).status_code == 302


def test_spelling_variants_of_a_username_count_against_the_same_account(people, throttle_clock):
    mallory = from_address(MALLORYS_ADDRESS)
    for variant in ["ALICE", " alice", "Alice ", "ａｌｉｃｅ", "alice"]:
        assert waits(sign_in(mallory, variant, WRONG)) is None
    assert waits(sign_in(mallory, "ALICE", WRONG)) == 1
    assert waits(sign_in(mallory, "alice", PASSWORDS["alice"])) == 1


def test_the_delay_stops_growing_at_the_maximum(settings):
    free = settings.LOGIN_FREE_FAILURES
    assert [delay_for(free + n) for n in range(0, 4)] == [0, 1, 2, 4]
    assert delay_for(free + 11) == settings.LOGIN_DELAY_MAX_SECONDS == 900
    assert delay_for(free + 10_000) == 900


def test_failures_older_than_the_window_no_longer_count(people, throttle_clock):
    mallory = from_address(MALLORYS_ADDRESS)
    use_up_free_failures(mallory)
    throttle_clock.tick(2 * settings.LOGIN_FAILURE_WINDOW_SECONDS)
    use_up_free_failures(mallory)  # free again
    assert waits(sign_in(mallory, "alice", WRONG)) == 1


# --- Refusals during a wait ------------------------------------------------------------------------


def test_attempts_during_a_wait_are_neither_checked_counted_nor_audited(people, throttle_clock):
    mallory = from_address(MALLORYS_ADDRESS)
    use_up_free_failures(mallory)
    throttle_clock.tick(0)
    assert waits(sign_in(mallory, "alice", WRONG)) == 1
    for _ in range(50):
        assert waits(sign_in(mallory, "alice", WRONG)) == 1
    assert len(throttled_events()) == 1

    throttle_clock.tick(1)
    # Only the six real failures counted: the next one waits 2 s, not 2**50.
    assert waits(sign_in(mallory, "alice", WRONG)) == 2
    assert len(throttled_events()) == 2


def test_a_success_clears_that_address_but_the_account_keeps_its_count(people, throttle_clock):
    alice = from_address(ALICES_DESK)
    use_up_free_failures(alice)
    assert waits(sign_in(alice, "alice", WRONG)) == 1
    throttle_clock.tick(1)
    assert sign_in(alice, "alice", PASSWORDS["alice"]).status_code == 302
    alice.logout()

    # A success is not a way for a guesser to launder failures: the account still counts them.
    assert waits(sign_in(from_address(MALLORYS_ADDRESS), "alice", WRONG)) == 2


def test_only_one_password_check_at_a_time_per_address_once_delays_apply(people, throttle_clock):
    """A burst of parallel guesses must not all be checked before the first one starts a wait."""
    use_up_free_failures(from_address(MALLORYS_ADDRESS))
    first = SignInThrottle.for_attempt(None, "alice", via="dashboard")
    parallel = SignInThrottle.for_attempt(None, "alice", via="dashboard")
    with first.attempt():
        with pytest.raises(SignInWaiting) as refused, parallel.attempt():
            pass
        assert refused.value.seconds == 1
    with parallel.attempt():  # the slot is free once the first check is over
        pass


def test_while_the_account_has_free_failures_parallel_attempts_are_not_serialized(people, throttle_clock):
    alice = SignInThrottle.for_attempt(None, "alice", via="dashboard")
    with alice.attempt(), alice.attempt():
        pass


# --- The audit chain ----------------------------------------------------------------------------


def test_each_wait_is_audited_naming_the_account_and_a_digest_of_the_address(people, throttle_clock):
    mallory = from_address(MALLORYS_ADDRESS)
    use_up_free_failures(mallory)
    assert throttled_events() == []  # free failures are not audited
    sign_in(mallory, "alice", WRONG)
    throttle_clock.tick(1)
    sign_in(mallory, "alice", WRONG)

    first, second = throttled_events()
    assert (first.actor_kind, first.actor_label) == ("system", "sign-in")
    assert first.metadata == {
        "username": "alice",
        "user_id": people["alice"].pk,
        "address": digest(MALLORYS_ADDRESS),
        "account_failures": 6,
        "address_failures": 6,
        "delay_seconds": 1,
        "via": "dashboard",
    }
    assert (second.metadata["account_failures"], second.metadata["delay_seconds"]) == (7, 2)
    assert MALLORYS_ADDRESS not in first.canonical
    assert verify_chain().ok


def test_an_unknown_username_is_stored_only_as_a_digest(people, throttle_clock):
    """People paste passwords into the username field: that text never reaches the chain."""
    pasted_password = "correct horse battery staple"
    mallory = from_address(MALLORYS_ADDRESS)
    use_up_free_failures(mallory, pasted_password)
    sign_in(mallory, pasted_password, WRONG)

    (event,) = throttled_events()
    assert "username" not in event.metadata and "user_id" not in event.metadata
    assert len(event.metadata["username_digest"]) == 64
    assert pasted_password not in event.canonical
    assert pasted_password not in str(event.metadata)


def test_the_same_unknown_name_gets_the_same_digest_so_its_events_correlate(people, throttle_clock):
    mallory = from_address(MALLORYS_ADDRESS)
    use_up_free_failures(mallory, "ghost")
    sign_in(mallory, "ghost", WRONG)
    throttle_clock.tick(1)
    sign_in(mallory, "GHOST", WRONG)
    first, second = throttled_events()
    assert first.metadata["username_digest"] == second.metadata["username_digest"]


# --- The admin's sign-in ----------------------------------------------------------------------


def test_the_admin_signs_in_only_through_the_dashboards_throttled_login(admin_user, throttle_clock):
    """One form, so one throttle (and one second factor): the admin's own form is gone."""
    mallory = from_address(MALLORYS_ADDRESS)
    posted = sign_in(mallory, "ada", WRONG, url=ADMIN_LOGIN)
    assert posted.status_code == 302 and posted["Location"].startswith(LOGIN)
    assert "_auth_user_id" not in mallory.session

    use_up_free_failures(mallory, "ada")
    assert waits(sign_in(mallory, "ada", WRONG)) == 1

    ada = from_address(ALICES_DESK)
    response = ada.post(f"{LOGIN}?next=/admin/", {"login": "ada", "password": "ada-pw-123!", "next": "/admin/"})
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert ada.get("/admin/").status_code == 200
    (event,) = throttled_events()
    assert event.metadata["username"] == "ada"


def test_a_signed_in_person_who_is_not_staff_is_refused_by_the_admin(people, throttle_clock):
    alice = from_address(ALICES_DESK)
    assert sign_in(alice, "alice", PASSWORDS["alice"]).status_code == 302
    assert alice.get(ADMIN_LOGIN).status_code == 403


# --- No enumeration, no errors ------------------------------------------------------------------


def test_an_unknown_name_and_a_real_one_are_refused_alike(people, throttle_clock):
    def story(username: str, address: str) -> list[str]:
        guesser = from_address(address)
        told = []
        for _ in range(settings.LOGIN_FREE_FAILURES + 2):
            told.append(refusal(sign_in(guesser, username, WRONG)))
        return told

    assert story("alice", MALLORYS_ADDRESS) == story("nobody-here", SECOND_GUESSER)


@pytest.mark.parametrize(
    "username",
    ["al\x00ice", "a" * 5000, "", "   ", "'; DROP TABLE auth_user; --", "\U0001f600" * 40, "ａｌｉｃｅ"],
    ids=["nul", "very-long", "empty", "blank", "sql", "emoji", "full-width"],
)
def test_odd_usernames_never_answer_500(people, username, throttle_clock):
    mallory = from_address(MALLORYS_ADDRESS)
    # A NUL is refused at the edge (controlplane/http/inputs.py) before any sign-in logic.
    expected = 400 if "\x00" in username else 200
    for _ in range(settings.LOGIN_FREE_FAILURES + 2):
        assert sign_in(mallory, username, WRONG).status_code == expected
    assert verify_chain().ok


def test_a_request_without_a_client_address_is_throttled_as_one_unknown_address(people, throttle_clock):
    nowhere = Client(REMOTE_ADDR="")
    use_up_free_failures(nowhere)
    assert waits(sign_in(nowhere, "alice", WRONG)) == 1


def test_an_unreachable_cache_lets_people_sign_in_unthrottled(people, monkeypatch, caplog):
    """Throttling is a brake, not a gate: a cache outage must not lock every reviewer out."""

    class UnreachableCache:
        def __getattr__(self, name):
            def fail(*args, **kwargs):
                raise ConnectionError("cache is down")

            return fail

    monkeypatch.setattr(auth, "cache", UnreachableCache())
    assert sign_in(Client(), "alice", WRONG).status_code == 200
    assert sign_in(Client(), "alice", PASSWORDS["alice"]).status_code == 302
    assert "sign-in throttling unavailable" in caplog.text
