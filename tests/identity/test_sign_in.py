"""Signing in through allauth: the throttle still brakes guessing (tests/dashboard/
test_sign_in_throttling.py tells that story), and every sign-in, sign-out and refused
password is an audit chain event naming who, never what was typed."""

from __future__ import annotations

import pytest
from django.test import Client

from audit.chain import digest, verify_chain
from audit.models import AuditEvent

from .conftest import LOGIN, sign_in

DESK = "198.51.100.7"


def events(verb: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(verb=verb).order_by("seq"))


def test_signing_in_is_audited_with_the_person_and_the_factors_used(people):
    alice = Client(REMOTE_ADDR=DESK)
    response = sign_in(alice, "alice")
    assert response.status_code == 302 and response["Location"] == "/"
    (event,) = events("auth.signed_in")
    assert (event.actor_kind, event.actor_id, event.actor_label) == ("user", str(people["alice"].pk), "alice")
    assert event.metadata == {"address": digest(DESK), "methods": ["password"]}
    assert DESK not in event.canonical
    assert verify_chain().ok


def test_a_refused_password_is_audited_without_the_password(people):
    mallory = Client(REMOTE_ADDR=DESK)
    response = sign_in(mallory, "alice", "Winter2026!")
    assert response.status_code == 200 and "_auth_user_id" not in mallory.session
    (event,) = events("auth.sign_in_failed")
    assert (event.actor_kind, event.actor_label) == ("system", "sign-in")
    assert event.metadata == {
        "username": "alice",
        "user_id": people["alice"].pk,
        "address": digest(DESK),
        "factor": "password",
        "delay_seconds": 0,
    }
    assert "Winter2026!" not in event.canonical
    assert events("auth.signed_in") == []


def test_an_unknown_name_is_audited_only_as_a_digest(people):
    pasted = "correct horse battery staple"
    sign_in(Client(), pasted, "whatever")
    (event,) = events("auth.sign_in_failed")
    assert "username" not in event.metadata and pasted not in event.canonical


def test_an_inactive_account_with_its_right_password_is_refused_like_a_wrong_one(people):
    people["bob"].is_active = False
    people["bob"].save()
    right = sign_in(Client(), "bob")
    wrong = sign_in(Client(), "bob", "nope")
    assert right.status_code == wrong.status_code == 200
    assert right.context["form"].non_field_errors() == wrong.context["form"].non_field_errors()
    assert len(events("auth.sign_in_failed")) == 2


@pytest.mark.parametrize("logout_url", ["/logout/", "/accounts/logout/", "/admin/logout/"])
def test_signing_out_is_audited(admin_user, logout_url):
    ada = Client(REMOTE_ADDR=DESK)
    sign_in(ada, "ada")
    assert ada.post(logout_url).status_code in (200, 302)
    assert "_auth_user_id" not in ada.session
    (event,) = events("auth.signed_out")
    assert event.actor_label == "ada" and event.metadata == {"address": digest(DESK)}


def test_nobody_signs_up(db):
    assert Client().get("/accounts/signup/").status_code in (200, 302)
    Client().post("/accounts/signup/", {"username": "eve", "password1": "eve-pw-123!long"})
    from django.contrib.auth import get_user_model

    assert not get_user_model().objects.filter(username="eve").exists()


def test_the_login_page_keeps_its_look(db):
    page = Client().get(LOGIN).content.decode()
    assert 'class="auth-card"' in page and 'id="id_login"' in page and 'id="id_password"' in page


def test_local_passwords_can_be_turned_off(people, settings):
    settings.LOCAL_PASSWORD_LOGIN = False
    page = Client().get(LOGIN).content.decode()
    assert 'id="id_password"' not in page
    alice = Client()
    response = sign_in(alice, "alice")
    assert response.status_code == 200 and "_auth_user_id" not in alice.session
    assert "sign in with your identity provider" in response.content.decode()
