"""Every password or code checked for a known person goes through the one sign-in throttle.

allauth's pages that check a secret of a person already known (signed in, or half
way through signing in) do it in three places, each hooked here:

- `AccountAdapter.reauthenticate` (allauth's `/accounts/reauthenticate/` and anything
  else that re-asks the password through the adapter);
- the password-change form's `oldpassword` (`ChangePasswordForm`, via ACCOUNT_FORMS);
- the second-factor forms (`AuthenticateForm` at sign-in, `ReauthenticateForm` at
  `/accounts/2fa/reauthenticate/`; each takes a TOTP or a recovery code; via MFA_FORMS).

The sign-in form itself is `AccountAdapter.authenticate`; a step-up password or code
(`approvals.services.step_up`, which cannot import this) meets the same throttle through
`StepUpGate`, installed at start (`install`). Each check runs inside
`signin.SignInThrottle` for (the person's username, the client address), so its
failures count with sign-in failures: growing waits per account, never a hard lock,
and a right secret during a wait is refused before it is checked.

A refused check by a signed-in person is audited (`auth.password_check_failed`, naming
the page's purpose and the factor, never what was typed) and counted with that
person's wrong step-up proofs (`approvals.services.step_up.count_wrong_proof`):
`STEP_UP_FAILURE_LIMIT` wrong ones in a row, on any of these pages or at step-up, end
the session they came through (`auth.session_ended`). So a stolen session is no
password oracle: guessing on needs a fresh sign-in, which is the throttled page.
At the sign-in stage (no session yet) a refused code is `auth.sign_in_failed`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from allauth.account.forms import ChangePasswordForm as AllauthChangePasswordForm
from allauth.core import context
from allauth.mfa.base.forms import AuthenticateForm as AllauthAuthenticateForm
from allauth.mfa.base.forms import ReauthenticateForm as AllauthReauthenticateForm
from django import forms
from django.conf import settings
from django.contrib.auth import logout
from django.http import HttpRequest
from django.views.decorators.debug import sensitive_variables

from approvals.services import step_up
from approvals.services.step_up import count_wrong_proof, forget_wrong_proofs
from audit.chain import Actor, digest, record

from .signin import SignInThrottle

__all__ = [
    "CHANGE_PASSWORD",
    "MFA_REAUTHENTICATE",
    "MFA_SIGN_IN",
    "REAUTHENTICATE",
    "AuthenticateForm",
    "ChangePasswordForm",
    "ReauthenticateForm",
    "check_secret",
    "install",
]

# The page's purpose, as audited.
REAUTHENTICATE = "reauthenticate"
CHANGE_PASSWORD = "password_change"
MFA_REAUTHENTICATE = "mfa_reauthenticate"
MFA_SIGN_IN = "mfa_sign_in"
STEP_UP = "step_up"

SESSION_ENDED_MESSAGE = "Too many wrong passwords or codes: you have been signed out. Sign in again to continue."


@sensitive_variables("check")
def check_secret(
    request: HttpRequest | None,
    user: Any,
    *,
    purpose: str,
    factor: str,
    check: Callable[[], bool | None],
    signed_in: bool = True,
) -> bool:
    """Run `check` (does the secret `user` typed match?) under the sign-in throttle.

    True when right (the pair's wait and the person's wrong-in-a-row count are cleared;
    also when `check` returns None: it refused on its own without checking, and the
    caller raises that refusal). False when wrong: counted, audited, and, for a signed-in
    person at the limit, their session ended and a ValidationError (code
    `session_ended`) raised instead. Raises a ValidationError (code `throttled`) without
    checking while the pair must wait, or when this wrong one starts a wait.
    """
    throttle = SignInThrottle.for_attempt(request, user.get_username(), via=purpose)

    def refused(delay: int) -> None:
        _refused(request, user, throttle, purpose=purpose, factor=factor, delay=delay, signed_in=signed_in)

    right = throttle.check(check, on_wrong=refused)
    if right and signed_in:
        forget_wrong_proofs(user)
    return right is not False


def _refused(
    request: HttpRequest | None,
    user: Any,
    throttle: SignInThrottle,
    *,
    purpose: str,
    factor: str,
    delay: int,
    signed_in: bool,
) -> None:
    if not signed_in:
        return  # the sign-in stage's refusal is audited by allauth's signal (`events`)
    address = digest(throttle.address)
    failures = count_wrong_proof(user)
    limit = settings.STEP_UP_FAILURE_LIMIT
    record(
        "auth.password_check_failed",
        actor=Actor.for_user(user),
        metadata={
            "purpose": purpose,
            "factor": factor,
            "address": address,
            "delay_seconds": delay,
            "failures": failures,
            "limit": limit,
        },
    )
    if failures < limit:
        return
    forget_wrong_proofs(user)
    ended = False
    if request is not None and getattr(request, "session", None) is not None:
        logout(request)  # flushes this session (a new, empty one is saved in its place)
        ended = True
    record(
        "auth.session_ended",
        actor=Actor.for_user(user),
        metadata={
            "reason": "password_check_failures",
            "purpose": purpose,
            "failures": failures,
            "session_ended": ended,
        },
    )
    raise forms.ValidationError(SESSION_ENDED_MESSAGE, code="session_ended")


def password_is_right(request: Any, user: Any, password: str, *, purpose: str) -> bool:
    """Whether `password` is `user`'s, checked under the one throttle (see `check_secret`).

    The only place an account page's password is compared: the adapter and the forms
    below translate allauth's calls into this, as the decision views translate into
    the step-up service.
    """
    return check_secret(
        request,
        user,
        purpose=purpose,
        factor="password",
        check=lambda: user.is_active and user.check_password(password),
    )


# --- allauth's forms, each check wrapped -------------------------------------------------------


class ChangePasswordForm(AllauthChangePasswordForm):
    """allauth's password change; the current password is checked under the throttle."""

    @sensitive_variables()
    def clean_oldpassword(self) -> str:
        password = self.cleaned_data.get("oldpassword", "")
        user = self.user
        if not password_is_right(context.request, user, password, purpose=CHANGE_PASSWORD):
            raise forms.ValidationError(self._wrong_message(), code="enter_current_password")
        return password

    @staticmethod
    def _wrong_message() -> str:
        from allauth.account.adapter import get_adapter

        return str(get_adapter().error_messages["enter_current_password"])


class _ThrottledCodeMixin:
    """allauth's second-factor form (TOTP or recovery code), checked under the throttle."""

    purpose = ""
    signed_in = True

    def clean_code(self) -> str:
        user = self.user  # type: ignore[attr-defined]
        outcome: dict[str, Any] = {}

        def right() -> bool | None:
            try:
                outcome["code"] = super(_ThrottledCodeMixin, self).clean_code()  # type: ignore[misc]
            except forms.ValidationError as refused:
                if getattr(refused, "code", None) != "incorrect_code":
                    outcome["other"] = refused  # allauth's own refusal (its rate limit): not a check
                    return None
                outcome["wrong"] = refused
                return False
            return True

        if not check_secret(
            context.request, user, purpose=self.purpose, factor="mfa_code", check=right, signed_in=self.signed_in
        ):
            raise outcome["wrong"]
        if "other" in outcome:
            raise outcome["other"]
        return outcome["code"]


class AuthenticateForm(_ThrottledCodeMixin, AllauthAuthenticateForm):
    """The second factor at sign-in: the person is not signed in yet (no session to end)."""

    purpose = MFA_SIGN_IN
    signed_in = False


class ReauthenticateForm(_ThrottledCodeMixin, AllauthReauthenticateForm):
    """`/accounts/2fa/reauthenticate/`: a signed-in person's code."""

    purpose = MFA_REAUTHENTICATE


# --- Step-up: the services' view of the throttle ----------------------------------------------


class StepUpGate:
    """`approvals.services.step_up.SecretGate`: the sign-in throttle for step-up passwords and codes.

    The client address is the current request's (allauth's middleware keeps it for every
    page and API call); the wrong-in-a-row count and the session end stay step-up's own.
    """

    def wait_seconds(self, user: Any) -> int:
        try:
            return _step_up_throttle(user).seconds_to_wait()
        except Exception:  # noqa: BLE001  (the cache is down: a brake, not a lock; signin._cache_down)
            return 0

    def checked(self, user: Any, *, method: str, right: bool) -> None:
        throttle = _step_up_throttle(user)
        if right:
            throttle.succeeded()
        else:
            throttle.failed()


def _step_up_throttle(user: Any) -> SignInThrottle:
    return SignInThrottle.for_attempt(context.request, user.get_username(), via=STEP_UP)


def install() -> None:
    """Put the sign-in throttle in front of step-up's password and code checks (at start)."""
    step_up.install_secret_gate(StepUpGate())
