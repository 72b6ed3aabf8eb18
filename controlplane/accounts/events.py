"""Who signed in, out, or failed to, and who changed their second factor: audit chain events.

- `auth.signed_in`: a completed allauth login (every stage passed, a second factor
  included), naming how: `methods` is the list of factors used, e.g.
  `["password", "totp"]`. Sessions made without the login (tests' force_login, a
  management command) are not sign-ins and are not recorded.
- `auth.signed_out`: a sign-out the person chose (the sign-out button, the admin's,
  allauth's); a session ended by repeated wrong step-ups is `auth.session_ended`.
- `auth.sign_in_failed`: a password or a second-factor code checked and refused. The
  account is named only when exactly one user has it (`SignInThrottle`'s rule): what
  was typed may be a pasted password.
- `auth.mfa_enrolled` / `auth.mfa_removed`: an authenticator added or removed (TOTP,
  a set of recovery codes, a passkey), by its type and id, never its secret.
- `auth.recovery_code_used`: a recovery code spent, with how many are left.

Addresses are stored as keyed digests (`audit.chain.digest`), as throttling does.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar

from allauth.account.authentication import get_authentication_records
from allauth.account.signals import user_logged_in as allauth_logged_in
from allauth.mfa import signals as mfa_signals
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from audit.chain import Actor, digest, record

from .signin import SYSTEM_ACTOR_LABEL, SignInThrottle, client_address

__all__ = ["audited_logout", "connect", "sign_in_failed", "signed_out"]

DISPATCH_UID = "controlplane.accounts.events"
RECOVERY_CODES = "recovery_codes"


def sign_in_failed(throttle: SignInThrottle, *, factor: str, delay: int = 0) -> None:
    """A refused password (or code) check for the throttle's account and address."""
    record(
        "auth.sign_in_failed",
        actor=Actor.system(SYSTEM_ACTOR_LABEL),
        metadata={
            **throttle._account_metadata(),
            "address": digest(throttle.address),
            "factor": factor,
            "delay_seconds": delay,
        },
    )


def factors_used(request: HttpRequest, user: Any) -> list[str]:
    """The factors of this session's sign-in, in order: "password", "totp", "recovery_codes"..."""
    used = []
    for entry in get_authentication_records(request, user):
        factor = entry.get("type") if entry.get("method") == "mfa" else entry.get("method")
        if factor and not entry.get("reauthenticated") and factor not in used:
            used.append(str(factor))
    return used


def _on_signed_in(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    record(
        "auth.signed_in",
        actor=Actor.for_user(user),
        metadata={"address": digest(client_address(request)), "methods": factors_used(request, user)},
    )


def signed_out(request: HttpRequest) -> None:
    """A person chose to sign out (a session ended for them is audited by what ended it)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return
    record("auth.signed_out", actor=Actor.for_user(user), metadata={"address": digest(client_address(request))})


_Params = ParamSpec("_Params")
_Response = TypeVar("_Response", bound=HttpResponseBase)


def audited_logout(
    view: Callable[Concatenate[HttpRequest, _Params], _Response],
) -> Callable[Concatenate[HttpRequest, _Params], _Response]:
    """`view`, a logout view, auditing each sign-out through it (its signature kept)."""

    @wraps(view)
    def logout(request: HttpRequest, /, *args: _Params.args, **kwargs: _Params.kwargs) -> _Response:
        if request.method == "POST":
            signed_out(request)
        return view(request, *args, **kwargs)

    return logout


def _authenticator(authenticator: Any) -> dict[str, Any]:
    return {"type": str(authenticator.type), "authenticator_id": authenticator.pk}


def _on_authenticator_added(sender: Any, request: HttpRequest, user: Any, authenticator: Any, **kwargs: Any) -> None:
    record("auth.mfa_enrolled", actor=Actor.for_user(user), metadata=_authenticator(authenticator))


def _on_authenticator_removed(sender: Any, request: HttpRequest, user: Any, authenticator: Any, **kwargs: Any) -> None:
    record("auth.mfa_removed", actor=Actor.for_user(user), metadata=_authenticator(authenticator))


def _on_authenticator_used(
    sender: Any, request: HttpRequest, user: Any, authenticator: Any, reauthenticated: bool = False, **kwargs: Any
) -> None:
    if authenticator.type != RECOVERY_CODES:
        return
    # allauth marks the code used on a fresh copy of the row; count from the row.
    remaining = len(type(authenticator).objects.get(pk=authenticator.pk).wrap().get_unused_codes())
    record(
        "auth.recovery_code_used",
        actor=Actor.for_user(user),
        metadata={**_authenticator(authenticator), "remaining": remaining, "reauthenticated": bool(reauthenticated)},
    )


def _on_code_refused(
    sender: Any,
    request: HttpRequest,
    user: Any,
    authenticator: Any = None,
    reauthentication: bool = False,
    **kwargs: Any,
) -> None:
    if reauthentication:
        return  # a signed-in person's code: `password_checks` audits it (auth.password_check_failed)
    throttle = SignInThrottle.for_attempt(request, user.get_username(), via="dashboard")
    # Which authenticator a wrong code was meant for is a guess (allauth names the TOTP
    # one whenever the person has it), so the factor says only "a second-factor code".
    sign_in_failed(throttle, factor="mfa_code")


def connect() -> None:
    allauth_logged_in.connect(_on_signed_in, dispatch_uid=DISPATCH_UID)
    mfa_signals.authenticator_added.connect(_on_authenticator_added, dispatch_uid=DISPATCH_UID)
    mfa_signals.authenticator_removed.connect(_on_authenticator_removed, dispatch_uid=DISPATCH_UID)
    mfa_signals.authenticator_used.connect(_on_authenticator_used, dispatch_uid=DISPATCH_UID)
    mfa_signals.authentication_failed.connect(_on_code_refused, dispatch_uid=DISPATCH_UID)
