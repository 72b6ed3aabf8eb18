"""A rule's notification settings, saved through four eyes (DESIGN.md "Who may decide is policy").

Which settings are authority: the escalation group and delay (`escalation_group`,
`escalate_after_seconds`: they hand view and decide to another group) and the
reviewer's one-time extension (`max_extension_seconds`: it lengthens a deadline).
They go through the same all-or-nothing test as a rule change
(`approvals.policy.authority.waits_because`). `notify_on_arrival`,
`remind_before_seconds` and `webhook_url` only tell people (the webhook carries masked
params, as every notification does): they grant nothing, yet a change to them that
comes with a widening one waits with it (all or nothing).
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group

from audit.chain import Actor, record
from controlplane.http.outbound import OutboundURLRefused, check_outbound_url

from ..atomic import applying, lock_row
from ..bounds import BOUNDS
from ..errors import NOT_PERMITTED
from ..models import PolicyProposal, RuleNotification
from ..people import user_of
from ..permissions import AUDITORS
from . import authority
from .changes import lock_newest_version, rules_and_verbs
from .checks import PROPOSAL_STALE, PolicyError, require_risk_admin
from .pending import Kind, propose

__all__ = ["SETTINGS_FIELDS", "apply_notifications", "save_settings", "settings_dict", "write_settings"]

SETTINGS_FIELDS = (
    "notify_on_arrival",
    "remind_before_seconds",
    "escalate_after_seconds",
    "escalation_group",
    "max_extension_seconds",
    "webhook_url",
    "slack_channel",
)
SLACK_CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{4,30}")


def save_settings(
    rule_name: str, *, actor: Actor | None, note: str = "", **values: Any
) -> RuleNotification | PolicyProposal:
    """Create or update a rule's notification settings, audited before and after, or,
    when the change grants anything, propose it for a second risk-admin.

    `values`: any of SETTINGS_FIELDS (escalation_group a Group or None). The settings
    that grant (`approvals.policy.authority.AUTHORITY_FIELDS`: the escalation group and
    delay, the reviewer's deadline extension) go through the same all-or-nothing test
    as a rule change: when the change widens who may decide or lengthens a deadline it
    is not applied and the pending PolicyProposal (kind ``notifications``) is returned.
    Raises ValueError naming the field for a negative number, a webhook URL the
    outbound allow-list refuses, auditors as escalation group or a rule that does not
    exist; PolicyError `not_permitted` for a user who is not a risk-admin, or for the
    system making a change that would need a second risk-admin.
    """
    acting_user = user_of(actor)
    if acting_user is not None:
        require_risk_admin(acting_user)
    unknown = sorted(set(values) - set(SETTINGS_FIELDS))
    if unknown:
        raise ValueError(f"{unknown[0]}: not a notification setting")
    for name in ("remind_before_seconds", "escalate_after_seconds", "max_extension_seconds"):
        value = values.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"{name}: must be a whole number of seconds, 0 or more")
        if value is not None and BOUNDS[name].problem(value):  # what the column holds (approvals.bounds)
            raise ValueError(f"{name}: must be a whole number of seconds from 0 to {BOUNDS[name].high}")
    group = values.get("escalation_group")
    if group is not None and not isinstance(group, Group):
        raise ValueError("escalation_group: must be a group")
    if group is not None and group.name == AUDITORS:
        raise ValueError("escalation_group: auditors decide nothing; choose a group that may decide this rule")
    if values.get("slack_channel") and not SLACK_CHANNEL_ID.fullmatch(str(values["slack_channel"])):
        raise ValueError("slack_channel: a Slack channel id (C… or G…), not a name")
    if values.get("webhook_url"):
        try:
            check_outbound_url(values["webhook_url"])
        except OutboundURLRefused as exc:
            raise ValueError(f"webhook_url: {exc.message}") from None
    with applying():
        # The policy lock first, as every policy change and approval takes it, then the row.
        newest = lock_newest_version()
        rules, verbs = rules_and_verbs(newest)
        if newest is not None and not any(rule["name"] == rule_name for rule in rules):
            raise ValueError(f"rule: no rule named {rule_name!r}")
        current = lock_row(RuleNotification, rule_name=rule_name)
        if not values.get("slack_channel", True) and not (current and current.slack_channel):
            values.pop("slack_channel")  # none before, none now: not a change (see settings_dict)
        proposed = {
            **(settings_dict(current or RuleNotification(rule_name=rule_name)) or {}),
            **{name: (value.name if isinstance(value, Group) else value) for name, value in values.items()},
        }
        waits = None
        if settings.POLICY_FOUR_EYES:
            notifications = authority.current_notifications()
            notifications[rule_name] = {
                key: proposed[key] or (None if key == "escalation_group" else 0) for key in authority.AUTHORITY_FIELDS
            }
            waits = authority.waits_because(rules, verbs, user=acting_user, notifications=notifications)
        if waits is not None:
            if acting_user is None:
                raise PolicyError(NOT_PERMITTED, f"Only a risk-admin may propose this: {waits}.")
            before = settings_dict(current) if current else None
            diff = {
                "added": [],
                "removed": [],
                "changed": {},
                "notifications": {
                    rule_name: {
                        key: [(before or {}).get(key), proposed.get(key)]
                        for key in SETTINGS_FIELDS
                        if (before or {}).get(key) != proposed.get(key)
                    }
                },
            }
            return propose(
                Kind.NOTIFICATIONS,
                {"rule": rule_name, "values": proposed, "before": before},
                acting_user=acting_user,
                waits=waits,
                diff=diff,
                note=(note or "").strip() or f"Notification settings of {rule_name}",
            )
        return write_settings(rule_name, current, proposed, acting_user=acting_user)


def write_settings(
    rule_name: str,
    current: RuleNotification | None,
    values: dict[str, Any],
    *,
    acting_user: Any,
    proposed_by: Any = None,
) -> RuleNotification:
    """Store `values` (JSON: escalation_group by name) on the locked row and audit the change.

    Call inside the change (`approvals.atomic.applying`), after the four-eyes gate (`save_settings`) or a second
    risk-admin's approval (`approvals.policy.approve_proposal`, naming `proposed_by`).
    """
    before = settings_dict(current) if current else None
    current = current or RuleNotification(rule_name=rule_name)
    for name, value in values.items():
        if name == "escalation_group":
            value = Group.objects.get(name=value) if value else None
        setattr(current, name, value)
    current.updated_by_label = acting_user.get_username() if acting_user else "system"
    current.save()
    record(
        "rule.notifications_changed",
        actor=Actor.for_user(acting_user) if acting_user else Actor.system(),
        metadata={
            "rule": rule_name,
            "before": before,
            "after": settings_dict(current),
            **({"proposed_by": proposed_by.get_username()} if proposed_by is not None else {}),
        },
    )
    return current


def settings_dict(row: RuleNotification | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {
        "notify_on_arrival": row.notify_on_arrival,
        "remind_before_seconds": row.remind_before_seconds,
        "escalate_after_seconds": row.escalate_after_seconds,
        "escalation_group": row.escalation_group.name if row.escalation_group is not None else None,
        "max_extension_seconds": row.max_extension_seconds,
        "webhook_url": row.webhook_url,
        # Only when set: the settings of a rule without one (and proposals made before the
        # field existed) read as they always did.
        **({"slack_channel": row.slack_channel} if row.slack_channel else {}),
    }


def apply_notifications(proposal: PolicyProposal, approver: Any) -> None:
    """Store what a notification proposal says, `approver` acting (under the policy lock,
    inside the approval's transaction). Raises PolicyError `proposal_stale` when the
    settings it was made against have changed since."""
    payload = proposal.payload
    current = lock_row(RuleNotification, rule_name=payload["rule"])
    if settings_dict(current) != payload["before"]:
        raise PolicyError(
            PROPOSAL_STALE,
            "The notification settings changed since this was proposed: propose it again against the current settings.",
        )
    write_settings(payload["rule"], current, payload["values"], acting_user=approver, proposed_by=proposal.proposed_by)
