"""How long a signed-in session lasts: an idle timeout and an absolute lifetime.

A reviewer's session can approve payments, so a laptop left open or a stolen cookie
must stop working: after `SESSION_IDLE_TIMEOUT_SECONDS` without a request (default
30 min) and `SESSION_MAX_AGE_SECONDS` after sign-in however busy (default 12 h),
the session is flushed and the next request is anonymous. The last-seen stamp is
written at most once a minute, so an active reviewer does not cost a session write
per request. Sessions without a sign-in are left alone.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver
from django.http import HttpRequest

from controlplane.http.dual_mode import DualModeMiddleware

__all__ = ["SessionLifetimeMiddleware", "enforce_session_lifetime"]

SIGNED_IN_AT = "_signed_in_at"
LAST_SEEN_AT = "_last_seen_at"
# How stale the last-seen stamp may get before it is rewritten.
SEEN_RESOLUTION_SECONDS = 60


@receiver(user_logged_in, dispatch_uid="stamp-session-sign-in")
def _stamp_sign_in(sender, request, user, **kwargs) -> None:
    if request is not None and hasattr(request, "session"):
        now = int(time.time())
        request.session[SIGNED_IN_AT] = now
        request.session[LAST_SEEN_AT] = now


def enforce_session_lifetime(session, *, now: float | None = None) -> bool:
    """Flush `session` if it outlived either limit; True when it did."""
    signed_in_at = session.get(SIGNED_IN_AT)
    if signed_in_at is None:
        if "_auth_user_id" in session:  # signed in before these limits existed: start counting now
            session[SIGNED_IN_AT] = session[LAST_SEEN_AT] = int(now if now is not None else time.time())
        return False
    now = int(now if now is not None else time.time())
    last_seen_at = session.get(LAST_SEEN_AT, signed_in_at)
    if (
        now - signed_in_at > settings.SESSION_MAX_AGE_SECONDS
        or now - last_seen_at > settings.SESSION_IDLE_TIMEOUT_SECONDS
    ):
        session.flush()
        return True
    if now - last_seen_at >= SEEN_RESOLUTION_SECONDS:
        session[LAST_SEEN_AT] = now
    return False


class SessionLifetimeMiddleware(DualModeMiddleware):
    """Between the session and authentication middleware: an expired session signs out.

    Async-capable, and requests without a session cookie (agents' bearer-token calls,
    long-polls) pass straight through without touching the session store.
    """

    def blocks(self, request: HttpRequest) -> bool:
        return settings.SESSION_COOKIE_NAME in request.COOKIES  # the session store is read

    def process(self, request: HttpRequest) -> None:
        if settings.SESSION_COOKIE_NAME in request.COOKIES:
            enforce_session_lifetime(request.session)
