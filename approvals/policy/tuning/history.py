"""Policy history for the rule editor: versions (who proposed and who approved,
when, why, diff), one version's rules, and rollback (which
`approvals.policy.restore_version` performs as a new change: applied at once only
when stricter, else waiting for a second risk-admin like any other).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from audit.chain import Actor

from ...models import PolicyVersion
from .. import Outcome, policy_diff, restore_version, rules_and_verbs

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


def diff_lines(diff: dict[str, Any]) -> list[str]:
    """A policy diff in words: one line per added, removed or changed rule field and
    per added or removed destructive verb."""
    lines = [f"added rule {name}" for name in diff.get("added", ())]
    lines += [f"removed rule {name}" for name in diff.get("removed", ())]
    for name, fields in sorted(diff.get("changed", {}).items()):
        for key, (before, after) in sorted(fields.items()):
            lines.append(f"{name}: {key} {_short(before)} → {_short(after)}")
    verbs = diff.get("destructive_verbs", {})
    lines += [f"added destructive verb {verb}" for verb in verbs.get("added", ())]
    lines += [f"removed destructive verb {verb}" for verb in verbs.get("removed", ())]
    return lines


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 120 else text[:119] + "…"


def _row(version: PolicyVersion) -> VersionRow:
    return VersionRow(
        number=version.number, created_at=version.created_at, created_by=version.created_by_label,
        approved_by=version.approved_by_label, note=version.note, diff=version.diff, lines=diff_lines(version.diff),
    )


def versions() -> QuerySet:
    """Every policy version, newest first, without the rule snapshots (one query per page)."""
    return PolicyVersion.objects.order_by("-number").defer("rules", "destructive_verbs")


def rows(page) -> list[VersionRow]:
    return [_row(version) for version in page]


def version_detail(number: int) -> VersionDetail | None:
    """One version with its rules and what restoring it would change (two queries)."""
    version = PolicyVersion.objects.filter(number=number).first()
    if version is None:
        return None
    latest = PolicyVersion.objects.order_by("-number").only("number", "rules", "destructive_verbs").first()
    restore = policy_diff(*rules_and_verbs(latest), version.rules, version.destructive_verbs)
    return VersionDetail(
        row=_row(version), rules=version.rules, destructive_verbs=list(version.destructive_verbs),
        is_current=latest is not None and latest.number == number, restore_diff=restore,
        restore_lines=diff_lines(restore),
    )


def rollback(number: int, *, actor: Actor | None, note: str) -> Outcome:
    """Restore version `number` as a new version (see `approvals.policy.restore_version`)."""
    return restore_version(number, actor=actor, note=note)
