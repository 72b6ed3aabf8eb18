"""A person who signs in through an identity provider decides from Slack only after the
provider vouches for them afresh (the user-info re-check, asked at the decision): no web
session of theirs could have been ended by their offboarding. The provider is the loopback
OpenID provider the SSO tests use (tests/identity/provider.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from allauth.socialaccount.models import SocialAccount, SocialToken
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from approvals.models import Decision
from approvals.states import State
from audit.models import AuditEvent
from controlplane.accounts.chat_recheck import NO_LONGER_VOUCHES, PROVIDER_UNREACHABLE
from controlplane.accounts.models import ProviderSession
from tests.identity.conftest import local_provider  # noqa: F401 (the loopback provider, per module)

pytestmark = pytest.mark.django_db


@pytest.fixture
def provider_on(local_provider, settings):  # noqa: F811
    settings.SOCIALACCOUNT_PROVIDERS = {"openid_connect": {"APPS": [local_provider.app("local")]}}
    local_provider.userinfo.clear()
    local_provider.token_responses.clear()
    return local_provider


def through_provider(user, *, web_session: bool = False) -> Client | None:
    """What a sign-in through the provider leaves: the account and its stored token (and,
    when asked, a live web session)."""
    account = SocialAccount.objects.create(user=user, provider="local", uid=f"{user.username}-sub")
    SocialToken.objects.create(account=account, token="tok-alice", expires_at=timezone.now() + timedelta(hours=1))
    if not web_session:
        return None
    client = Client()
    client.force_login(user)
    ProviderSession.objects.create(session_key=client.session.session_key, user=user, provider="local", sub=account.uid)
    return client


def answers(fake_slack) -> list[str]:
    return [args["text"] for name, args in fake_slack.calls if name == "respond"]


def still_waiting(request) -> bool:
    request.refresh_from_db()
    return request.state == State.PENDING_APPROVAL and not Decision.objects.filter(request=request).exists()


class TestAProviderThatStillVouches:
    def test_the_decision_counts(self, provider_on, people, submit, press, slack_links, fake_slack):
        through_provider(people["alice"])
        provider_on.userinfo["tok-alice"] = {"sub": "alice-sub", "groups": ["reviewers"]}
        request = submit()
        assert press(request).status_code == 200
        request.refresh_from_db()
        assert request.state == State.APPROVED
        assert Decision.objects.get(request=request).reviewer.username == "alice"

    def test_a_group_dropped_at_the_provider_takes_the_power_away_before_the_decision(
        self, provider_on, people, submit, press, slack_links, fake_slack
    ):
        through_provider(people["alice"])
        provider_on.userinfo["tok-alice"] = {"sub": "alice-sub", "groups": []}
        request = submit()
        press(request)
        assert still_waiting(request)
        assert not people["alice"].groups.exists()


class TestAPersonDisabledAtTheProvider:
    def test_is_refused_from_slack_and_the_refusal_is_audited(
        self, provider_on, people, submit, press, slack_links, fake_slack
    ):
        through_provider(people["alice"])  # no web session: nothing else would have noticed
        provider_on.userinfo["tok-alice"] = 401
        request = submit()
        press(request)
        assert still_waiting(request)
        assert answers(fake_slack) == [NO_LONGER_VOUCHES]
        event = AuditEvent.objects.get(verb="auth.provider_signed_out")
        assert event.actor_label == "identity provider local"
        assert event.metadata == {
            "user_id": people["alice"].pk,
            "username": "alice",
            "reason": "provider_refused",
            "sessions_ended": 0,
            "via": "slack",
        }

    def test_their_web_session_ends_too(self, provider_on, people, submit, press, slack_links, fake_slack):
        client = through_provider(people["alice"], web_session=True)
        provider_on.userinfo["tok-alice"] = 401
        request = submit()
        press(request)
        assert still_waiting(request)
        assert not Session.objects.filter(session_key=client.cookies["sessionid"].value).exists()
        event = AuditEvent.objects.get(verb="auth.provider_signed_out")
        assert (event.metadata["sessions_ended"], event.metadata["via"]) == (1, "slack")

    def test_another_subject_is_refused(self, provider_on, people, submit, press, slack_links, fake_slack):
        through_provider(people["alice"])
        provider_on.userinfo["tok-alice"] = {"sub": "someone-else", "groups": ["reviewers"]}
        request = submit()
        press(request)
        assert still_waiting(request)
        assert AuditEvent.objects.get(verb="auth.provider_signed_out").metadata["reason"] == "another_subject"

    def test_a_reject_from_the_modal_is_refused_too(
        self, provider_on, people, submit, reject_with, slack_links, fake_slack
    ):
        through_provider(people["alice"])
        provider_on.userinfo["tok-alice"] = 401
        request = submit()
        assert reject_with(request, "no").status_code == 200
        assert still_waiting(request)
        assert NO_LONGER_VOUCHES in answers(fake_slack)


class TestAProviderThatCannotBeAsked:
    def test_nothing_is_decided_and_nobody_is_signed_out(
        self, provider_on, people, submit, press, slack_links, fake_slack
    ):
        client = through_provider(people["alice"], web_session=True)
        provider_on.userinfo["tok-alice"] = 503
        request = submit()
        press(request)
        assert still_waiting(request)
        assert answers(fake_slack) == [PROVIDER_UNREACHABLE]
        assert Session.objects.filter(session_key=client.cookies["sessionid"].value).exists()
        assert not AuditEvent.objects.filter(verb="auth.provider_signed_out").exists()


def test_a_person_without_a_provider_is_not_asked(provider_on, people, submit, press, slack_links, fake_slack):
    provider_on.userinfo["tok-alice"] = 401  # would refuse, were it asked
    request = submit()
    press(request)
    request.refresh_from_db()
    assert request.state == State.APPROVED


def test_a_provider_person_without_a_stored_token_is_refused(
    provider_on, people, submit, press, slack_links, fake_slack
):
    """Nothing to ask the provider with means nobody vouched: refused, as the scheduled re-check would."""
    SocialAccount.objects.create(user=people["alice"], provider="local", uid="alice-sub")
    request = submit()
    press(request)
    assert still_waiting(request)
    assert answers(fake_slack) == [NO_LONGER_VOUCHES]
    assert AuditEvent.objects.get(verb="auth.provider_signed_out").metadata["reason"] == "no_token"
