"""What a risk-admin reads before approving a policy proposal: the rules and
conditions that change, side by side in words (never Python reprs), the destructive
verbs added or removed, why it waits, and the dry-run it stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...models import PolicyProposal, PolicyVersion
from .. import rules_and_verbs
from ..rules.stricter import first_change_needing_approval
from ..step_up_levels import needs_step_up

__all__ = [
    "FieldChange",
    "ProposalDetail",
    "RuleChange",
    "condition_text",
    "conditions_text",
    "describe_field",
    "authority_lines",
    "proposal_detail",
    "rule_changes",
    "waits_because",
]

FIELD_LABELS: dict[str, str] = {
    "priority": "Order (priority)",
    "enabled": "Enabled",
    "action_type": "Action type",
    "conditions": "Conditions",
    "match": "Conditions must hold",
    "risk_level": "Risk level",
    "required_approvals": "Required approvals",
    "approver_group": "Approver group",
    "escalation_group": "Escalation group",
    "decision_ttl_seconds": "Decision deadline",
    "execution_window_seconds": "Execution window",
    "editable_params": "Editable params",
    "masked_params": "Masked params",
    "trusts_declared": "Trusts declared.*",
    "step_up": "Step-up to decide",
}
_SYMBOLS = {
    "eq": "=",
    "ne": "≠",
    "gt": ">",
    "gte": "≥",
    "lt": "<",
    "lte": "≤",
    "in": "is one of",
    "contains": "contains",
    "matches": "matches",
    "len_gt": "is longer than",
}
# eq/ne against true, false or null read as words: "impact.reversible is false", not "eq False".
_WORDS = {
    ("eq", True): "is true",
    ("eq", False): "is false",
    ("eq", None): "is null",
    ("ne", True): "is not true",
    ("ne", False): "is not false",
    ("ne", None): "is not null",
}
ABSENT = "—"


@dataclass(frozen=True)
class ConditionLine:
    text: str
    joiner: str  # "" for the first, else "and" / "or"
    changed: bool  # not on the other side: removed (before) or added (after)


@dataclass(frozen=True)
class FieldChange:
    label: str
    before: str
    after: str
    # For conditions, one line each, marking those only one side has.
    before_lines: tuple[ConditionLine, ...] = ()
    after_lines: tuple[ConditionLine, ...] = ()


@dataclass(frozen=True)
class RuleChange:
    name: str
    kind: str  # "added", "removed" or "changed"
    fields: list[FieldChange]
    level_before: str | None
    level_after: str | None


@dataclass(frozen=True)
class ProposalDetail:
    proposal: PolicyProposal
    changes: list[RuleChange]
    verbs_added: list[str]
    verbs_removed: list[str]
    waits_because: str | None
    base_number: int | None
    current_number: int | None
    # For a notification or membership proposal: what changes, one sentence each.
    authority_lines: tuple[str, ...] = ()

    @property
    def dry_run_changes(self) -> list[dict[str, Any]]:
        """The stored changed requests, with "when" as ``YYYY-MM-DD HH:MM``."""
        return [
            {**change, "when": str(change.get("created_at", ""))[:16].replace("T", " ")}
            for change in self.proposal.dry_run.get("changes", ())
        ]

    @property
    def outdated(self) -> bool:
        """A later version exists: approving would mark it stale and apply nothing."""
        return self.proposal.status == PolicyProposal.Status.PENDING and self.base_number != self.current_number


def _value(value: Any) -> str:
    """JSON, so a string and a number never read alike ("100" is not 100)."""
    return json.dumps(value, ensure_ascii=False)


def condition_text(condition: Mapping[str, Any]) -> str:
    """One condition in words: ``params.amount ≥ 5000``, ``impact.reversible is false``,
    ``params.to is one of "a", "b"``. Tolerates a malformed condition (shown as JSON)."""
    try:
        path, op, value = condition["path"], condition["op"], condition["value"]
    except (KeyError, TypeError):
        return _value(condition)
    if not isinstance(op, str):
        return _value(condition)
    if op == "exists":
        return f"{path} {'exists' if value else 'does not exist'}"
    if op in ("eq", "ne") and (value is None or isinstance(value, bool)):
        return f"{path} {_WORDS[(op, value)]}"
    if op == "in" and isinstance(value, list):
        return f"{path} is one of {', '.join(_value(item) for item in value)}"
    if op == "matches":
        return f"{path} matches /{value}/"
    return f"{path} {_SYMBOLS.get(op, op)} {_value(value)}"


def conditions_text(conditions: Any, match: str = "all") -> str:
    """A rule's conditions joined the way they combine (``and`` for all, ``or`` for any)."""
    if not conditions:
        return "always (no conditions)"
    if not isinstance(conditions, list):
        return _value(conditions)
    return (" and " if match == "all" else " or ").join(condition_text(c) for c in conditions)


def _seconds(value: int) -> str:
    if value % 3600 == 0:
        return f"{value // 3600} h ({value} s)"
    if value % 60 == 0:
        return f"{value // 60} min ({value} s)"
    return f"{value} s"


def describe_field(key: str, rule: Mapping[str, Any]) -> str:
    """One field of a rule in words: conditions as ``impact.amount > 1000 and ...``."""
    value: Any = rule.get(key)
    if key == "conditions":
        return conditions_text(value, rule.get("match", "all"))
    if key == "match":
        return "all of them" if value == "all" else "any of them"
    if key in ("editable_params", "masked_params"):
        return ", ".join(value) if value else "(none)"
    if key in ("decision_ttl_seconds", "execution_window_seconds"):
        return _seconds(value)
    if key == "step_up":
        return _step_up_text(bool(value), str(rule.get("risk_level", "")))
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "(none)"
    return str(value)


def _step_up_text(rule_asks: bool, level: str) -> str:
    """ "yes", "no", or "yes (every critical request needs it)" when the level asks for it
    though the rule does not: the same function the guard uses decides."""
    if not needs_step_up(level, rule_asks=rule_asks):
        return "no"
    return "yes" if rule_asks else f"yes (every {level} request needs it)"


def _condition_lines(rule: Mapping[str, Any] | None, other: Mapping[str, Any] | None) -> tuple[ConditionLine, ...]:
    if not rule or not rule.get("conditions"):
        return ()
    theirs = {condition_text(c) for c in (other or {}).get("conditions") or ()}
    joiner = "and" if rule.get("match", "all") == "all" else "or"
    return tuple(
        ConditionLine(text, joiner if index else "", other is not None and text not in theirs)
        for index, text in enumerate(condition_text(c) for c in rule["conditions"])
    )


def _field_change(key: str, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> FieldChange:
    change = FieldChange(
        FIELD_LABELS[key],
        describe_field(key, before) if before else ABSENT,
        describe_field(key, after) if after else ABSENT,
    )
    if key != "conditions":
        return change
    return FieldChange(
        change.label, change.before, change.after, _condition_lines(before, after), _condition_lines(after, before)
    )


def rule_changes(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[RuleChange]:
    """Each added, removed or changed rule with its fields before and after, in the new
    evaluation order (removed rules last). Added and removed rules show every field."""
    old = {rule["name"]: rule for rule in before}
    new = {rule["name"]: rule for rule in after}
    changes = []
    for rule in sorted(after, key=lambda r: (r["priority"], r["name"])):
        previous = old.get(rule["name"])
        if previous == rule:
            continue
        keys = [k for k in FIELD_LABELS if previous is None or previous.get(k) != rule.get(k)]
        changes.append(
            RuleChange(
                name=rule["name"],
                kind="added" if previous is None else "changed",
                fields=[_field_change(k, previous, rule) for k in keys],
                level_before=previous["risk_level"] if previous else None,
                level_after=rule["risk_level"],
            )
        )
    for name in sorted(old.keys() - new.keys()):
        rule = old[name]
        changes.append(
            RuleChange(
                name=name,
                kind="removed",
                fields=[_field_change(k, rule, None) for k in FIELD_LABELS],
                level_before=rule["risk_level"],
                level_after=None,
            )
        )
    return changes


def waits_because(proposal: PolicyProposal) -> str | None:
    """The first change in `proposal` that needs a second risk-admin (against its base):
    as stored when it was made, else (older rows) the rule-field reason."""
    if proposal.waits_because:
        return proposal.waits_because
    before, before_verbs = rules_and_verbs(proposal.base_version)
    return first_change_needing_approval(before, before_verbs, proposal.rules, proposal.destructive_verbs)


def proposal_detail(pk: int) -> ProposalDetail | None:
    """One proposal with its changes in words (two queries)."""
    proposal = PolicyProposal.objects.select_related("base_version", "applied_version").filter(pk=pk).first()
    if proposal is None:
        return None
    current = PolicyVersion.objects.order_by("-number").values_list("number", flat=True).first()
    before, before_verbs = rules_and_verbs(proposal.base_version)
    if proposal.kind != PolicyProposal.Kind.RULES:
        return ProposalDetail(
            proposal=proposal,
            changes=[],
            verbs_added=[],
            verbs_removed=[],
            waits_because=waits_because(proposal),
            base_number=proposal.base_version.number if proposal.base_version else None,
            current_number=current,
            authority_lines=authority_lines(proposal),
        )
    return ProposalDetail(
        proposal=proposal,
        changes=rule_changes(before, proposal.rules),
        verbs_added=sorted(set(proposal.destructive_verbs) - set(before_verbs)),
        verbs_removed=sorted(set(before_verbs) - set(proposal.destructive_verbs)),
        waits_because=waits_because(proposal),
        base_number=proposal.base_version.number if proposal.base_version else None,
        current_number=current,
    )


_SETTING_LABELS = {
    "notify_on_arrival": "Email the approver group on arrival",
    "remind_before_seconds": "Remind before the deadline (s)",
    "escalate_after_seconds": "Escalate after undecided (s)",
    "escalation_group": "Escalation group",
    "max_extension_seconds": "Reviewers may extend the deadline by (s)",
    "webhook_url": "Webhook URL",
    "slack_channel": "Slack channel (stubs)",
}


def authority_lines(proposal: PolicyProposal) -> tuple[str, ...]:
    """A notification or membership proposal in words, one line per change."""
    payload = proposal.payload or {}
    if proposal.kind == PolicyProposal.Kind.MEMBERSHIP:
        names = ", ".join(payload.get("usernames") or [])
        return (f"Add {names} to the group {payload.get('group')} (they may then decide what it decides).",)
    before = payload.get("before") or {}
    lines = []
    for key, label in _SETTING_LABELS.items():
        old, new = before.get(key), (payload.get("values") or {}).get(key)
        if old != new:
            lines.append(
                f"{payload.get('rule')}: {label}: {_value(old) if old not in (None, '') else ABSENT} "
                f"→ {_value(new) if new not in (None, '') else ABSENT}"
            )
    return tuple(lines)
