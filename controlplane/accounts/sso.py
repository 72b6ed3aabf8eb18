"""Single sign-on: group membership mapped from the identity provider at every sign-in.

A person signing in through an OpenID Connect provider (settings.OIDC_PROVIDERS) gets
exactly the groups named in its `OIDC_GROUPS_CLAIM` claim that exist here (reviewers,
auditors, any rule's approver group); every other group is taken away. A claim never
adds anyone to risk-admins (it can only take them out of it).
So removing someone in the provider removes their power at their next sign-in. The
change goes through the group membership audit (`group.membership_changed`, the
provider named as the actor), which also closes their open sockets.

The session is remembered with the person's `sub` and the provider's `sid`
(`provider_sessions`), so the provider can end it later (back-channel logout, the
user-info re-check).
"""

from __future__ import annotations

from typing import Any

from allauth.account.signals import user_logged_in
from django.conf import settings
from django.contrib.auth.models import Group
from django.http import HttpRequest

from . import provider_sessions
from .membership import acting_as

__all__ = ["apply_claims", "claimed_groups", "connect", "groups_in"]

DISPATCH_UID = "controlplane.accounts.sso"


def groups_in(claims: dict[str, Any]) -> set[str]:
    """The group names a set of claims (an ID token's, or user info) gives."""
    value = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    if isinstance(value, str):
        value = [value]
    return {str(name) for name in value} if isinstance(value, list) else set()


def claimed_groups(sociallogin: Any) -> set[str]:
    """The group names the provider's claims give (userinfo first, then the ID token)."""
    data = sociallogin.account.extra_data or {}
    return groups_in(data.get("userinfo") or data.get("id_token") or {})


def apply_claims(user: Any, provider: str, groups: set[str]) -> None:
    """Make `user`'s groups exactly those of `groups` that exist here, the provider acting,
    except that a claim never makes anyone a risk-admin: membership of risk-admins is
    granted here, under four eyes, and a claim can only take it away (by not naming it).

    Claims are deploy-time configuration (`OIDC_PROVIDERS`), trusted as such, so they
    are not gated; every change they make is audited twice: `group.membership_changed`
    per group, and one `membership.claims_applied` naming the provider, what was added
    and removed, and any risk-admins claim that was ignored. Nothing changes (and
    nothing is audited) when the groups already are as claimed.
    """
    from approvals.atomic import applying
    from approvals.permissions import RISK_ADMINS
    from audit.chain import record

    actor = provider_sessions.provider_actor(provider)
    before = set(user.groups.values_list("name", flat=True))
    wanted = set(Group.objects.filter(name__in=groups).values_list("name", flat=True))
    ignored = sorted(wanted & {RISK_ADMINS} - before)
    wanted -= set(ignored)
    if wanted == before:
        return
    with applying(), acting_as(actor, via="sso"):
        user.groups.set(Group.objects.filter(name__in=wanted))
        record(
            "membership.claims_applied",
            actor=actor,
            metadata={
                "user": user.get_username(),
                "provider": provider,
                "added": sorted(wanted - before),
                "removed": sorted(before - wanted),
                "ignored": ignored,
            },
        )


def _on_signed_in(sender: Any, request: HttpRequest, user: Any, sociallogin: Any = None, **kwargs: Any) -> None:
    if sociallogin is None:
        return
    provider = sociallogin.account.provider
    apply_claims(user, provider, claimed_groups(sociallogin))
    id_token = (sociallogin.account.extra_data or {}).get("id_token") or {}
    provider_sessions.remember(
        request, user=user, provider=provider, sub=sociallogin.account.uid, sid=id_token.get("sid", "")
    )


def connect() -> None:
    user_logged_in.connect(_on_signed_in, dispatch_uid=DISPATCH_UID)
