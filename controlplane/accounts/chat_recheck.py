"""A decision from Slack counts only after the person's identity provider vouches for them
now: no web session of theirs could have been ended by their offboarding, so the user-info
re-check (`recheck.ask_provider`) is asked afresh at each decision, not on its schedule.

- known: their groups become the claim's again (a dropped group takes the decide power
  away before the decision is tried); the decision goes on.
- no longer known (refused, another subject, expired token, provider removed): refused;
  their live provider sessions end as the scheduled re-check would end them, and
  `auth.provider_signed_out` is recorded (`via: slack`) even when none was live.
- no answer: refused too (nothing vouched for them); they may try again or use the browser.

People who do not sign in through a provider are not asked anything here."""

from __future__ import annotations

from typing import Any

from allauth.socialaccount.models import SocialAccount

from approvals.chat import vouching
from audit.chain import audited_atomic, record

from . import provider_sessions, sso
from .models import ProviderSession
from .recheck import KNOWN, UNREACHABLE, ask_provider

__all__ = ["NO_LONGER_VOUCHES", "PROVIDER_UNREACHABLE", "connect", "refusal_for_chat"]

NO_LONGER_VOUCHES = "Your identity provider no longer vouches for your account; nothing was decided."
PROVIDER_UNREACHABLE = (
    "Your identity provider could not be asked just now; nothing was decided. Try again, or decide in the browser."
)


def _signed_out(user: Any, provider: str, reason: str) -> None:
    rows = ProviderSession.objects.filter(user=user, provider=provider)
    live = [row for row in rows if provider_sessions.session_exists(row.session_key)]
    if live:
        provider_sessions.end_sessions(live, provider=provider, reason=reason, details={"via": "slack"})
        return
    with audited_atomic():
        ProviderSession.objects.filter(pk__in=[row.pk for row in rows]).delete()
        record(
            "auth.provider_signed_out",
            actor=provider_sessions.provider_actor(provider),
            metadata={
                "user_id": user.pk,
                "username": user.get_username(),
                "reason": reason,
                "sessions_ended": 0,
                "via": "slack",
            },
        )


def refusal_for_chat(user: Any) -> str:
    """ "" when every provider `user` signs in through knows them now, else the refusal."""
    for provider in sorted(set(SocialAccount.objects.filter(user=user).values_list("provider", flat=True))):
        answer = ask_provider(provider, user)
        if answer.verdict == KNOWN:
            sso.apply_claims(user, provider, sso.groups_in(answer.claims or {}))
        elif answer.verdict == UNREACHABLE:
            return PROVIDER_UNREACHABLE
        else:
            _signed_out(user, provider, answer.reason)
            return NO_LONGER_VOUCHES
    return ""


def connect() -> None:
    vouching.register_identity_check(refusal_for_chat)
