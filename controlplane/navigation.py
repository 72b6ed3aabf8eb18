"""What every page built on templates/base.html needs: the navigation a person's
groups allow, and whether the emergency stop is on (the banner)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.functional import SimpleLazyObject

from approvals.emergency import current_stop_state
from approvals.permissions import AUDITORS, REVIEWERS, RISK_ADMINS


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
        links += [NavLink("Queue", _url("approvals:queue", "/"), "queue"),
                  NavLink("History", _url("approvals:history", "/history/"), "history")]
    if RISK_ADMINS in groups or user.is_superuser:
        links.append(NavLink("Rules", _url("rules:list", "/rules/"), "rules"))
    if AUDITORS in groups or user.is_superuser:
        links.append(NavLink("Audit log", _url("audit:log", "/audit/"), "audit"))
    return links


def site_shell(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    return {
        "nav_links": SimpleLazyObject(lambda: nav_links(user)),
        # {"global": StopState | None, "agents": [StopState, ...]}; two queries, only if rendered.
        "emergency": SimpleLazyObject(current_stop_state),
    }
