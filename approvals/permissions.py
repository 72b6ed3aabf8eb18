"""Who may see and decide a request: guardian object permissions, granted to the
classifying rule's approver group, are the enforced check.

Django superusers are deliberately not implicit approvers: deciding needs the
object permission, so every approval traces back to a group an admin assigned.
"""

from __future__ import annotations

from functools import cache

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db.models import Q, QuerySet

from .models import ApprovalRequest, ApprovalRequestGroupObjectPermission, ApprovalRequestUserObjectPermission

VIEW = "view_approvalrequest"
DECIDE = "decide_approvalrequest"

REVIEWERS = "reviewers"
RISK_ADMINS = "risk-admins"
AUDITORS = "auditors"
STANDARD_GROUPS = (REVIEWERS, RISK_ADMINS, AUDITORS)


@cache
def _permission_id(codename: str) -> int:
    return Permission.objects.get(content_type__app_label="approvals", codename=codename).pk


def clear_permission_cache() -> None:
    """Permission ids change when a test database is rebuilt."""
    _permission_id.cache_clear()


def grant_group(request: ApprovalRequest, group: Group) -> None:
    """Give `group` view and decide on `request` (idempotent)."""
    have = set(
        ApprovalRequestGroupObjectPermission.objects.filter(content_object=request, group=group).values_list(
            "permission_id", flat=True
        )
    )
    ApprovalRequestGroupObjectPermission.objects.bulk_create(
        ApprovalRequestGroupObjectPermission(content_object=request, group=group, permission_id=pid)
        for pid in (_permission_id(VIEW), _permission_id(DECIDE))
        if pid not in have
    )


def _holders_of(request: ApprovalRequest, codename: str) -> Q:
    permission_id = _permission_id(codename)
    via_group = ApprovalRequestGroupObjectPermission.objects.filter(
        content_object=request, permission_id=permission_id
    ).values("group_id")
    direct = ApprovalRequestUserObjectPermission.objects.filter(
        content_object=request, permission_id=permission_id
    ).values("user_id")
    return Q(groups__in=via_group) | Q(pk__in=direct)


def excluded_from_approving(request: ApprovalRequest) -> set[int]:
    """Separation of duties: the person the action is for and the agent's owner."""
    return {uid for uid in (request.requested_for_id, request.agent.owner_id) if uid is not None}


def eligible_approvers(request: ApprovalRequest) -> QuerySet:
    """Active people who hold decide on `request` and are not excluded from approving it."""
    return (
        get_user_model()
        .objects.filter(_holders_of(request, DECIDE), is_active=True)
        .exclude(pk__in=excluded_from_approving(request))
        .distinct()
    )


def eligible_approver_count(request: ApprovalRequest) -> int:
    """How many distinct people could approve `request` (counts ids, not whole rows)."""
    return eligible_approvers(request).values("pk").count()


def can_decide(user, request: ApprovalRequest) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    return get_user_model().objects.filter(_holders_of(request, DECIDE), pk=user.pk).exists()


def can_view(user, request: ApprovalRequest) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    return get_user_model().objects.filter(_holders_of(request, VIEW), pk=user.pk).exists()


def _granted_to(user, codename: str) -> QuerySet:
    """Requests on which `user` holds `codename`, via a group or directly: two
    subqueries on guardian's direct-FK tables, so the caller's query stays one query."""
    if not (user and user.is_authenticated and user.is_active):
        return ApprovalRequest.objects.none()
    permission_id = _permission_id(codename)
    via_group = ApprovalRequestGroupObjectPermission.objects.filter(
        permission_id=permission_id, group__in=user.groups.all()
    ).values("content_object_id")
    direct = ApprovalRequestUserObjectPermission.objects.filter(permission_id=permission_id, user=user).values(
        "content_object_id"
    )
    return ApprovalRequest.objects.filter(Q(pk__in=via_group) | Q(pk__in=direct))


def decidable_by(user) -> QuerySet:
    """Every request `user` holds decide on, in any state (narrow with `.pending()`).

    The one queryset the reviewer queue, its resync endpoint and the card fragments
    use. Separation of duties is not applied here: the owner and the requested-for
    person still see the card (they may reject), and `services.approve` refuses them.
    """
    return _granted_to(user, DECIDE)


def viewable_by(user) -> QuerySet:
    """Every request `user` holds view on, in any state (the history page)."""
    return _granted_to(user, VIEW)


def ensure_standard_groups() -> None:
    for name in STANDARD_GROUPS:
        Group.objects.get_or_create(name=name)
