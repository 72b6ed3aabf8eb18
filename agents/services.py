"""Agent identities and their API tokens: create, issue, revoke, authenticate.

A token reads `cp_<prefix>_<secret>`. Only the prefix (for lookup) and the
sha256 of the secret are stored, so the token is shown exactly once, by
`issue_token`. Creation and revocation are audit events.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from approvals.atomic import applying, changing_row
from approvals.people import user_of
from audit.chain import Actor, record
from controlplane.http.codes import AGENT_INACTIVE, INVALID_TOKEN, TOKEN_EXPIRED, TOKEN_REVOKED

from .models import ALL_SCOPES, Agent, AgentToken

__all__ = [
    "InvalidToken",
    "IssuedToken",
    "authenticate_token",
    "create_agent",
    "issue_token",
    "revoke_token",
]

TOKEN_PREFIX = "cp"
# last_used_at is a hint for admins; writing it on every request would turn
# every read into a write, so it is refreshed at most this often.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class InvalidToken(Exception):
    """The bearer token is malformed, unknown, revoked or expired. `code` says which."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class IssuedToken:
    """A freshly issued token: `secret` is the whole bearer token, shown once."""

    token: AgentToken
    secret: str


def _actor(acting_user: Any) -> Actor:
    return Actor.for_user(acting_user) if acting_user is not None else Actor.system("manage.py")


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_agent(name: str, *, owner: Any = None, actor: Actor | None = None) -> tuple[Agent, bool]:
    """Get or create the agent called `name`; (agent, created). Creation is audited."""
    acting_user = user_of(actor)
    with applying():
        agent, created = Agent.objects.get_or_create(name=name, defaults={"owner": owner})
        if created:
            record(
                "agent.created",
                actor=_actor(acting_user),
                agent=agent,
                metadata={"name": agent.name, "owner": owner.get_username() if owner else ""},
            )
    return agent, created


def issue_token(
    agent: Agent,
    *,
    scopes: list[str] | tuple[str, ...] = ALL_SCOPES,
    expires_in: timedelta | None = None,
    label: str = "",
    actor: Actor | None = None,
) -> IssuedToken:
    """Create a token for `agent` and return its secret (the only time it exists in clear)."""
    acting_user = user_of(actor)
    unknown = sorted(set(scopes) - set(ALL_SCOPES))
    if unknown:
        raise ValueError(f"unknown scopes: {', '.join(unknown)} (known: {', '.join(ALL_SCOPES)})")
    prefix = secrets.token_hex(6)
    secret_part = secrets.token_urlsafe(32)
    with applying():
        token = AgentToken.objects.create(
            agent=agent,
            label=label,
            prefix=prefix,
            secret_hash=_hash(secret_part),
            scopes=sorted(set(scopes)),
            created_by=acting_user,
            expires_at=timezone.now() + expires_in if expires_in else None,
        )
        record(
            "agent.token_created",
            actor=_actor(acting_user),
            agent=agent,
            metadata={
                "prefix": prefix,
                "scopes": token.scopes,
                "expires_at": token.expires_at.isoformat() if token.expires_at else "",
            },
        )
    return IssuedToken(token=token, secret=f"{TOKEN_PREFIX}_{prefix}_{secret_part}")


def revoke_token(token: AgentToken, *, actor: Actor | None = None) -> AgentToken:
    """Revoke `token` from now on (idempotent: revoking twice records once)."""
    acting_user = user_of(actor)
    # Locked: two revocations run one after the other and the second sees the first.
    # The token's sockets close after commit (`agents.consumers`, on the save).
    with changing_row(AgentToken.objects.select_related("agent"), pk=token.pk) as token:
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            record(
                "agent.token_revoked", actor=_actor(acting_user), agent=token.agent, metadata={"prefix": token.prefix}
            )
    return token


def parse_token(raw: str) -> tuple[str, str]:
    """Split a bearer token into (prefix, secret); InvalidToken when it is not one of ours."""
    parts = raw.strip().split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or not parts[2]:
        raise InvalidToken(INVALID_TOKEN, "The bearer token is malformed.")
    return parts[1], parts[2]


def authenticate_token(raw: str) -> AgentToken:
    """The usable token `raw` proves, with its agent loaded; InvalidToken otherwise."""
    prefix, secret_part = parse_token(raw)
    token = AgentToken.objects.select_related("agent").filter(prefix=prefix).first()
    # Compare even when no row matched, so timing does not tell prefixes apart.
    expected = token.secret_hash if token else _hash("")
    if not hmac.compare_digest(expected, _hash(secret_part)) or token is None:
        raise InvalidToken(INVALID_TOKEN, "The bearer token is not valid.")
    now = timezone.now()
    if token.revoked_at is not None:
        raise InvalidToken(TOKEN_REVOKED, "The bearer token was revoked.")
    if token.expires_at is not None and token.expires_at <= now:
        raise InvalidToken(TOKEN_EXPIRED, "The bearer token expired.")
    if not token.agent.is_active:
        raise InvalidToken(AGENT_INACTIVE, "The agent is deactivated.")
    if token.last_used_at is None or token.last_used_at < now - LAST_USED_RESOLUTION:
        AgentToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token
