"""Policy history for the rule editor: versions (who proposed and who approved,
when, why, diff), one version's rules, and rollback (which
`approvals.policy.restore_version` performs as a new change: applied at once only
when stricter, else waiting for a second risk-admin like any other).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from audit.chain import Actor

from ...models import PolicyVersion
from .. import Outcome, policy_diff, restore_version, rules_and_verbs
from .proposal_review import RuleChange, condition_text, describe_field, rule_changes

__all__ = ["VersionDetail", "VersionRow", "diff_lines", "rollback", "version_detail", "versions"]


@dataclass(frozen=True)
class VersionRow:
    number: int
    created_at: datetime
    created_by: str
    approved_by: str  # "" when the change applied at once (stricter only, or four eyes off)
    note: str
    diff: dict[str, Any]
    lines: list[str]


@dataclass(frozen=True)
class VersionDetail:
    row: VersionRow
    rules: list[dict[str, Any]]
    destructive_verbs: list[str]
    is_current: bool
    # What restoring this version would change relative to the current rules.
    restore_diff: dict[str, Any]
    restore_lines: list[str]
    # Side by side: what this version changed from the one before it, and what restoring
    # it would change in the current policy.
    changes: list[RuleChange] = field(default_factory=list)
    verbs_added: list[str] = field(default_factory=list)
    verbs_removed: list[str] = field(default_factory=list)
    restore_changes: list[RuleChange] = field(default_factory=list)


def diff_lines(diff: dict[str, Any]) -> list[str]:
    """A policy diff in words: one line per added, removed or changed rule field and
    per added or removed destructive verb."""
    lines = [f"added rule {name}" for name in diff.get("added", ())]
    lines += [f"removed rule {name}" for name in diff.get("removed", ())]
    for name, fields in sorted(diff.get("changed", {}).items()):
        for key, (before, after) in sorted(fields.items()):
            lines.append(f"{name}: {key} {_short(_in_words(key, before))} → {_short(_in_words(key, after))}")
    verbs = diff.get("destructive_verbs", {})
    lines += [f"added destructive verb {verb}" for verb in verbs.get("added", ())]
    lines += [f"removed destructive verb {verb}" for verb in verbs.get("removed", ())]
    return lines


def _in_words(key: str, value: Any) -> str:
    """A field's value as the proposal page words it. A diff holds only the fields that
    changed, so conditions whose `match` is not among them are listed with "; "."""
    if key == "conditions" and isinstance(value, list) and value:
        return "; ".join(condition_text(condition) for condition in value)
    return describe_field(key, {key: value})


def _short(text: str) -> str:
    return text if len(text) <= 120 else text[:119] + "…"


def _row(version: PolicyVersion) -> VersionRow:
    return VersionRow(
        number=version.number,
        created_at=version.created_at,
        created_by=version.created_by_label,
        approved_by=version.approved_by_label,
        note=version.note,
        diff=version.diff,
        lines=diff_lines(version.diff),
    )


def versions() -> QuerySet[PolicyVersion]:
    """Every policy version, newest first, without the rule snapshots (one query per page)."""
    return PolicyVersion.objects.order_by("-number").defer("rules", "destructive_verbs")


def rows(page: Iterable[PolicyVersion]) -> list[VersionRow]:
    return [_row(version) for version in page]


def version_detail(number: int) -> VersionDetail | None:
    """One version with what it changed, its rules, and what restoring it would change
    (three queries)."""
    version = PolicyVersion.objects.filter(number=number).first()
    if version is None:
        return None
    latest = PolicyVersion.objects.order_by("-number").only("number", "rules", "destructive_verbs").first()
    previous = (
        PolicyVersion.objects.filter(number__lt=number)
        .order_by("-number")
        .only("number", "rules", "destructive_verbs")
        .first()
    )
    before_rules, before_verbs = rules_and_verbs(previous)
    current_rules, current_verbs = rules_and_verbs(latest)
    rules, _ = rules_and_verbs(version)
    restore = policy_diff(current_rules, current_verbs, version.rules, version.destructive_verbs)
    return VersionDetail(
        row=_row(version),
        rules=version.rules,
        destructive_verbs=list(version.destructive_verbs),
        is_current=latest is not None and latest.number == number,
        restore_diff=restore,
        restore_lines=diff_lines(restore),
        changes=rule_changes(before_rules, rules),
        verbs_added=sorted(set(version.destructive_verbs) - set(before_verbs)),
        verbs_removed=sorted(set(before_verbs) - set(version.destructive_verbs)),
        restore_changes=rule_changes(current_rules, rules),
    )


def rollback(number: int, *, actor: Actor | None, note: str) -> Outcome:
    """Restore version `number` as a new version (see `approvals.policy.restore_version`)."""
    return restore_version(number, actor=actor, note=note)
