"""The current policy, and every change to it: four eyes unless provably stricter.

ONE entry point changes the policy: `propose_change(rules, destructive_verbs, ...)`
with the complete proposed rule set and verb list. It validates everything and,
under the policy lock, compares the proposal with the newest version:

- it APPLIES at once (RiskRule rows written, a new PolicyVersion, `policy.changed`)
  when `settings.POLICY_FOUR_EYES` is off, when it passes the one all-or-nothing
  authority test (`approvals.policy.rules.effective_authority.first_widening`: every rule-field
  difference provably stricter, `rules.stricter`; no deadline below the floor or too
  many shortened; nobody gains decide, nothing re-routed), or for the system seeding
  an empty policy;
- otherwise it stores a pending `PolicyProposal` (diff, dry-run, `policy.proposed`)
  and changes no rule: a second risk-admin applies it with `approve_proposal`; a
  risk-admin rejects it, or its author withdraws it, with `reject_proposal`.

`save_rule`, `save_rules`, `delete_rule`, `restore_version`, `set_destructive_verbs`
and `tuning.editing.reorder` / `set_enabled` build the complete policy from the
newest version (under the lock, so nothing committed meanwhile is silently undone)
and call it; each returns the PolicyVersion (applied) or the PolicyProposal
(waiting). Only risk-admins (`is_risk_admin`) change the policy; refusals are
`PolicyError` (a DomainError with a stable code) or `RuleValidationError`.

The other things that decide who may decide go through the same test and the same
proposals (kinds ``notifications`` and ``membership``): `notification_settings.save_settings`
(escalation and extension settings) and `membership` (adding people to a group that
decides; the Django admin proposes, every other page is refused). `approve_proposal`
applies any kind as a new PolicyVersion naming both risk-admins.

Classification compiles a policy version once and reuses it until the next appears
(`current_policy`).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Loaded on first use (PEP 562), so `approvals.policy.rules`, the pure-Python engine,
# can be imported without loading Django models through this package.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("RuleValidationError",), "rules.conditions"),
    **dict.fromkeys(("RuleSpec",), "rules.engine"),
    **dict.fromkeys(
        (
            "Outcome",
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
        ),
        "changes",
    ),
    **dict.fromkeys(
        (
            "FOUR_EYES_SAME_PERSON",
            "PROPOSAL_NOT_FOUND",
            "PROPOSAL_NOT_PENDING",
            "PROPOSAL_STALE",
            "PolicyError",
            "is_risk_admin",
            "policy_diff",
            "require_risk_admin",
            "validate_destructive_verbs",
        ),
        "checks",
    ),
    **dict.fromkeys(("ActivePolicy", "compile_policy", "current_policy", "policy_defaults", "rule_to_spec"), "current"),
    **dict.fromkeys(("approve_proposal", "pending_proposals", "reject_proposal"), "proposals"),
}


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "FOUR_EYES_SAME_PERSON",
    "PROPOSAL_NOT_FOUND",
    "PROPOSAL_NOT_PENDING",
    "PROPOSAL_STALE",
    "ActivePolicy",
    "Outcome",
    "PolicyError",
    "RuleSpec",
    "RuleValidationError",
    "approve_proposal",
    "compile_policy",
    "current_policy",
    "delete_rule",
    "edit_policy",
    "is_risk_admin",
    "lock_newest_version",
    "pending_proposals",
    "policy_defaults",
    "policy_diff",
    "propose_change",
    "reject_proposal",
    "require_risk_admin",
    "restore_version",
    "rule_to_spec",
    "rules_and_verbs",
    "save_rule",
    "save_rules",
    "seed_policy",
    "set_destructive_verbs",
    "validate_destructive_verbs",
]
