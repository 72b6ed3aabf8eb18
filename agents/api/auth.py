"""Agents authenticate with a bearer token, and each token is rate limited.

Agents are not Django users. A valid token authenticates as an `AgentPrincipal`
(is_authenticated True, `is_agent` True) carrying the agent and the token; the
shared permissions in `controlplane.http.callers` tell agents and people apart by
that attribute, so other apps never import this one to do it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import lru_cache

import redis
from django.conf import settings
from django.core.cache import caches
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, throttling

from agents.models import Agent, AgentToken
from agents.services import InvalidToken, authenticate_token
from controlplane.http.codes import INVALID_TOKEN

logger = logging.getLogger(__name__)

__all__ = ["AgentPrincipal", "BearerTokenAuthentication", "TokenRateThrottle", "consume_rate"]


@dataclass(frozen=True, eq=False)
class AgentPrincipal:
    """The authenticated caller when an agent's token was presented."""

    token: AgentToken

    is_authenticated = True
    is_agent = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None

    @property
    def agent(self) -> Agent:
        return self.token.agent

    def has_scope(self, scope: str) -> bool:
        return scope in self.token.scopes

    def get_username(self) -> str:
        return f"agent:{self.agent.name}"

    def __str__(self) -> str:
        return self.get_username()


def principal_from_header(value: str) -> AgentPrincipal:
    """Authenticate an `Authorization` header value; raise AuthenticationFailed."""
    scheme, _, raw = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <token>'.", code=INVALID_TOKEN)
    try:
        return AgentPrincipal(authenticate_token(raw.strip()))
    except InvalidToken as exc:
        raise exceptions.AuthenticationFailed(exc.message, code=exc.code) from None


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer cp_<prefix>_<secret>` (agents)."""

    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header.lower().startswith("bearer"):
            return None
        principal = principal_from_header(header)
        return principal, principal.token

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "agents.api.auth.BearerTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An agent API token: cp_<prefix>_<secret>."}


# --- Rate limit -------------------------------------------------------------------------


def consume_rate(token: AgentToken) -> float | None:
    """Count one request against `token`'s fixed window; seconds to wait if over, else None.

    The counter is atomic (INCR on Redis, a locked increment in the local-memory
    cache), unlike DRF's read-modify-write throttle history, so concurrent
    requests cannot slip past the limit.
    """
    limit, window = settings.AGENT_TOKEN_RATE_LIMIT
    if not limit:
        return None
    now = time.time()
    bucket = int(now // window)
    key = f"cp:rate:{token.prefix}:{bucket}"
    try:
        count = _count_in_window(key, timeout=window + 5)
    except Exception:  # noqa: BLE001  (the cache backend's own connection errors)
        # The counter lives in the cache (Redis); while it is unreachable, fail open:
        # the limit is a brake on runaway agents, and a 500 on every call would stop
        # all agents instead (tests/scale/test_faults.py).
        logger.warning("rate limit counter unavailable; allowing the request", exc_info=True)
        return None
    if count > limit:
        return max(1.0, (bucket + 1) * window - now)
    return None


def _count_in_window(key: str, *, timeout: int) -> int:
    """Add one to the window counter `key` (expiring `timeout` after its last use); the new count.

    With Redis: INCR and EXPIRE in one pipelined round trip on redis-py's own client
    and connection pool, shared by the process's threads. Django's cache API needs
    two round trips for this (its `incr` checks EXISTS first) and a pool per thread,
    which cost the bare create a quarter of its HTTP throughput
    (tests/perf/bench_submit.py, README "Performance"). Without Redis (the embedded
    default, one process): the cache's INCR, and on the window's first request an ADD
    whose loser increments instead, so concurrent first requests all count.
    """
    if settings.REDIS_URL:
        pipeline = _redis(settings.REDIS_URL).pipeline(transaction=True)
        pipeline.incr(key)
        pipeline.expire(key, timeout)
        count, _ = pipeline.execute()
        return int(count)
    backend = caches["default"]
    try:
        return backend.incr(key)
    except ValueError:  # the window's first request (or the key was evicted)
        if backend.add(key, 1, timeout=timeout):
            return 1
        return backend.incr(key)


@lru_cache(maxsize=1)
def _redis(url: str) -> redis.Redis:
    # Short timeouts: with Redis unreachable the counter fails open at once (consume_rate).
    return redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)


class TokenRateThrottle(throttling.BaseThrottle):
    """Per-token limit (AGENT_TOKEN_RATE_LIMIT = (requests, window seconds)); sessions are not limited here."""

    def allow_request(self, request, view) -> bool:
        self._wait = None
        if isinstance(request.user, AgentPrincipal):
            self._wait = consume_rate(request.user.token)
        return self._wait is None

    def wait(self) -> float | None:
        return self._wait
