"""The user-info re-check: sessions signed in through a provider that cannot (or does not)
send back-channel logouts still end when the provider stops vouching for the person.

Every `SSO_RECHECK_SECONDS` (default 50 min; the beat task runs every 5, so no session
goes unchecked for more than an hour) each person with a live provider session is
looked up at the provider's user info endpoint with the access token stored at their
sign-in (`SOCIALACCOUNT_STORE_TOKENS`; refreshed first when it expired and the provider
gave a refresh token):

- 200 with the same `sub`: still known. Their groups become the claim's again
  (`sso.apply_claims`: a dropped group takes its decide power away at once and closes
  their sockets); the sessions count as checked.
- 401/403, another `sub`, or an expired token that cannot be refreshed: the provider no
  longer vouches for them, so every session of theirs through it ends
  (`provider_sessions.end_sessions`, audited `auth.provider_signed_out`).
- no answer (network, 5xx): nobody is signed out for the provider's outage; the next
  run asks again (the session's absolute lifetime still bounds it).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import requests
from allauth.socialaccount.adapter import get_adapter
from allauth.socialaccount.models import SocialAccount, SocialApp, SocialToken
from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter
from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from . import provider_sessions, sso
from .models import ProviderSession
from .token_endpoint import post_to_token_endpoint

__all__ = ["Answer", "ask_provider", "recheck_provider_sessions"]

logger = logging.getLogger(__name__)

KNOWN, UNKNOWN, UNREACHABLE = "known", "unknown", "unreachable"


@dataclass(frozen=True)
class Answer:
    verdict: str  # KNOWN, UNKNOWN or UNREACHABLE
    reason: str = ""
    claims: dict[str, Any] | None = None


def _adapter(provider_id: str) -> OpenIDConnectOAuth2Adapter:
    # allauth's adapter wants a request only to build URLs; the re-check runs in a worker.
    request = HttpRequest()
    request.META.update(SERVER_NAME="localhost", SERVER_PORT="80")
    return OpenIDConnectOAuth2Adapter(request, provider_id)


def _refreshed(adapter: OpenIDConnectOAuth2Adapter, token: SocialToken, now: datetime) -> bool:
    """Trade the stored refresh token for a new access token; False when the provider refuses."""
    response = post_to_token_endpoint(adapter, {"grant_type": "refresh_token", "refresh_token": token.token_secret})
    if response.status_code in (400, 401, 403):
        return False
    response.raise_for_status()
    body = response.json()
    token.token = body["access_token"]
    token.token_secret = body.get("refresh_token") or token.token_secret
    expires_in = body.get("expires_in")
    token.expires_at = now + timedelta(seconds=int(expires_in)) if expires_in else None
    token.save(update_fields=["token", "token_secret", "expires_at"])
    return True


def ask_provider(provider_id: str, user: Any, *, now: datetime | None = None) -> Answer:
    """Whether `provider_id` still knows `user`, and their claims when it does."""
    now = now or timezone.now()
    account = SocialAccount.objects.filter(user=user, provider=provider_id).first()
    token = SocialToken.objects.filter(account=account).first() if account else None
    if token is None or not token.token:
        return Answer(UNKNOWN, "no_token")
    try:
        adapter = _adapter(provider_id)
        if token.expires_at is not None and token.expires_at <= now:
            if not token.token_secret or not _refreshed(adapter, token, now):
                return Answer(UNKNOWN, "token_expired")
        with get_adapter().get_requests_session() as session:
            response = session.get(adapter.profile_url, headers={"Authorization": f"Bearer {token.token}"})
        if response.status_code in (401, 403):
            return Answer(UNKNOWN, "provider_refused")
        response.raise_for_status()
        claims = response.json()
    except SocialApp.DoesNotExist:
        return Answer(UNKNOWN, "provider_removed")  # no longer configured: nobody vouches for them
    except (requests.RequestException, ValueError, KeyError) as error:
        logger.warning("user info of %s at %s unavailable: %s", user.pk, provider_id, error)
        return Answer(UNREACHABLE, "unreachable")
    if not isinstance(claims, dict) or str(claims.get("sub")) != account.uid:
        return Answer(UNKNOWN, "another_subject")
    return Answer(KNOWN, claims=claims)


def recheck_provider_sessions(*, now: datetime | None = None) -> dict[str, int]:
    """Re-check everyone whose provider session was last checked `SSO_RECHECK_SECONDS` ago."""
    now = now or timezone.now()
    due = ProviderSession.objects.filter(
        checked_at__lte=now - timedelta(seconds=settings.SSO_RECHECK_SECONDS)
    ).select_related("user")
    people: dict[tuple[str, Any], list[ProviderSession]] = defaultdict(list)
    for row in due:
        people[(row.provider, row.user)].append(row)
    counts = {"checked": 0, "signed_out": 0, "unreachable": 0, "forgotten": 0}
    for (provider, user), rows in people.items():
        live = [row for row in rows if provider_sessions.session_exists(row.session_key)]
        gone = [row.pk for row in rows if row not in live]
        if gone:  # ended some other way (signed out, expired): nothing left to check
            counts["forgotten"] += ProviderSession.objects.filter(pk__in=gone).delete()[0]
        if not live:
            continue
        answer = ask_provider(provider, user, now=now)
        counts["checked"] += 1
        if answer.verdict == KNOWN:
            sso.apply_claims(user, provider, sso.groups_in(answer.claims or {}))
            ProviderSession.objects.filter(pk__in=[row.pk for row in live]).update(checked_at=now)
        elif answer.verdict == UNKNOWN:
            counts["signed_out"] += provider_sessions.end_sessions(live, provider=provider, reason=answer.reason)
        else:
            counts["unreachable"] += 1
    return counts
