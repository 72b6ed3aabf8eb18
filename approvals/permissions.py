"""Who may see and decide a request: guardian object permissions, granted to the
classifying rule's approver group, are the enforced check.

Django superusers are deliberately not implicit approvers: deciding needs the
object permission, so every approval traces back to a group an admin assigned.
"""

from __future__ import annotations

from functools import cache, reduce
from operator import or_

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.db.models import IntegerField, Q, QuerySet, Value

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
    """Give `group` view and decide on `request` (idempotent: guardian's unique
    (group, permission, object) constraint skips rows it already has, in one INSERT)."""
    ApprovalRequestGroupObjectPermission.objects.bulk_create(
        [
            ApprovalRequestGroupObjectPermission(content_object=request, group=group, permission_id=pid)
            for pid in (_permission_id(VIEW), _permission_id(DECIDE))
        ],
        ignore_conflicts=True,
    )


def revoke_decide_except(request: ApprovalRequest, keep: Group | None) -> list[int]:
    """Take decide on `request` from every group but `keep` (and from anyone holding it
    directly); view stays, so their history still shows the request. Returns the ids of
    the groups that lost it, whose cards must go."""
    decide = _permission_id(DECIDE)
    by_group = ApprovalRequestGroupObjectPermission.objects.filter(content_object=request, permission_id=decide)
    if keep is not None:
        by_group = by_group.exclude(group_id=keep.pk)
    losing = sorted(set(by_group.values_list("group_id", flat=True)))
    by_group.delete()
    ApprovalRequestUserObjectPermission.objects.filter(content_object=request, permission_id=decide).delete()
    return losing


def is_eligible_member(user, group: Group | None) -> bool:
    """Whether `user` is an active member of `group` (who a regrouped request's decide goes to)."""
    if group is None or not (user and user.is_active):
        return False
    return user.groups.filter(pk=group.pk).exists()


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


def eligible_approver_count_of_new_request(request: ApprovalRequest) -> int:
    """`eligible_approver_count` for a request classification has just inserted.

    Such a request's only holders of decide are its approver group's members
    (classification grants the group; nothing grants users directly at submission),
    so the eligible approvers are the group's active members other than the people
    excluded from approving it. Counted straight from the membership table: the
    general query joins the permission tables and costs ~5 ms to build on every
    submission (README "Performance"). Tests hold the two counts equal.
    """
    if request.approver_group_id is None:
        return 0
    user_model = get_user_model()
    membership = user_model.groups.through._meta
    quote = connection.ops.quote_name
    user_id = quote(membership.get_field("user").column)
    excluded = sorted(excluded_from_approving(request))
    sql = (
        f"SELECT COUNT(*) FROM {quote(user_model._meta.db_table)} u"
        f" JOIN {quote(membership.db_table)} m ON m.{user_id} = u.{quote(user_model._meta.pk.column)}"
        f" WHERE m.{quote(membership.get_field('group').column)} = %s"
        f" AND u.{quote(user_model._meta.get_field('is_active').column)} = %s"
    )
    if excluded:
        sql += f" AND m.{user_id} NOT IN ({', '.join(['%s'] * len(excluded))})"
    with connection.cursor() as cursor:
        cursor.execute(sql, [request.approver_group_id, True, *excluded])
        return cursor.fetchone()[0]


def can_decide(user, request: ApprovalRequest) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    return get_user_model().objects.filter(_holders_of(request, DECIDE), pk=user.pk).exists()


_DIRECT = 0  # marks "holds a direct permission" among group ids (which are positive)


def _holdings(user, permission_id: int) -> tuple[list[int], bool]:
    """The user's group ids, and whether they hold `permission_id` directly on any
    request: one small query (a UNION of the two)."""
    direct = ApprovalRequestUserObjectPermission.objects.filter(user=user, permission_id=permission_id)
    found = set(
        Group.objects.filter(user=user).order_by().values_list("pk", flat=True).union(
            direct.order_by().values_list(Value(_DIRECT, output_field=IntegerField()), flat=True)
        )
    )
    return sorted(found - {_DIRECT}), _DIRECT in found


def _granted_to(user, codename: str, requests: QuerySet | None = None) -> QuerySet:
    """`requests` (default: all) on which `user` holds `codename`, via a group or directly.

    The group ids go into the SQL as literals, as one `IN (subquery)` on guardian's
    group table, which PostgreSQL turns into a semi-join it can plan from its
    statistics: for a reviewer whose groups hold most of 100k pending requests it walks
    the queue's ordering index and probes guardian's unique (group, permission, object)
    index per row, stopping at the LIMIT; for one whose groups hold few it starts from
    those permission rows. An `... OR id IN (direct subquery)` beside it forces a
    hashed subplan over every permitted row on each page (what made the queue slow at
    100k), so the direct-permission branch is only added for people who hold one.
    """
    requests = ApprovalRequest.objects.all() if requests is None else requests
    if not (user and user.is_authenticated and user.is_active) or getattr(user, "pk", None) is None:
        return requests.none()
    permission_id = _permission_id(codename)
    group_ids, has_direct = _holdings(user, permission_id)
    grants = []
    if group_ids:
        grants.append(Q(pk__in=ApprovalRequestGroupObjectPermission.objects.filter(
            permission_id=permission_id, group_id__in=group_ids).values("content_object_id")))
    if has_direct:
        grants.append(Q(pk__in=ApprovalRequestUserObjectPermission.objects.filter(
            permission_id=permission_id, user=user).values("content_object_id")))
    if not grants:
        return requests.none()
    return requests.filter(reduce(or_, grants))


def decidable_by(user, requests: QuerySet | None = None) -> QuerySet:
    """Every request `user` holds decide on, in any state (narrow with `.pending()`);
    `requests` narrows the starting queryset (e.g. one with select_related).

    The one queryset the reviewer queue, its resync endpoint and the card fragments
    use. Separation of duties is not applied here: the owner and the requested-for
    person still see the card (they may reject), and `services.approve` refuses them.
    Costs one small query when called (the user's groups), so the caller's queryset
    stays one query however many requests exist; group membership is read then, so
    build the queryset where it is used rather than keeping it around.
    """
    return _granted_to(user, DECIDE, requests)


def viewable_by(user, requests: QuerySet | None = None) -> QuerySet:
    """Every request `user` holds view on, in any state (the history page, the API list)."""
    return _granted_to(user, VIEW, requests)


def ensure_standard_groups() -> None:
    for name in STANDARD_GROUPS:
        Group.objects.get_or_create(name=name)
