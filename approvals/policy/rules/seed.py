"""The seeded policy from DESIGN.md, as RuleSpec dicts (priorities spaced by 10).

A plain ``send_email`` (few recipients, nothing sensitive) is classified medium by
the ``send_email_default`` rule rather than by the policy default, so reviewers get
the rule's editable and masked params (a masked body) for every email.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SEED_DESTRUCTIVE_VERBS", "SEED_RULES"]

# DESIGN.md "Risk rules": a low rule never auto-approves an action type containing one
# of these words; admins edit the list (it is part of each policy version).
SEED_DESTRUCTIVE_VERBS: list[str] = [
    "delete",
    "drop",
    "destroy",
    "truncate",
    "remove",
    "wipe",
    "purge",
    "transfer",
    "pay",
    "send",
    "grant",
    "revoke",
    "shutdown",
]

_EMAIL_EDITABLE = ["subject", "body", "to", "cc", "bcc"]


def _rule(name: str, priority: int, action_type: str, risk_level: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "priority": priority, "action_type": action_type, "risk_level": risk_level, **extra}


SEED_RULES: list[dict[str, Any]] = [
    _rule("delete_database_prohibited", 10, "delete_database", "prohibited"),
    _rule(
        "send_email_many_recipients_or_sensitive",
        20,
        "send_email",
        "high",
        match="any",
        conditions=[
            {"path": "impact.recipient_count", "op": "gt", "value": 10},
            {"path": "impact.sensitive", "op": "eq", "value": True},
        ],
        required_approvals=1,
        editable_params=_EMAIL_EDITABLE,
        masked_params=["body"],
    ),
    _rule(
        "send_email_default",
        30,
        "send_email",
        "medium",
        required_approvals=1,
        editable_params=_EMAIL_EDITABLE,
        masked_params=["body"],
    ),
    _rule("update_document", 40, "update_document", "medium", editable_params=["content"]),
    _rule("read_low", 50, "read_*", "low"),
    _rule("search_low", 60, "search_*", "low"),
    _rule("list_low", 70, "list_*", "low"),
    _rule("get_low", 80, "get_*", "low"),
]
