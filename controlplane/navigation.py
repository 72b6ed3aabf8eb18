"""What every page built on templates/base.html needs: the navigation a person's
groups allow, and whether the emergency stop is on (the banner)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.functional import SimpleLazyObject

from approvals.emergency import current_stop_state
from approvals.models import RiskRule
from approvals.permissions import AUDITORS, REVIEWERS, RISK_ADMINS
from approvals.policy import is_risk_admin
from audit.views import VIEW_PERMISSION as AUDIT_VIEW


@dataclass(frozen=True)
class NavLink:
    label: str
    url: str
    key: str


def _url(name: str, fallback: str) -> str:
    # Pages other apps build may not be wired yet; the plain path still works once they are.
    try:
        return reverse(name)
    except NoReverseMatch:
        return fallback


def nav_links(user) -> list[NavLink]:
    """The links `user`'s groups open. One query (the group names)."""
    if not (user and user.is_authenticated):
        return []
    groups = set(user.groups.values_list("name", flat=True))
    links = []
    if REVIEWERS in groups or user.is_superuser:
        links += [
            NavLink("Queue", _url("approvals:queue", "/"), "queue"),
            NavLink("History", _url("approvals:history", "/history/"), "history"),
        ]
    if RISK_ADMINS in groups or user.is_superuser:
        links.append(NavLink("Rules", _url("rules:list", "/rules/"), "rules"))
    if AUDITORS in groups or user.is_superuser:
        links.append(NavLink("Audit log", _url("audit:log", "/audit/"), "audit"))
    return links


def can_review(user) -> bool:
    """Whether `user` has a queue to look at: a member of `reviewers`, or of any group a
    rule sends requests to (approver or escalation group), or a superuser. One query."""
    if not (user and user.is_authenticated):
        return False
    if user.is_superuser:
        return True
    return user.groups.filter(
        Q(name=REVIEWERS)
        | Q(pk__in=RiskRule.objects.values("approver_group"))
        | Q(pk__in=RiskRule.objects.filter(escalation_group__isnull=False).values("escalation_group"))
    ).exists()


def landing_url(user) -> str:
    """Where `user` lands after signing in (password and identity provider alike): the
    queue for whoever may review, else the rules for a risk admin, else the audit log for
    an auditor. Someone with several roles who can review lands on the queue, where work
    waits; someone with none lands on the queue too, which says what they may do."""
    if can_review(user):
        return _url("approvals:queue", "/")
    if is_risk_admin(user):
        return _url("rules:list", "/rules/")
    if user.has_perm(AUDIT_VIEW):
        return _url("audit:log", "/audit/")
    return _url("approvals:queue", "/")


def site_shell(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    return {
        "nav_links": SimpleLazyObject(lambda: nav_links(user)),
        # {"global": StopState | None, "agents": [StopState, ...]}; two queries, only if rendered.
        "emergency": SimpleLazyObject(current_stop_state),
    }
