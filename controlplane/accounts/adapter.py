"""How allauth signs people in here: through the sign-in throttle, with no sign-up.

allauth runs the login (its forms, its stages: the second factor, enrollment); this
adapter puts `signin.SignInThrottle` around every password check it makes (the login
form; re-authentication through `password_checks`, as every page that checks a signed-in
person's password or code), so the throttle's semantics hold unchanged: growing
waits per (account, address), never a hard lock, a right password during a wait refused
before it is checked. Each checked failure is audited (`auth.sign_in_failed`; for a
signed-in person `auth.password_check_failed`).
"""

from __future__ import annotations

import time
from typing import Any

from allauth.account import app_settings as account_settings
from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.authentication import get_authentication_records
from allauth.account.utils import get_next_redirect_url
from allauth.core import context
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from django import forms
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_variables

from controlplane import navigation

from . import events, mfa_policy, password_checks
from .signin import SignInThrottle

__all__ = ["AccountAdapter", "SocialAccountAdapter"]


class AccountAdapter(DefaultAccountAdapter):
    # The refusal reads as it did before allauth, for a wrong password and an unknown name alike.
    error_messages = {
        **DefaultAccountAdapter.error_messages,
        "username_password_mismatch": _(
            "Please enter a correct username and password. Note that both fields may be case-sensitive."
        ),
    }

    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return False  # people are created by an admin (or mapped from an identity provider)

    def pre_authenticate(self, request: HttpRequest, **credentials: Any) -> None:
        """allauth's hard login lock is off: `authenticate` throttles instead."""

    @sensitive_variables("credentials")
    def authenticate(self, request: HttpRequest, **credentials: Any) -> Any:
        """Check a password under the throttle; the user, or None (counted and audited).

        A right password for an inactive account is refused like a wrong one, and counts:
        otherwise which guess did not count would tell a guesser it was right.
        """
        if not settings.LOCAL_PASSWORD_LOGIN:
            raise forms.ValidationError(
                "Passwords are turned off here: sign in with your identity provider.", code="password_login_off"
            )
        username = str(credentials.get("username") or "")
        throttle = SignInThrottle.for_attempt(request, username, via="dashboard")
        authenticate = super().authenticate
        signed_in: list[Any] = []

        def password_is_right() -> bool:
            user = authenticate(request, **credentials)
            if user is not None and user.is_active:
                signed_in.append(user)
            return bool(signed_in)

        def refused(delay: int) -> None:
            events.sign_in_failed(throttle, factor="password", delay=delay)

        return signed_in[0] if throttle.check(password_is_right, on_wrong=refused) else None

    @sensitive_variables("password")
    def reauthenticate(self, user: Any, password: str) -> bool:
        """A signed-in person's password again (`/accounts/reauthenticate/`), under the
        sign-in throttle; wrong ones count towards ending the session (`password_checks`)."""
        if not settings.LOCAL_PASSWORD_LOGIN:
            raise forms.ValidationError(
                "Passwords are turned off here: sign in with your identity provider.", code="password_login_off"
            )
        return password_checks.password_is_right(
            context.request, user, password, purpose=password_checks.REAUTHENTICATE
        )

    def is_reauthentication_required(self, *, app: str, **kwargs: Any) -> bool:
        """A sign-in as recent as a re-authentication counts as one: who was just sent to
        enroll a second factor at sign-in is not asked for the password again."""
        if not super().is_reauthentication_required(app=app, **kwargs):
            return False
        request = context.request
        if request is None or not request.user.is_authenticated:
            return True
        signed_in_at = [entry.get("at", 0) for entry in get_authentication_records(request, request.user)]
        return not signed_in_at or time.time() - max(signed_in_at) >= account_settings.REAUTHENTICATION_TIMEOUT

    def get_login_redirect_url(self, request: HttpRequest) -> str:
        """Each role lands on its own page (a `next` the sign-in carried wins: allauth
        asks it first). Identity-provider sign-ins come through here too."""
        return navigation.landing_url(request.user)

    def get_signup_redirect_url(self, request: HttpRequest) -> str:
        # A first sign-in through an identity provider is a sign-up to allauth.
        return navigation.landing_url(request.user)

    def logout(self, request: HttpRequest) -> None:
        events.signed_out(request)
        super().logout(request)

    def post_login(self, request: HttpRequest, user: Any, **kwargs: Any) -> HttpResponse:
        response = super().post_login(request, user, **kwargs)
        if not kwargs.get("redirect_url") and not get_next_redirect_url(request) and response.has_header("Location"):
            # allauth picks the landing page before it sends `user_logged_in`, and an
            # identity provider's groups are applied by that signal (`sso`): look again
            # at the person as they are now, not through permissions cached before.
            response["Location"] = navigation.landing_url(type(user)._default_manager.get(pk=user.pk))
        return mfa_policy.hold_for_enrollment(request, user) or response


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def is_open_for_signup(self, request: HttpRequest, sociallogin: Any) -> bool:
        """Someone a configured identity provider vouches for gets an account at their
        first sign-in; what they may do comes from its groups claim (`sso`)."""
        return True
