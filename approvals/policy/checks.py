"""What every policy change checks: who may make it, that it is valid, and what it changes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from django.contrib.auth.models import Group

from audit.chain import Actor
from controlplane.http.codes import register

from ..errors import NOT_FOUND, NOT_PERMITTED, DomainError
from ..permissions import AUDITORS
from .rules.conditions import RuleValidationError
from .rules.engine import RuleSpec

__all__ = [
    "FOUR_EYES_SAME_PERSON",
    "MAX_DESTRUCTIVE_VERBS",
    "PROPOSAL_NOT_FOUND",
    "PROPOSAL_NOT_PENDING",
    "PROPOSAL_STALE",
    "PolicyError",
    "groups_for",
    "is_risk_admin",
    "policy_diff",
    "require_risk_admin",
    "required_note",
    "specs_from_dicts",
    "validate_destructive_verbs",
]

Rules = list[dict[str, Any]]

MAX_DESTRUCTIVE_VERBS = 200
_VERB = re.compile(r"[a-z0-9]{1,100}")


# --- Refusals and who may change the policy -------------------------------------------------


class PolicyError(DomainError):
    """A policy change or a decision on a proposal was refused with a stable `code`.

    Nothing changed, except that approving a proposal whose base is no longer the
    newest version marks it stale before `proposal_stale` is raised.
    """


FOUR_EYES_SAME_PERSON = register(
    "four_eyes_same_person", 403, "A policy change needs a second risk-admin, not its author."
)
PROPOSAL_STALE = register("proposal_stale", 409, "The policy changed since the proposal was made.")
PROPOSAL_NOT_PENDING = register("proposal_not_pending", 409, "The proposal was already decided or withdrawn.")
PROPOSAL_NOT_FOUND = NOT_FOUND


CHANGE_POLICY = "approvals.change_riskrule"  # granted to the risk-admins group (approvals/apps.py)


def is_risk_admin(user: Any) -> bool:
    """Whether `user` may change the policy: active, and holding the permission the
    risk-admins group is granted (superusers hold every permission)."""
    return bool(user is not None and user.is_authenticated and user.is_active and user.has_perm(CHANGE_POLICY))


def require_risk_admin(user: Any) -> None:
    """Raise PolicyError `not_permitted` (HTTP 403) unless `user` is a risk-admin."""
    if not is_risk_admin(user):
        raise PolicyError(NOT_PERMITTED, "Only risk-admins may change the policy.")


def user_label(user: Any) -> str:
    return user.get_username() if user is not None else "system"


def audit_actor(user: Any) -> Actor:
    return Actor.for_user(user) if user is not None else Actor.system()


# --- Validation ---------------------------------------------------------------------------------


def required_note(note: Any, *, why: str = "say why the policy changes") -> str:
    if not isinstance(note, str) or not note.strip():
        raise RuleValidationError("note", f"a change note is required: {why}")
    return note.strip()


def validate_destructive_verbs(verbs: Any) -> list[str]:
    """The verb list case-folded, in the given order; RuleValidationError otherwise.

    Each verb is one word of ASCII letters and digits after case-folding (the engine
    splits action types into such words), listed once; at most 200 verbs. Errors
    name ``destructive_verbs[i]``.
    """
    if isinstance(verbs, (str, bytes)) or not isinstance(verbs, (list, tuple)):
        raise RuleValidationError("destructive_verbs", "the destructive verbs must be a list of words")
    if len(verbs) > MAX_DESTRUCTIVE_VERBS:
        raise RuleValidationError("destructive_verbs", f"at most {MAX_DESTRUCTIVE_VERBS} destructive verbs")
    words: list[str] = []
    for index, verb in enumerate(verbs):
        field = f"destructive_verbs[{index}]"
        if not isinstance(verb, str):
            raise RuleValidationError(field, "a destructive verb must be a word")
        word = verb.casefold()
        if not _VERB.fullmatch(word):
            raise RuleValidationError(field, f"{verb!r} is not one word of ASCII letters and digits (a-z, 0-9)")
        if word in words:
            raise RuleValidationError(field, f"{word!r} is listed twice")
        words.append(word)
    return words


def specs_from_dicts(rules: Any) -> list[RuleSpec]:
    """Validate a complete rule set; errors name ``rules[i].<field>``."""
    if not isinstance(rules, (list, tuple)):
        raise RuleValidationError("rules", "the rules must be a list of rules")
    specs = []
    for index, data in enumerate(rules):
        try:
            specs.append(data if isinstance(data, RuleSpec) else RuleSpec.from_dict(data))
        except RuleValidationError as exc:
            raise RuleValidationError(f"rules[{index}].{exc.field}", exc.message) from None
    return specs


def groups_for(specs: Iterable[RuleSpec]) -> dict[str, Group]:
    """The approver and escalation groups the rules name, by name (one query).

    Raises RuleValidationError("approver_group" / "escalation_group") for a group
    that does not exist, naming the rule.
    """
    specs = list(specs)
    wanted = {spec.approver_group for spec in specs} | {s.escalation_group for s in specs if s.escalation_group}
    found = {group.name: group for group in Group.objects.filter(name__in=wanted)}
    for spec in specs:
        for field in ("approver_group", "escalation_group"):
            name = getattr(spec, field)
            if name is not None and name not in found:
                raise RuleValidationError(field, f"group {name!r} does not exist (rule {spec.name})")
            if name == AUDITORS:  # DESIGN.md: auditors read and export the audit log and decide nothing
                raise RuleValidationError(field, f"auditors decide nothing: choose another group (rule {spec.name})")
    return found


# --- Diffs ----------------------------------------------------------------------------------------


def _rule_diff(before: Rules, after: Rules) -> dict[str, Any]:
    old = {r["name"]: r for r in before}
    new = {r["name"]: r for r in after}
    changed = {
        name: {
            key: [old[name].get(key), new[name].get(key)] for key in new[name] if old[name].get(key) != new[name][key]
        }
        for name in sorted(new.keys() & old.keys())
        if old[name] != new[name]
    }
    return {"added": sorted(new.keys() - old.keys()), "removed": sorted(old.keys() - new.keys()), "changed": changed}


def policy_diff(
    before_rules: Rules, before_verbs: Sequence[str], after_rules: Rules, after_verbs: Sequence[str]
) -> dict[str, Any]:
    """``{"added", "removed", "changed": {rule: {field: [before, after]}}}``, plus
    ``"destructive_verbs": {"added", "removed"}`` only when the verb list changes."""
    diff = _rule_diff(before_rules, after_rules)
    added, removed = sorted(set(after_verbs) - set(before_verbs)), sorted(set(before_verbs) - set(after_verbs))
    if added or removed:
        diff["destructive_verbs"] = {"added": added, "removed": removed}
    return diff
