"""The four-eyes gate over everything that decides who may decide (DESIGN.md "Who may
decide is policy").

`approvals.policy.rules.effective_authority.first_widening` is the one pure test; this module
reads the snapshots it compares from the database (rules of the newest version,
notification settings, group membership, settings) and proposes what waits:

- `waits_because(...)`: why a change (of rules and verbs, notification settings or
  membership) needs a second risk-admin, or None when it applies at once.

Proposing and applying what waits: `approvals.policy.changes` (rules and verbs),
`approvals.policy.notification_settings`, `approvals.policy.membership_gate`.

Settings: ``POLICY_MIN_IMMEDIATE_DEADLINE_SECONDS`` (default 300) is the shortest decision
deadline or execution window a change may set at once; ``POLICY_MAX_SHORTENED_RULES_PER_HOUR``
(default 3) is how many rules one risk-admin may shorten at once within an hour.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Q
from django.utils import timezone

from ..models import PolicyVersion, RuleNotification
from ..permissions import RISK_ADMINS
from .checks import CHANGE_POLICY
from .rules.effective_authority import Limits, Snapshot, first_widening

__all__ = [
    "AUTHORITY_FIELDS",
    "current_notifications",
    "group_members",
    "limits_for",
    "notification_values",
    "snapshot",
    "waits_because",
]

# The notification settings that grant something (who may decide, and until when).
# notify_on_arrival, remind_before_seconds and webhook_url only inform: they apply at once.
AUTHORITY_FIELDS = ("escalation_group", "escalate_after_seconds", "max_extension_seconds")


def notification_values(row: RuleNotification | None) -> dict[str, Any]:
    if row is None:
        return {}
    return {
        "escalation_group": row.escalation_group.name if row.escalation_group is not None else None,
        "escalate_after_seconds": row.escalate_after_seconds or 0,
        "max_extension_seconds": row.max_extension_seconds or 0,
    }


def current_notifications() -> dict[str, dict[str, Any]]:
    return {
        row.rule_name: notification_values(row) for row in RuleNotification.objects.select_related("escalation_group")
    }


def group_members(additions: Mapping[str, set[int]] | None = None) -> dict[str, frozenset[int]]:
    """Group name -> its active members' ids (with `additions` made), and under
    ``risk-admins`` everyone who may change the policy, derived as `is_risk_admin` does:
    members of any group holding the policy permission, people holding it directly,
    and superusers (the Django admin does not let one risk-admin set those alone)."""
    User = get_user_model()
    found: dict[str, set[int]] = {}
    for name, user_id in User.groups.through.objects.filter(user__is_active=True).values_list("group__name", "user_id"):
        found.setdefault(name, set()).add(user_id)
    for name, ids in (additions or {}).items():
        found.setdefault(name, set()).update(ids)
    app_label, codename = CHANGE_POLICY.split(".")
    policy_groups = Group.objects.filter(permissions__codename=codename, permissions__content_type__app_label=app_label)
    admins = set().union(*(found.get(name, set()) for name in policy_groups.values_list("name", flat=True)))
    direct = Q(user_permissions__codename=codename, user_permissions__content_type__app_label=app_label)
    admins |= set(
        User.objects.filter(is_active=True).filter(Q(is_superuser=True) | direct).values_list("pk", flat=True)
    )
    found[RISK_ADMINS] = admins | found.get(RISK_ADMINS, set())
    return {name: frozenset(ids) for name, ids in found.items()}


def snapshot(
    rules: Iterable[Mapping[str, Any]],
    verbs: Iterable[str],
    *,
    notifications: Mapping[str, Mapping[str, Any]] | None = None,
    members: Mapping[str, frozenset[int]] | None = None,
) -> Snapshot:
    """The policy as it would stand with these rules and verbs (the database's notification
    settings and membership unless given)."""
    return Snapshot(
        rules=tuple(rules),
        verbs=frozenset(verbs),
        notifications=current_notifications() if notifications is None else notifications,
        members=group_members() if members is None else members,
        default={
            "risk_level": settings.DEFAULT_RISK_LEVEL,
            "approver_group": settings.DEFAULT_APPROVER_GROUP,
            "decision_ttl_seconds": settings.DEFAULT_DECISION_TTL_SECONDS,
            "execution_window_seconds": settings.DEFAULT_EXECUTION_WINDOW_SECONDS,
        },
        step_up_levels=frozenset(settings.STEP_UP_RISK_LEVELS),
    )


def limits_for(user: Any) -> Limits:
    """The deadline limits, with the rules `user` shortened at once within the last hour."""
    recent: set[str] = set()
    if user is not None:
        since = timezone.now() - timedelta(hours=1)
        for diff in PolicyVersion.objects.filter(created_by=user, approved_by=None, created_at__gte=since).values_list(
            "diff", flat=True
        ):
            for name, fields in (diff or {}).get("changed", {}).items():
                for key in ("decision_ttl_seconds", "execution_window_seconds"):
                    pair = fields.get(key)
                    if pair and None not in pair and pair[1] < pair[0]:
                        recent.add(name)
    return Limits(
        min_deadline_seconds=int(settings.POLICY_MIN_IMMEDIATE_DEADLINE_SECONDS),
        max_shortened_rules=int(settings.POLICY_MAX_SHORTENED_RULES_PER_HOUR),
        recently_shortened=frozenset(recent),
    )


def waits_because(
    before_rules: Iterable[Mapping[str, Any]],
    before_verbs: Iterable[str],
    after_rules: Iterable[Mapping[str, Any]] | None = None,
    after_verbs: Iterable[str] | None = None,
    *,
    user: Any,
    notifications: Mapping[str, Mapping[str, Any]] | None = None,
    members: Mapping[str, frozenset[int]] | None = None,
) -> str | None:
    """Why replacing the policy (rules `before_rules`, verbs `before_verbs`, as the database
    has the rest) by `after_*` (None: unchanged), `notifications` and `members` (None:
    unchanged) needs a second risk-admin; None when it applies at once."""
    now_notifications, now_members = current_notifications(), group_members()
    before = snapshot(before_rules, before_verbs, notifications=now_notifications, members=now_members)
    after = snapshot(
        before_rules if after_rules is None else after_rules,
        before_verbs if after_verbs is None else after_verbs,
        notifications=now_notifications if notifications is None else notifications,
        members=now_members if members is None else members,
    )
    return first_widening(before, after, limits_for(user))
