"""Signing in to the dashboard, with login throttling.

Failures are counted per (username, client address) in the cache with an atomic
increment (Redis when REDIS_URL is set, so every web process shares the count).
After `LOGIN_FAILURE_LIMIT` failures that pair is locked out for
`LOGIN_LOCKOUT_SECONDS`: even the right password is refused until then, with a
message that says so. The admin's login form is throttled the same way.
"""

from __future__ import annotations

import hashlib

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest

__all__ = ["LoginThrottle", "ThrottledAdminAuthenticationForm", "ThrottledAuthenticationForm", "LoginView"]

LOCKED_MESSAGE = "Too many failed sign-in attempts. This account is locked here for {minutes} minutes; try again later."


class LoginThrottle:
    """Failure counting for one (username, address) pair."""

    def __init__(self, username: str, address: str) -> None:
        ident = hashlib.sha256(f"{username.strip().lower()}|{address}".encode()).hexdigest()[:32]
        self.failures_key = f"login-failures:{ident}"
        self.lock_key = f"login-locked:{ident}"

    @classmethod
    def for_request(cls, request: HttpRequest | None, username: str) -> LoginThrottle:
        # REMOTE_ADDR only: X-Forwarded-For is client-controlled unless a trusted proxy rewrites it.
        address = request.META.get("REMOTE_ADDR", "") if request is not None else ""
        return cls(username, address)

    @property
    def locked(self) -> bool:
        return bool(cache.get(self.lock_key))

    def failed(self) -> bool:
        """Count one failure; True when this failure locked the pair out."""
        window = settings.LOGIN_LOCKOUT_SECONDS
        cache.add(self.failures_key, 0, timeout=window)
        try:
            count = cache.incr(self.failures_key)
        except ValueError:  # the counter expired between add and incr
            cache.set(self.failures_key, 1, timeout=window)
            count = 1
        if count >= settings.LOGIN_FAILURE_LIMIT:
            cache.set(self.lock_key, True, timeout=window)
            cache.delete(self.failures_key)
            return True
        return False

    def succeeded(self) -> None:
        cache.delete(self.failures_key)

    def clear(self) -> None:
        cache.delete_many([self.failures_key, self.lock_key])


class _ThrottledMixin:
    """Refuses a locked-out pair before checking the password, and counts failures."""

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        throttle = LoginThrottle.for_request(self.request, username)
        if throttle.locked:
            raise forms.ValidationError(self.error_messages["locked"], code="locked")
        try:
            cleaned = super().clean()
        except forms.ValidationError as error:
            if throttle.failed():
                raise forms.ValidationError(self.error_messages["locked"], code="locked") from error
            raise
        throttle.succeeded()
        return cleaned


def _locked_message() -> dict[str, str]:
    return {"locked": LOCKED_MESSAGE.format(minutes=max(1, settings.LOGIN_LOCKOUT_SECONDS // 60))}


class ThrottledAuthenticationForm(_ThrottledMixin, AuthenticationForm):
    error_messages = {**AuthenticationForm.error_messages, **_locked_message()}


class ThrottledAdminAuthenticationForm(_ThrottledMixin, AdminAuthenticationForm):
    error_messages = {**AdminAuthenticationForm.error_messages, **_locked_message()}


class LoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    authentication_form = ThrottledAuthenticationForm
    redirect_authenticated_user = True
