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
from django.db.models.expressions import RawSQL

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


def grant_group(request: ApprovalRequest, group: Group, *, decide: bool = True) -> None:
    """Give `group` view and (unless `decide` is false) decide on `request` (idempotent:
    guardian's unique (group, permission, object) constraint skips rows it already
    has, in one INSERT)."""
    ApprovalRequestGroupObjectPermission.objects.bulk_create(
        [
            ApprovalRequestGroupObjectPermission(content_object=request, group=group, permission_id=pid)
            for pid in ((_permission_id(VIEW), _permission_id(DECIDE)) if decide else (_permission_id(VIEW),))
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
    """Active people who hold decide on `request` (through a group or directly) and
    are not excluded from approving it."""
    sql, params = _eligible_approver_ids(request)
    return get_user_model().objects.filter(pk__in=RawSQL(sql, params))


def eligible_approver_count(request: ApprovalRequest) -> int:
    """How many distinct people could approve `request`."""
    sql, params = _eligible_approver_ids(request)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM ({sql}) eligible", params)
        return cursor.fetchone()[0]


def _eligible_approver_ids(request: ApprovalRequest) -> tuple[str, list]:
    """The SQL selecting the ids of `eligible_approvers(request)`, and its parameters.

    Written out rather than built with the ORM: the count runs on every submission
    that waits for a person, and the ORM spent ~1.8 ms of CPU building the count's
    subqueries against ~0.25 ms for this, an eighth of a submission's CPU
    (tests/perf/bench_submit.py, in-process figure). The queryset and the count both
    read this one statement; tests/approvals/test_submit_path.py pins its counts.
    """
    user_model = get_user_model()
    users, membership = user_model._meta, user_model.groups.through._meta
    by_group, direct = ApprovalRequestGroupObjectPermission._meta, ApprovalRequestUserObjectPermission._meta
    quote = connection.ops.quote_name

    def column(meta, name: str) -> str:
        return quote(meta.get_field(name).column)

    user_pk = quote(users.pk.column)
    sql = (
        f"SELECT u.{user_pk} FROM {quote(users.db_table)} u"
        f" WHERE u.{column(users, 'is_active')} = %s AND (u.{user_pk} IN ("
        f"SELECT m.{column(membership, 'user')} FROM {quote(membership.db_table)} m"
        f" JOIN {quote(by_group.db_table)} g ON g.{column(by_group, 'group')} = m.{column(membership, 'group')}"
        f" WHERE g.{column(by_group, 'content_object')} = %s AND g.{column(by_group, 'permission')} = %s"
        f") OR u.{user_pk} IN ("
        f"SELECT d.{column(direct, 'user')} FROM {quote(direct.db_table)} d"
        f" WHERE d.{column(direct, 'content_object')} = %s AND d.{column(direct, 'permission')} = %s))"
    )
    decide = _permission_id(DECIDE)
    # As the database stores it (SQLite keeps a UUID as 32 hex digits, PostgreSQL as uuid).
    request_id = ApprovalRequest._meta.pk.get_db_prep_value(request.pk, connection)
    params: list = [True, request_id, decide, request_id, decide]
    excluded = sorted(excluded_from_approving(request))
    if excluded:
        sql += f" AND u.{user_pk} NOT IN ({', '.join(['%s'] * len(excluded))})"
        params.extend(excluded)
    return sql, params


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
        Group.objects.filter(user=user)
        .order_by()
        .values_list("pk", flat=True)
        .union(direct.order_by().values_list(Value(_DIRECT, output_field=IntegerField()), flat=True))
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
        grants.append(
            Q(
                pk__in=ApprovalRequestGroupObjectPermission.objects.filter(
                    permission_id=permission_id, group_id__in=group_ids
                ).values("content_object_id")
            )
        )
    if has_direct:
        grants.append(
            Q(
                pk__in=ApprovalRequestUserObjectPermission.objects.filter(
                    permission_id=permission_id, user=user
                ).values("content_object_id")
            )
        )
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


def with_view_grant(user, requests: QuerySet | None = None) -> QuerySet:
    """Every request `user` holds the view permission on (through a group or directly), in
    any state: the reviewers' API list, its decisions and the card socket.

    An auditor holds no such grant, so sees none here; where auditors look too (the
    request and history pages, the reveal endpoints) use `with_view_grant_or_audit`.
    """
    return _granted_to(user, VIEW, requests)


AUDIT_VIEW = "audit.view_auditevent"


def with_view_grant_or_audit(user, requests: QuerySet | None = None) -> QuerySet:
    """What `user` may look at on the history and request pages: `with_view_grant`'s
    requests, or every request for an auditor (who reads every request's audit chain
    already, so the request page tells them nothing the log does not).

    A superset of `with_view_grant`: the two differ exactly for auditors.
    """
    if user and user.is_authenticated and user.is_active and user.has_perm(AUDIT_VIEW):
        return ApprovalRequest.objects.all() if requests is None else requests
    return with_view_grant(user, requests)


def ensure_standard_groups() -> None:
    for name in STANDARD_GROUPS:
        Group.objects.get_or_create(name=name)
