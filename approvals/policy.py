"""Rule changes and the current policy.

Every change to the rule set goes through `save_rule` or `delete_rule`: each
validates, writes the rule, snapshots the whole set as a new policy version (who,
when, why, diff) and audits it, all in one transaction. Classification compiles a
policy version once and reuses it until the next version appears.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import connection

from audit.chain import Actor, audited_atomic, record

from .models import PolicyVersion, RiskRule
from .rules.conditions import RuleValidationError
from .rules.engine import CompiledPolicy, PolicyDefaults, RuleSpec


@dataclass(frozen=True)
class ActivePolicy:
    version_id: int | None
    compiled: CompiledPolicy


_compiled_by_key: dict[tuple, ActivePolicy] = {}


def policy_defaults() -> PolicyDefaults:
    return PolicyDefaults(
        risk_level=settings.DEFAULT_RISK_LEVEL,
        approver_group=settings.DEFAULT_APPROVER_GROUP,
        decision_ttl_seconds=settings.DEFAULT_DECISION_TTL_SECONDS,
        execution_window_seconds=settings.DEFAULT_EXECUTION_WINDOW_SECONDS,
    )


def current_policy() -> ActivePolicy:
    """The newest policy version, compiled (one small query when cached)."""
    latest = _latest_version_key()
    if latest is None:
        return ActivePolicy(None, CompiledPolicy(0, [], policy_defaults()))
    # created_at is part of the key because a rolled-back transaction can reuse a pk.
    key = latest
    cached = _compiled_by_key.get(key)
    if cached is None:
        pk, number, _ = latest
        rules = PolicyVersion.objects.values_list("rules", flat=True).get(pk=pk)
        cached = ActivePolicy(pk, CompiledPolicy(number, [RuleSpec.from_dict(r) for r in rules], policy_defaults()))
        _compiled_by_key.clear()  # only the newest version is ever classified against
        _compiled_by_key[key] = cached
    return cached


def _latest_version_key() -> tuple | None:
    """(pk, number, created_at) of the newest policy version, or None: the cache key.

    Plain SQL: this runs on every submission, and building the ORM query cost
    more than running it (README "Performance").
    """
    meta = PolicyVersion._meta
    quote = connection.ops.quote_name
    columns = ", ".join(quote(meta.get_field(name).column) for name in ("id", "number", "created_at"))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns} FROM {quote(meta.db_table)} ORDER BY {quote(meta.get_field('number').column)} DESC LIMIT 1"
        )
        row = cursor.fetchone()
    # created_at comes back raw (text on SQLite): it only has to compare equal to itself.
    return None if row is None else tuple(row)


def rule_to_spec(rule: RiskRule) -> RuleSpec:
    return RuleSpec.from_dict(
        {
            "name": rule.name,
            "priority": rule.priority,
            "enabled": rule.enabled,
            "action_type": rule.action_type,
            "conditions": list(rule.conditions),
            "match": rule.match,
            "risk_level": rule.risk_level,
            "required_approvals": rule.required_approvals,
            "approver_group": rule.approver_group.name,
            "escalation_group": rule.escalation_group.name if rule.escalation_group_id else None,
            "decision_ttl_seconds": rule.decision_ttl_seconds,
            "execution_window_seconds": rule.execution_window_seconds,
            "editable_params": list(rule.editable_params),
            "masked_params": list(rule.masked_params),
            "trusts_declared": rule.trusts_declared,
            "step_up": rule.step_up,
        }
    )


def _group(name: str | None, field: str) -> Group | None:
    if name is None:
        return None
    try:
        return Group.objects.get(name=name)
    except Group.DoesNotExist:
        raise RuleValidationError(field, f"group {name!r} does not exist") from None


def _snapshot() -> list[dict[str, Any]]:
    rules = RiskRule.objects.select_related("approver_group", "escalation_group").order_by("priority", "name")
    return [rule_to_spec(rule).to_dict() for rule in rules]


def _diff(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any]:
    old = {r["name"]: r for r in before}
    new = {r["name"]: r for r in after}
    changed = {
        name: {key: [old[name].get(key), new[name].get(key)] for key in new[name] if old[name].get(key) != new[name][key]}
        for name in new.keys() & old.keys()
        if old[name] != new[name]
    }
    return {"added": sorted(new.keys() - old.keys()), "removed": sorted(old.keys() - new.keys()), "changed": changed}


def _record_version(*, acting_user, note: str, restored_from: int | None = None) -> PolicyVersion:
    if not note.strip():
        raise RuleValidationError("note", "a change note is required: say why the policy changes")
    previous = PolicyVersion.objects.select_for_update().order_by("-number").first()
    before = previous.rules if previous else []
    after = _snapshot()
    version = PolicyVersion.objects.create(
        number=(previous.number + 1) if previous else 1,
        created_by=acting_user,
        created_by_label=acting_user.get_username() if acting_user else "system",
        note=note,
        rules=after,
        diff=_diff(before, after),
    )
    record(
        "policy.changed",
        actor=Actor.for_user(acting_user) if acting_user else Actor.system(),
        metadata={
            "version": version.number, "note": note, "diff": version.diff,
            **({"restored_from": restored_from} if restored_from is not None else {}),
        },
    )
    return version


def save_rule(data: dict[str, Any], *, acting_user, note: str) -> RiskRule:
    """Create or update the rule named `data["name"]`; refuses a broken rule whole.

    Raises RuleValidationError (with the offending field) and changes nothing.
    """
    save_rules([data], acting_user=acting_user, note=note)
    return RiskRule.objects.get(name=data["name"])


def save_rules(rules: list[dict[str, Any]], *, acting_user, note: str) -> PolicyVersion:
    """Create or update several rules as one policy version; all or nothing."""
    specs = [RuleSpec.from_dict(data) for data in rules]
    groups = [
        (_group(spec.approver_group, "approver_group"), _group(spec.escalation_group, "escalation_group"))
        for spec in specs
    ]
    with audited_atomic():
        for spec, (approver_group, escalation_group) in zip(specs, groups):
            _write_rule(spec, approver_group, escalation_group)
        return _record_version(acting_user=acting_user, note=note)


def _write_rule(spec: RuleSpec, approver_group: Group | None, escalation_group: Group | None) -> None:
    RiskRule.objects.update_or_create(
        name=spec.name,
        defaults={
            "priority": spec.priority,
            "enabled": spec.enabled,
            "action_type": spec.action_type,
            "conditions": [dict(c) for c in spec.conditions],
            "match": spec.match,
            "risk_level": spec.risk_level,
            "required_approvals": spec.required_approvals,
            "approver_group": approver_group,
            "escalation_group": escalation_group,
            "decision_ttl_seconds": spec.decision_ttl_seconds,
            "execution_window_seconds": spec.execution_window_seconds,
            "editable_params": list(spec.editable_params),
            "masked_params": list(spec.masked_params),
            "trusts_declared": spec.trusts_declared,
            "step_up": spec.step_up,
        },
    )


def delete_rule(name: str, *, acting_user, note: str) -> None:
    with audited_atomic():
        deleted, _ = RiskRule.objects.filter(name=name).delete()
        if not deleted:
            raise RuleValidationError("name", f"no rule named {name!r}")
        _record_version(acting_user=acting_user, note=note)


def restore_version(number: int, *, acting_user, note: str) -> PolicyVersion:
    """Roll the rule set back to policy version `number`, as a NEW version.

    One transaction: rules absent from that version are deleted, the others are
    written back exactly as that version stored them, and one `policy.changed`
    event records the diff (before and after values) with ``restored_from``.
    Raises RuleValidationError: no such version, a group it names no longer
    exists, or no note. Changes nothing on error.
    """
    try:
        target = PolicyVersion.objects.get(number=number)
    except PolicyVersion.DoesNotExist:
        raise RuleValidationError("version", f"no policy version {number}") from None
    specs = [RuleSpec.from_dict(data) for data in target.rules]
    groups = [
        (_group(spec.approver_group, "approver_group"), _group(spec.escalation_group, "escalation_group"))
        for spec in specs
    ]
    with audited_atomic():
        RiskRule.objects.exclude(name__in=[spec.name for spec in specs]).delete()
        for spec, (approver_group, escalation_group) in zip(specs, groups):
            _write_rule(spec, approver_group, escalation_group)
        return _record_version(acting_user=acting_user, note=note, restored_from=number)


def seed_policy(*, note: str = "Seed policy from the HITL design") -> PolicyVersion | None:
    """Install the seeded rules once; a no-op when any policy version exists."""
    from .permissions import ensure_standard_groups
    from .rules.seed import SEED_RULES

    ensure_standard_groups()
    if PolicyVersion.objects.exists():
        return None
    return save_rules(SEED_RULES, acting_user=None, note=note)
