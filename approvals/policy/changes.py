"""The one entry point for policy changes, and the helpers that build on it.

`propose_change` takes the complete proposed rule set and verb list; see the
package docstring for when it applies and when it waits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import connection

from audit.chain import Actor, record

from ..atomic import applying
from ..errors import NOT_PERMITTED
from ..models import PolicyProposal, PolicyVersion, RiskRule
from ..people import user_of
from . import authority
from .checks import (
    PolicyError,
    audit_actor,
    groups_for,
    policy_diff,
    require_risk_admin,
    required_note,
    specs_from_dicts,
    user_label,
    validate_destructive_verbs,
)
from .current import compile_policy
from .rules.conditions import RuleValidationError
from .rules.engine import RuleSpec
from .rules.patterns import refuse_problem_patterns
from .rules.seed import SEED_DESTRUCTIVE_VERBS

__all__ = [
    "Outcome",
    "apply_rules",
    "delete_rule",
    "edit_policy",
    "lock_newest_version",
    "propose_change",
    "restore_version",
    "rules_and_verbs",
    "save_rule",
    "save_rules",
    "seed_policy",
    "set_destructive_verbs",
]

Rules = list[dict[str, Any]]
Outcome = PolicyVersion | PolicyProposal
# A fixed signed 64-bit key; it only has to differ from the project's other advisory locks.
POLICY_LOCK_KEY = int.from_bytes(b"cp-rules", "big")


def lock_newest_version() -> PolicyVersion | None:
    """Serialize policy changes and read the newest version; call inside a transaction.

    PostgreSQL: a transaction-level advisory lock (a row lock cannot cover "no
    newer row yet"); the read after it sees every change committed before ours.
    SQLite's IMMEDIATE transactions already serialize writers.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [POLICY_LOCK_KEY])
    return PolicyVersion.objects.order_by("-number").first()


def rules_and_verbs(version: PolicyVersion | None) -> tuple[Rules, list[str]]:
    """Copies of a version's rules and verbs (no version: no rules, the seeded verbs).

    Rules are normalized through RuleSpec, so a version stored before a field existed
    (``step_up``) does not read as changing it.
    """
    if version is None:
        return [], list(SEED_DESTRUCTIVE_VERBS)
    return [_normalized(rule) for rule in version.rules], list(version.destructive_verbs)


def _normalized(rule: dict[str, Any]) -> dict[str, Any]:
    try:
        return RuleSpec.from_dict(rule).to_dict()
    except RuleValidationError:  # an old rule a later engine refuses: compared as stored
        return dict(rule)


# --- The one entry point --------------------------------------------------------------------------


def propose_change(
    rules: Sequence[Any],
    destructive_verbs: Sequence[str],
    *,
    actor: Actor | None,
    note: str,
    restored_from: int | None = None,
) -> Outcome:
    """Make `rules` (the complete rule set) and `destructive_verbs` the policy, now or
    once a second risk-admin approves.

    Returns the new PolicyVersion when it applied, else the pending PolicyProposal
    (no rule changed). Raises PolicyError `not_permitted` (403) for a user who is not
    a risk-admin, and for no user (the system) once any policy exists; raises
    RuleValidationError (``note``, ``rules[i].<field>``, ``destructive_verbs[i]``,
    ``approver_group``...) for anything invalid. All or nothing.
    """
    acting_user = user_of(actor)
    if acting_user is not None:
        require_risk_admin(acting_user)
    note = required_note(note)
    specs = specs_from_dicts(rules)
    verbs = validate_destructive_verbs(destructive_verbs)
    compile_policy(0, specs, verbs)  # refuses two rules with one name
    groups = groups_for(specs)
    after = [spec.to_dict() for spec in sorted(specs, key=lambda spec: (spec.priority, spec.name))]
    with applying():
        newest = lock_newest_version()
        before, before_verbs = rules_and_verbs(newest)
        diff = policy_diff(before, before_verbs, after, verbs)
        _refuse_new_problem_patterns(specs, before)
        change: dict[str, Any] = {"diff": diff, "note": note, "restored_from": restored_from}
        if acting_user is None:
            if newest is not None:
                raise PolicyError(NOT_PERMITTED, "Once a policy exists, only a risk-admin changes it.")
            return apply_rules(after, verbs, groups, newest, **change, created_by=None, how="seed")
        if not settings.POLICY_FOUR_EYES:
            return apply_rules(after, verbs, groups, newest, **change, created_by=acting_user, how="four_eyes_off")
        # One all-or-nothing test over the whole effective authority (rules.effective_authority).
        waits_because = authority.waits_because(before, before_verbs, after, verbs, user=acting_user)
        if waits_because is None:
            return apply_rules(after, verbs, groups, newest, **change, created_by=acting_user, how="stricter_only")
        return _propose(after, verbs, newest, **change, acting_user=acting_user, waits_because=waits_because)


def _refuse_new_problem_patterns(specs: Sequence[RuleSpec], before: Rules) -> None:
    """A pattern RE2 cannot run as written is refused wherever this change brings it in;
    one a rule already had (stored before the switch to RE2) may stay through a
    reorder or a toggle: it reads as UNKNOWN, and the rules page flags it, until a
    risk-admin rewrites it."""
    had = {
        rule.get("name"): {
            c.get("value")
            for c in rule.get("conditions") or ()
            if isinstance(c, dict) and c.get("op") == "matches" and isinstance(c.get("value"), str)
        }
        for rule in before
        if isinstance(rule, dict)
    }
    for index, spec in enumerate(specs):
        old = had.get(spec.name, set())
        for condition_index, condition in enumerate(spec.compiled_conditions):
            if condition.pattern_problem is not None and condition.value not in old:
                raise RuleValidationError(
                    f"rules[{index}].conditions[{condition_index}].value",
                    f"pattern refused: {condition.pattern_problem}",
                )


def edit_policy(
    edit: Callable[[Rules, list[str]], tuple[Rules, list[str]]], *, actor: Actor | None, note: str
) -> Outcome:
    """`propose_change` of ``edit(rules, verbs)`` applied to the newest version, read
    under the policy lock so that a change committed meanwhile is never silently undone.

    `edit` gets copies; it raises RuleValidationError to refuse.
    """
    acting_user = user_of(actor)
    if acting_user is not None:
        require_risk_admin(acting_user)
    with applying():
        rules, verbs = rules_and_verbs(lock_newest_version())
        new_rules, new_verbs = edit(rules, verbs)
        return propose_change(new_rules, new_verbs, actor=actor, note=note)


def apply_rules(
    after: Rules,
    verbs: list[str],
    groups: dict[str, Group],
    newest: PolicyVersion | None,
    *,
    diff: dict[str, Any],
    note: str,
    created_by: Any,
    how: str,
    restored_from: int | None = None,
    approved_by: Any = None,
    proposal: PolicyProposal | None = None,
) -> PolicyVersion:
    """Write the RiskRule rows (a mirror of the newest version) and record the version.

    Call under the policy lock with `newest` read under it. `how` says, in the
    audit event, why no second risk-admin was needed ("seed", "four_eyes_off",
    "stricter_only") or that one approved ("approved").
    """
    RiskRule.objects.exclude(name__in=[rule["name"] for rule in after]).delete()
    for rule in after:
        if rule["name"] in diff["added"] or rule["name"] in diff["changed"]:
            _write_rule(RuleSpec.from_dict(rule), groups)
    version = PolicyVersion.objects.create(
        number=(newest.number + 1) if newest else 1,
        created_by=created_by,
        created_by_label=user_label(created_by),
        approved_by=approved_by,
        approved_by_label=user_label(approved_by) if approved_by else "",
        note=note,
        rules=after,
        destructive_verbs=verbs,
        diff=diff,
    )
    record(
        "policy.changed",
        actor=audit_actor(approved_by or created_by),
        metadata={
            "version": version.number,
            "note": note,
            "diff": diff,
            "applied": how,
            "created_by": user_label(created_by),
            **({"approved_by": user_label(approved_by), "proposal": proposal.pk} if proposal is not None else {}),
            **({"restored_from": restored_from} if restored_from is not None else {}),
        },
    )
    return version


def _write_rule(spec: RuleSpec, groups: dict[str, Group]) -> None:
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
            "approver_group": groups[spec.approver_group],
            "escalation_group": groups[spec.escalation_group] if spec.escalation_group else None,
            "decision_ttl_seconds": spec.decision_ttl_seconds,
            "execution_window_seconds": spec.execution_window_seconds,
            "editable_params": list(spec.editable_params),
            "masked_params": list(spec.masked_params),
            "trusts_declared": spec.trusts_declared,
            "step_up": spec.step_up,
        },
    )


def _propose(
    after: Rules,
    verbs: list[str],
    newest: PolicyVersion | None,
    *,
    diff: dict[str, Any],
    note: str,
    restored_from: int | None,
    acting_user: Any,
    waits_because: str,
) -> PolicyProposal:
    from .tuning.dry_run import proposal_summary

    proposal = PolicyProposal.objects.create(
        proposed_by=acting_user,
        proposed_by_label=user_label(acting_user),
        note=note,
        base_version=newest,
        rules=after,
        destructive_verbs=verbs,
        diff=diff,
        restored_from=restored_from,
        dry_run=proposal_summary(after, verbs),
        waits_because=waits_because,
    )
    record(
        "policy.proposed",
        actor=audit_actor(acting_user),
        metadata={
            "proposal": proposal.pk,
            "base_version": newest.number if newest else None,
            "note": note,
            "diff": diff,
            "waits_because": waits_because,
            **({"restored_from": restored_from} if restored_from is not None else {}),
        },
    )
    return proposal


# --- What the editor, history and admin call --------------------------------------------------------


def save_rule(data: dict[str, Any], *, actor: Actor | None, note: str) -> Outcome:
    """Create or update the rule named `data["name"]`; refuses a broken rule whole.

    Raises RuleValidationError (naming the offending field) and changes nothing.
    """
    return save_rules([data], actor=actor, note=note)


def save_rules(rules: list[dict[str, Any]], *, actor: Actor | None, note: str) -> Outcome:
    """Create or update several rules (by name) as one change; all or nothing."""
    acting_user = user_of(actor)
    if acting_user is not None:
        require_risk_admin(acting_user)
    # Validate what the caller sent first, so errors name the caller's own fields.
    specs = [RuleSpec.from_dict(data) for data in rules]
    for spec in specs:
        refuse_problem_patterns(spec)
    groups_for(specs)
    replacing = {spec.name: spec.to_dict() for spec in specs}

    def edit(current: Rules, verbs: list[str]) -> tuple[Rules, list[str]]:
        return [rule for rule in current if rule["name"] not in replacing] + list(replacing.values()), verbs

    return edit_policy(edit, actor=actor, note=note)


def delete_rule(name: str, *, actor: Actor | None, note: str) -> Outcome:
    """Remove the rule named `name` (RuleValidationError("name") if there is none)."""

    def edit(current: Rules, verbs: list[str]) -> tuple[Rules, list[str]]:
        if not any(rule["name"] == name for rule in current):
            raise RuleValidationError("name", f"no rule named {name!r}")
        return [rule for rule in current if rule["name"] != name], verbs

    return edit_policy(edit, actor=actor, note=note)


def set_destructive_verbs(verbs: Sequence[str], *, actor: Actor | None, note: str) -> Outcome:
    """Replace the destructive verb list (errors name ``destructive_verbs[i]``).

    Adding verbs applies at once; removing one waits for a second risk-admin.
    """
    acting_user = user_of(actor)
    if acting_user is not None:
        require_risk_admin(acting_user)
    words = validate_destructive_verbs(verbs)
    return edit_policy(lambda current, _: (current, words), actor=actor, note=note)


def restore_version(number: int, *, actor: Actor | None, note: str) -> Outcome:
    """Roll the rules and verbs back to policy version `number`, as a NEW change.

    Like any change it applies at once only when that is stricter than the newest
    version; ``restored_from`` is recorded on a proposal and in the audit event.
    Raises RuleValidationError: no such version, a group it names no longer exists,
    or no note. Changes nothing on error.
    """
    acting_user = user_of(actor)
    if acting_user is not None:
        require_risk_admin(acting_user)
    target = PolicyVersion.objects.filter(number=number).first()
    if target is None:
        raise RuleValidationError("version", f"no policy version {number}")
    return propose_change(target.rules, target.destructive_verbs, actor=actor, note=note, restored_from=number)


def seed_policy(*, note: str = "Seed policy from the HITL design") -> PolicyVersion | None:
    """Install the seeded rules and verbs once; a no-op when any policy version exists."""
    from ..permissions import ensure_standard_groups
    from .rules.seed import SEED_RULES

    ensure_standard_groups()
    with applying():
        if lock_newest_version() is not None:
            return None
        # The system's first policy: propose_change applies it at once.
        seeded = propose_change(SEED_RULES, SEED_DESTRUCTIVE_VERBS, actor=None, note=note)
        if not isinstance(seeded, PolicyVersion):  # without an actor, nothing waits for a second risk-admin
            raise TypeError("the seed policy was proposed instead of applied")
        return seeded
