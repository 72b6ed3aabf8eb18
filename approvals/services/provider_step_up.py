"""Step-up by re-authenticating at the identity provider, bound to the decision.

For a reviewer who signs in only through a provider (no usable password, no passkey,
no authenticator app) the proof of presence is a fresh sign-in there. The flow:

1. `issue_challenge(user, digest)`: a nonce for exactly the decisions whose
   `decision_digest` is `digest`, remembered with when it was issued.
2. The site sends the reviewer to the provider with `prompt=login` and `max_age=0`
   (controlplane.accounts.provider_round_trip); when they come back, their ID token is
   verified there and `record_reauthentication` is told its `auth_time` and `sub`.
   The nonce counts as proven only when that sign-in happened after the challenge was
   issued and at most `PROVIDER_STEP_UP_MAX_AGE_SECONDS` ago: a provider that did not
   ask again (an old `auth_time`) proves nothing.
3. The decision comes with `step_up: {"method": "provider", "nonce": ...}`;
   `spend` accepts a proven nonce once, for that digest only.

Nonces live in the cache for `CHALLENGE_SECONDS`, like the passkey's.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache

__all__ = ["CHALLENGE_SECONDS", "issue_challenge", "pending", "proven", "record_reauthentication", "spend"]

CHALLENGE_SECONDS = 300
CLOCK_SKEW_SECONDS = 5


def _key(user: Any, nonce: str) -> str:
    return f"step-up-provider:{user.pk}:{hashlib.sha256(nonce.encode()).hexdigest()}"


def issue_challenge(user: Any, digest: str, *, now: float | None = None) -> str:
    """A fresh nonce for these decisions, to be proven by a re-authentication at the provider."""
    nonce = secrets.token_urlsafe(24)
    cache.set(
        _key(user, nonce),
        {"digest": digest, "issued_at": time.time() if now is None else now, "proven_by": ""},
        timeout=CHALLENGE_SECONDS,
    )
    return nonce


def pending(user: Any, nonce: str) -> bool:
    """Whether `nonce` is an unproven challenge of `user` (worth sending them to the provider for)."""
    entry = cache.get(_key(user, nonce)) if nonce else None
    return entry is not None and bool(entry) and not entry["proven_by"]


def proven(user: Any, nonce: str) -> bool:
    """Whether `nonce` is a challenge of `user` proven and not yet spent (the page waits for it)."""
    entry = cache.get(_key(user, nonce)) if nonce else None
    return entry is not None and bool(entry) and bool(entry["proven_by"])


def record_reauthentication(user: Any, nonce: str, *, provider: str, auth_time: Any, now: float | None = None) -> bool:
    """Mark the challenge proven by a sign-in at `provider` at `auth_time` (from a verified
    ID token); False (and the challenge gone) when that sign-in was not fresh."""
    key = _key(user, nonce)
    entry = cache.get(key) if nonce else None
    if not entry or entry["proven_by"]:
        return False
    now = time.time() if now is None else now
    fresh = (
        isinstance(auth_time, (int, float))
        and not isinstance(auth_time, bool)
        and auth_time >= entry["issued_at"] - CLOCK_SKEW_SECONDS
        and now - auth_time <= settings.PROVIDER_STEP_UP_MAX_AGE_SECONDS
        and auth_time <= now + CLOCK_SKEW_SECONDS
    )
    if not fresh:
        cache.delete(key)
        return False
    remaining = max(1, int(entry["issued_at"] + CHALLENGE_SECONDS - now))
    cache.set(key, {**entry, "proven_by": provider}, timeout=remaining)
    return True


def spend(user: Any, nonce: str, digest: str) -> str:
    """The provider that proved `nonce` for exactly `digest`; "" otherwise. Spent either way."""
    key = _key(user, nonce)
    entry = cache.get(key) if nonce else None
    if not entry or not cache.delete(key):  # the delete decides a race between two uses
        return ""
    return entry["proven_by"] if entry["proven_by"] and entry["digest"] == digest else ""
