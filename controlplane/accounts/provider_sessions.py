"""Sessions an identity provider can end: remembered at sign-in, ended at its word.

Each sign-in through a provider leaves a `ProviderSession` naming the session, the
person's `sub` and the provider's session id (`sid`, from the ID token). The provider
ends them two ways: a back-channel logout (`backchannel`) names a `sub` or a `sid`,
and the user-info re-check (`recheck`) finds a person it no longer knows. Either way
`end_sessions` deletes the sessions from the store (the next request is anonymous),
closes the person's open sockets at once, and records `auth.provider_signed_out`
with the provider as the actor.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.http import HttpRequest

from approvals.sockets import sessions_ended
from audit.chain import Actor, audited_atomic, record

from .models import ProviderSession

__all__ = ["connect", "end_sessions", "provider_actor", "remember", "session_exists"]

DISPATCH_UID = "controlplane.accounts.provider_sessions"


def provider_actor(provider: str) -> Actor:
    """The audit actor for what a provider does (the label `sso` uses for group changes)."""
    return Actor.system(f"identity provider {provider}")


def _store(session_key: str) -> Any:
    return import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)


def session_exists(session_key: str) -> bool:
    return _store(session_key).exists(session_key)


def remember(request: HttpRequest, *, user: Any, provider: str, sub: str, sid: str = "") -> None:
    """Note that the session of `request` was signed in through `provider` as `sub`."""
    session = getattr(request, "session", None)
    if session is None:
        return
    if session.session_key is None:  # login() saved it already; this is for callers that did not
        session.save()
    ProviderSession.objects.update_or_create(
        session_key=session.session_key,
        defaults={"user": user, "provider": provider, "sub": str(sub), "sid": str(sid or "")},
    )


def end_sessions(
    sessions: Iterable[ProviderSession], *, provider: str, reason: str, details: dict[str, Any] | None = None
) -> int:
    """End these sessions, close their people's sockets, audit once per person; how many ended."""
    by_user: dict[Any, list[ProviderSession]] = defaultdict(list)
    for session in sessions:
        by_user[session.user].append(session)
    ended = 0
    with audited_atomic():
        for user, rows in by_user.items():
            for row in rows:
                _store(row.session_key).delete()
            ProviderSession.objects.filter(pk__in=[row.pk for row in rows]).delete()
            ended += len(rows)
            record(
                "auth.provider_signed_out",
                actor=provider_actor(provider),
                metadata={
                    "user_id": user.pk,
                    "username": user.get_username(),
                    "reason": reason,
                    "sessions_ended": len(rows),
                    **(details or {}),
                },
            )
        # Their sockets close after commit, like every other close: a rolled-back sign-out closes nothing.
        sessions_ended.send(sender=ProviderSession, user_ids=[user.pk for user in by_user])
    return ended


def _forget_on_logout(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if session_key:
        ProviderSession.objects.filter(session_key=session_key).delete()


def connect() -> None:
    user_logged_out.connect(_forget_on_logout, dispatch_uid=DISPATCH_UID)
