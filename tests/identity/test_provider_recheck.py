"""The user-info re-check: where a provider sends no back-channel logout, a person it
no longer vouches for is signed out within SSO_RECHECK_SECONDS, and changed groups
apply at once (taking decide power away and closing sockets). The clock is the
test's: `recheck_provider_sessions(now=...)`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from allauth.socialaccount.models import SocialAccount, SocialToken
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent
from controlplane.accounts.models import ProviderSession
from controlplane.accounts.recheck import recheck_provider_sessions
from tests.dashboard.test_consumer import TIMEOUT, reviewer_socket

pytestmark = pytest.mark.django_db(transaction=True)

CLOSED = {"type": "websocket.close", "code": 4001}


@pytest.fixture
def rechecking_provider(local_provider, settings):
    settings.SOCIALACCOUNT_PROVIDERS = {"openid_connect": {"APPS": [local_provider.app("local")]}}
    settings.SSO_RECHECK_SECONDS = 3000
    local_provider.userinfo.clear()
    local_provider.token_responses.clear()
    return local_provider


def signed_in_through_provider(user, *, token: str = "tok-alice", refresh: str = "", expires_in: int = 3600) -> Client:
    """What a sign-in through the provider leaves: the account, its stored token, the session."""
    account, _ = SocialAccount.objects.get_or_create(user=user, provider="local", uid=f"{user.username}-sub")
    SocialToken.objects.update_or_create(
        account=account,
        app=None,
        defaults={
            "token": token,
            "token_secret": refresh,
            "expires_at": timezone.now() + timedelta(seconds=expires_in),
        },
    )
    client = Client()
    client.force_login(user)
    ProviderSession.objects.create(session_key=client.session.session_key, user=user, provider="local", sub=account.uid)
    return client


def is_signed_in(client: Client) -> bool:
    return Session.objects.filter(session_key=client.cookies["sessionid"].value).exists()


def later(seconds: int = 3001):
    return timezone.now() + timedelta(seconds=seconds)


def test_a_person_the_provider_still_knows_stays_signed_in_with_the_claimed_groups(rechecking_provider, people):
    alice = people["alice"]
    client = signed_in_through_provider(alice)
    rechecking_provider.userinfo["tok-alice"] = {"sub": "alice-sub", "groups": ["reviewers"]}

    assert recheck_provider_sessions(now=later())["checked"] == 1

    assert is_signed_in(client)
    assert set(alice.groups.values_list("name", flat=True)) == {"reviewers"}
    assert not AuditEvent.objects.filter(
        verb="group.membership_changed",  # nothing changed
        actor_label="identity provider local",
    ).exists()


def test_nobody_is_asked_before_the_interval_has_passed(rechecking_provider, people):
    client = signed_in_through_provider(people["alice"])  # the provider would refuse: no user info set
    assert recheck_provider_sessions(now=later(2999))["checked"] == 0
    assert is_signed_in(client)


def test_a_person_the_provider_no_longer_knows_is_signed_out_and_their_socket_closes(rechecking_provider, people):
    alice = people["alice"]
    client = signed_in_through_provider(alice)
    rechecking_provider.userinfo["tok-alice"] = 401
    cookie = f"sessionid={client.cookies['sessionid'].value}"

    async def scenario() -> dict:
        async with reviewer_socket(cookie=cookie) as socket:
            counts = await database_sync_to_async(recheck_provider_sessions)(now=later())
            assert counts["signed_out"] == 1
            return await socket.receive_output(timeout=TIMEOUT)

    assert async_to_sync(scenario)() == CLOSED
    assert not is_signed_in(client)
    assert client.get("/").status_code == 302
    event = AuditEvent.objects.get(verb="auth.provider_signed_out")
    assert event.actor_label == "identity provider local"
    assert event.metadata["reason"] == "provider_refused" and event.metadata["username"] == "alice"


def test_a_dropped_group_takes_decide_power_away_and_closes_the_socket(rechecking_provider, people):
    alice = people["alice"]
    client = signed_in_through_provider(alice)
    rechecking_provider.userinfo["tok-alice"] = {"sub": "alice-sub", "groups": []}
    cookie = f"sessionid={client.cookies['sessionid'].value}"

    async def scenario() -> dict:
        async with reviewer_socket(cookie=cookie) as socket:
            await database_sync_to_async(recheck_provider_sessions)(now=later())
            return await socket.receive_output(timeout=TIMEOUT)

    assert async_to_sync(scenario)() == CLOSED
    assert is_signed_in(client)  # still signed in, with no power left
    assert not alice.groups.exists()
    assert (
        AuditEvent.objects.filter(verb="group.membership_changed", actor_label="identity provider local").count() == 1
    )


def test_user_info_for_another_subject_signs_the_person_out(rechecking_provider, people):
    client = signed_in_through_provider(people["alice"])
    rechecking_provider.userinfo["tok-alice"] = {"sub": "mallory-sub", "groups": ["reviewers"]}
    recheck_provider_sessions(now=later())
    assert not is_signed_in(client)


def test_an_expired_token_is_refreshed_first(rechecking_provider, people):
    alice = people["alice"]
    client = signed_in_through_provider(alice, token="old", refresh="refresh-1", expires_in=60)
    rechecking_provider.token_responses.append(
        {"access_token": "new", "refresh_token": "refresh-2", "expires_in": 3600}
    )
    rechecking_provider.userinfo["new"] = {"sub": "alice-sub", "groups": ["reviewers"]}

    recheck_provider_sessions(now=later())

    assert is_signed_in(client)
    assert rechecking_provider.token_requests[-1]["grant_type"] == "refresh_token"
    assert rechecking_provider.token_requests[-1]["refresh_token"] == "refresh-1"
    token = SocialToken.objects.get(account__user=alice)
    assert (token.token, token.token_secret) == ("new", "refresh-2")


def test_an_expired_token_without_a_refresh_token_signs_the_person_out(rechecking_provider, people):
    client = signed_in_through_provider(people["alice"], expires_in=60)
    rechecking_provider.userinfo["tok-alice"] = {"sub": "alice-sub"}  # would answer, but the token is stale
    recheck_provider_sessions(now=later())
    assert not is_signed_in(client)
    assert AuditEvent.objects.get(verb="auth.provider_signed_out").metadata["reason"] == "token_expired"


def test_an_unreachable_provider_signs_nobody_out(rechecking_provider, people, settings):
    client = signed_in_through_provider(people["alice"])
    dead = {
        **rechecking_provider.app("local"),
        "settings": {"server_url": "http://127.0.0.1:9", "token_auth_method": "client_secret_post"},
    }
    settings.SOCIALACCOUNT_PROVIDERS = {"openid_connect": {"APPS": [dead]}}
    assert recheck_provider_sessions(now=later())["unreachable"] == 1
    assert is_signed_in(client)


def test_sessions_that_ended_otherwise_are_forgotten_without_asking(rechecking_provider, people):
    client = signed_in_through_provider(people["alice"])
    client.post("/logout/")
    counts = recheck_provider_sessions(now=later())
    assert counts["checked"] == 0
    assert not ProviderSession.objects.exists()
