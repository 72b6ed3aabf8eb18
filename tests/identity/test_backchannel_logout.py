"""OpenID Connect back-channel logout: a provider's signed logout token ends the
sessions it names at once (the next request is anonymous, open sockets close), and
nothing else does: a token signed by another key, for another client, from another
issuer, without the logout event, with a nonce, too old, or replayed ends nothing."""

from __future__ import annotations

import time

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.contrib.sessions.models import Session
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from audit.models import AuditEvent
from controlplane.accounts.models import ProviderSession
from tests.dashboard.test_consumer import TIMEOUT, reviewer_socket
from tests.identity.provider import LocalProvider, new_key

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/accounts/oidc/local/backchannel-logout/"
CLOSED = {"type": "websocket.close", "code": 4001}


@pytest.fixture
def provider(local_provider, settings):
    settings.SOCIALACCOUNT_PROVIDERS = {"openid_connect": {"APPS": [local_provider.app("local")]}}
    return local_provider


def provider_session(user, *, sub: str, sid: str = "") -> Client:
    """A browser signed in as `user` through the provider (what `sso` records at sign-in)."""
    client = Client()
    client.force_login(user)
    ProviderSession.objects.create(
        session_key=client.session.session_key, user=user, provider="local", sub=sub, sid=sid
    )
    return client


def is_signed_in(client: Client) -> bool:
    return Session.objects.filter(session_key=client.cookies["sessionid"].value).exists()


def post_logout(token: str):
    return Client(enforce_csrf_checks=True).post(URL, {"logout_token": token})


def test_a_logout_token_naming_a_sub_ends_every_session_of_that_person(provider, people):
    alice, bob = people["alice"], people["bob"]
    laptop = provider_session(alice, sub="alice-sub", sid="sid-laptop")
    phone = provider_session(alice, sub="alice-sub", sid="sid-phone")
    other = provider_session(bob, sub="bob-sub", sid="sid-bob")

    response = post_logout(provider.sign(provider.logout_claims(sub="alice-sub")))

    assert response.status_code == 200, response.content
    assert response["Cache-Control"].startswith("max-age=0")
    assert not is_signed_in(laptop) and not is_signed_in(phone)
    assert is_signed_in(other)
    assert laptop.get("/").status_code == 302  # the next request is anonymous
    event = AuditEvent.objects.get(verb="auth.provider_signed_out")
    assert event.actor_label == "identity provider local"
    assert event.metadata["username"] == "alice"
    assert event.metadata["reason"] == "backchannel_logout"
    assert event.metadata["sessions_ended"] == 2
    assert not ProviderSession.objects.filter(user=alice).exists()


def test_a_logout_token_naming_a_sid_ends_that_sign_in_only(provider, people):
    alice = people["alice"]
    laptop = provider_session(alice, sub="alice-sub", sid="sid-laptop")
    phone = provider_session(alice, sub="alice-sub", sid="sid-phone")

    response = post_logout(provider.sign(provider.logout_claims(sub="alice-sub", sid="sid-phone")))

    assert response.status_code == 200
    assert is_signed_in(laptop) and not is_signed_in(phone)


def test_a_sid_of_another_person_ends_nothing_of_theirs(provider, people):
    """sid and sub must agree: a token for Bob's sub cannot end Alice's sign-in by its sid."""
    laptop = provider_session(people["alice"], sub="alice-sub", sid="sid-laptop")
    assert post_logout(provider.sign(provider.logout_claims(sub="bob-sub", sid="sid-laptop"))).status_code == 200
    assert is_signed_in(laptop)


def test_the_logout_closes_the_persons_open_socket_at_once(provider, people):
    alice = people["alice"]
    client = provider_session(alice, sub="alice-sub")
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    token = provider.sign(provider.logout_claims(sub="alice-sub"))

    async def scenario() -> dict:
        async with reviewer_socket(cookie=cookie) as socket:
            response = await database_sync_to_async(post_logout)(token)
            assert response.status_code == 200
            return await socket.receive_output(timeout=TIMEOUT)

    assert async_to_sync(scenario)() == CLOSED


def _wrong_key(provider: LocalProvider) -> str:
    return provider.sign(provider.logout_claims(sub="alice-sub"), key=new_key())


def _hs256_keyed_by_the_public_jwk(provider: LocalProvider) -> str:
    # The classic confusion: an HMAC whose key is the provider's public key material.
    return provider.sign(
        provider.logout_claims(sub="alice-sub"), key=provider.jwks()["keys"][0]["n"], algorithm="HS256"
    )


def _unsigned(provider: LocalProvider) -> str:
    import jwt

    return jwt.encode(
        provider.logout_claims(sub="alice-sub"), key=None, algorithm="none", headers={"kid": provider.kid}
    )


FORGERIES = {
    "signed by another key": _wrong_key,
    "unknown kid": lambda p: p.sign(p.logout_claims(sub="alice-sub"), kid="another-key"),
    "alg none": _unsigned,
    "HS256 keyed by the public key": _hs256_keyed_by_the_public_jwk,
    "another audience": lambda p: p.sign(p.logout_claims(sub="alice-sub", aud="someone-else")),
    "another issuer": lambda p: p.sign(p.logout_claims(sub="alice-sub", iss="https://evil.example")),
    "no events claim": lambda p: p.sign(p.logout_claims(sub="alice-sub", events=None)),
    "another event": lambda p: p.sign(p.logout_claims(sub="alice-sub", events={"urn:other": {}})),
    "event not an object": lambda p: p.sign(
        p.logout_claims(sub="alice-sub", events={"http://schemas.openid.net/event/backchannel-logout": "yes"})
    ),
    "an ID token (nonce)": lambda p: p.sign(p.logout_claims(sub="alice-sub", nonce="n-1")),
    "no iat": lambda p: p.sign(p.logout_claims(sub="alice-sub", iat=None)),
    "iat in the past": lambda p: p.sign(p.logout_claims(sub="alice-sub", iat=int(time.time()) - 3600, exp=None)),
    "iat in the future": lambda p: p.sign(p.logout_claims(sub="alice-sub", iat=int(time.time()) + 3600)),
    "expired": lambda p: p.sign(p.logout_claims(sub="alice-sub", exp=int(time.time()) - 60)),
    "no jti": lambda p: p.sign(p.logout_claims(sub="alice-sub", jti=None)),
    "neither sid nor sub": lambda p: p.sign(p.logout_claims()),
    "not a JWT": lambda p: "not.a.jwt",
}

REFUSED_FOR = {
    "signed by another key": "Signature verification failed",
    "unknown kid": "no key of the provider's JWKS",
    "alg none": "'none' is not accepted",
    "HS256 keyed by the public key": "'HS256' is not accepted",
    "another audience": "Audience",
    "another issuer": "issuer",
    "no events claim": "event is missing",
    "another event": "event is missing",
    "event not an object": "event is missing",
    "an ID token (nonce)": "no nonce",
    "no iat": '"iat"',
    "iat in the past": "too old",
    "iat in the future": "not yet valid",
    "expired": "expired",
    "no jti": '"jti"',
    "neither sid nor sub": "neither sid nor sub",
    "not a JWT": "logout_token refused",
}


@pytest.mark.parametrize("forgery", FORGERIES, ids=list(FORGERIES))
def test_a_forged_or_stale_logout_token_ends_nothing(provider, people, forgery):
    laptop = provider_session(people["alice"], sub="alice-sub", sid="sid-laptop")

    response = post_logout(FORGERIES[forgery](provider))

    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_request"
    assert REFUSED_FOR[forgery] in response.json()["error_description"]  # refused for its own flaw
    assert is_signed_in(laptop)
    assert not AuditEvent.objects.filter(verb="auth.provider_signed_out").exists()


def test_a_replayed_logout_token_ends_nothing_the_second_time(provider, people):
    alice = people["alice"]
    provider_session(alice, sub="alice-sub")
    token = provider.sign(provider.logout_claims(sub="alice-sub"))
    assert post_logout(token).status_code == 200

    signed_in_again = provider_session(alice, sub="alice-sub")
    replay = post_logout(token)

    assert replay.status_code == 400
    assert "already used" in replay.json()["error_description"]
    assert is_signed_in(signed_in_again)


def test_the_endpoint_answers_only_a_post_with_a_token_for_a_configured_provider(provider):
    assert Client().get(URL).status_code == 405
    assert post_logout("").status_code == 400
    unknown = Client().post("/accounts/oidc/nobody/backchannel-logout/", {"logout_token": "x.y.z"})
    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"


@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=st.text(max_size=300).filter(lambda text: "\x00" not in text))
def test_any_garbage_token_is_a_400_never_a_500(provider, token):
    response = Client().post(URL, {"logout_token": token or "-"})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


def test_the_providers_keys_are_fetched_once_and_again_after_a_rotation(provider, people):
    provider.jwks_fetches = 0
    provider_session(people["alice"], sub="alice-sub")
    provider_session(people["bob"], sub="bob-sub")
    assert post_logout("not a token at all").status_code == 400
    assert provider.jwks_fetches == 0  # refused before asking the provider anything

    assert post_logout(provider.sign(provider.logout_claims(sub="alice-sub"))).status_code == 200
    assert post_logout(provider.sign(provider.logout_claims(sub="nobody"))).status_code == 200
    assert provider.jwks_fetches == 1

    old = (provider.key, provider.kid)
    provider.rotate_key("test-key-2")
    try:
        assert post_logout(provider.sign(provider.logout_claims(sub="bob-sub"))).status_code == 200
    finally:
        provider.key, provider.kid = old
    assert provider.jwks_fetches == 2


def test_a_provider_moved_in_the_configuration_is_not_judged_by_its_old_keys(provider, people, settings):
    """The kept keys (and issuer) belong to where the provider was, not to its id."""
    assert post_logout(provider.sign(provider.logout_claims(sub="nobody"))).status_code == 200  # keys kept
    moved = LocalProvider()
    try:
        moved.kid = provider.kid  # the same key id, as two deployments of one product may have
        settings.SOCIALACCOUNT_PROVIDERS = {"openid_connect": {"APPS": [moved.app("local")]}}
        provider_session(people["alice"], sub="alice-sub")
        assert post_logout(moved.sign(moved.logout_claims(sub="alice-sub"))).status_code == 200
        assert post_logout(provider.sign(provider.logout_claims(sub="alice-sub"))).status_code == 400
    finally:
        moved.stop()
