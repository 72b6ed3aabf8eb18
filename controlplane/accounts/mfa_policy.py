"""Who must use a second factor, and holding them at enrollment until they have one.

`settings.MFA_REQUIRED_GROUPS` names the groups; unset, it is every group that may
decide a request needing step-up: the approver and escalation groups of enabled rules
at a step-up level (`STEP_UP_RISK_LEVELS`) or with `step_up`, the escalation groups their
notification settings name (every group escalation can hand them to), and the default approver
group when the default level needs step-up. Read at each sign-in, so a rule change or
a new member applies at their next sign-in.

A member who signs in without a TOTP or passkey authenticator is sent to enroll one
(`hold_for_enrollment`, from the allauth adapter), and the session is marked: until
they enroll, `EnrollmentRequiredMiddleware` sends every page back to enrollment and
answers the JSON API with `mfa_enrollment_required`. Once enrolled, allauth asks for
the second factor at every sign-in.
"""

from __future__ import annotations

from typing import Any

from allauth.mfa.models import Authenticator
from django.conf import settings
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from approvals.models import RiskRule, RuleNotification
from controlplane.http.codes import MFA_ENROLLMENT_REQUIRED
from controlplane.http.dual_mode import DualModeMiddleware
from controlplane.http.errors import is_api_path, json_error

__all__ = ["EnrollmentRequiredMiddleware", "hold_for_enrollment", "is_enrolled", "must_enroll", "required_groups"]

SESSION_KEY = "controlplane_mfa_enrollment_required"
SECOND_FACTORS = (Authenticator.Type.TOTP, Authenticator.Type.WEBAUTHN)
# Where a member held at enrollment may still go: enrolling (and the re-authentication
# it may ask for), signing out, and the site's health and static files.
_OPEN_PREFIXES = (
    "/accounts/2fa/",
    "/accounts/reauthenticate/",
    "/accounts/logout/",
    "/logout/",
    "/static/",
    "/healthz",
    "/readyz",
)


def required_groups() -> set[str]:
    """The names of the groups whose members must have a second factor."""
    if settings.MFA_REQUIRED_GROUPS is not None:
        return set(settings.MFA_REQUIRED_GROUPS)
    deciding = RiskRule.objects.filter(enabled=True).filter(
        Q(risk_level__in=settings.STEP_UP_RISK_LEVELS) | Q(step_up=True)
    )
    names = set(deciding.values_list("approver_group__name", flat=True))
    names |= set(deciding.exclude(escalation_group=None).values_list("escalation_group__name", flat=True))
    # Escalation targets of the rules' notification settings decide those levels too.
    names |= set(
        RuleNotification.objects.filter(rule_name__in=deciding.values("name"))
        .exclude(escalation_group=None)
        .values_list("escalation_group__name", flat=True)
    )
    if settings.DEFAULT_RISK_LEVEL in settings.STEP_UP_RISK_LEVELS:
        names.add(settings.DEFAULT_APPROVER_GROUP)
    return names


def is_enrolled(user: Any) -> bool:
    return Authenticator.objects.filter(user=user, type__in=SECOND_FACTORS).exists()


def must_enroll(user: Any) -> bool:
    """Whether `user` is in an MFA-required group and has no second factor yet."""
    groups = required_groups()
    return bool(groups) and user.groups.filter(name__in=groups).exists() and not is_enrolled(user)


def hold_for_enrollment(request: HttpRequest, user: Any) -> HttpResponse | None:
    """At sign-in: mark the session and send the person to enroll, when they must."""
    if not must_enroll(user):
        return None
    request.session[SESSION_KEY] = True
    return HttpResponseRedirect(reverse("mfa_activate_totp"))


def _held(request: HttpRequest) -> bool:
    """Whether this request's session is held at enrollment (releasing it once enrolled)."""
    session = getattr(request, "session", None)
    if session is None or not session.get(SESSION_KEY):
        return False
    user = request.user
    if user.is_authenticated and is_enrolled(user):
        del session[SESSION_KEY]
        return False
    return user.is_authenticated


def _answer_held(request: HttpRequest) -> HttpResponse:
    if is_api_path(request):
        return json_error(MFA_ENROLLMENT_REQUIRED, "Enroll a second factor before acting: sign in on the dashboard.")
    return HttpResponseRedirect(reverse("mfa_activate_totp"))


class EnrollmentRequiredMiddleware(DualModeMiddleware):
    """Keeps a session marked at sign-in on the enrollment pages until it enrolls.

    Requests without a session cookie (agents' bearer tokens, long-polls) pay nothing.
    """

    def blocks(self, request: HttpRequest) -> bool:
        # Only these read the session and the authenticators; the rest answer on the loop.
        return settings.SESSION_COOKIE_NAME in request.COOKIES and not request.path.startswith(_OPEN_PREFIXES)

    def process(self, request: HttpRequest) -> HttpResponse | None:
        if self.blocks(request) and _held(request):
            return _answer_held(request)
        return None
