"""Which policy changes can only make classification stricter (four eyes on policy).

A policy change applies at once, without a second risk-admin, only when EVERY
difference between the old and the new policy is on this short, explicit list:

- adding an enabled ``prohibited`` rule;
- raising a rule's risk level, except from ``low`` (a ``low`` rule blocked by a
  destructive verb falls through to the next rule, so raising it can LOWER what
  such an action gets);
- raising a rule's ``required_approvals``;
- adding masked params; removing editable params;
- shortening ``decision_ttl_seconds`` or ``execution_window_seconds``;
- turning ``step_up`` on;
- adding a destructive verb.

Everything else waits: a new rule that is not an enabled ``prohibited`` one,
reordering, editing a pattern, a condition or the match mode, changing a group or
an escalation group, enabling or disabling a rule, trusting ``declared.*`` (or no
longer trusting it), removing a rule or a verb, lowering anything. A list this
short is easy to check by reading; a clever analysis that proves more would be a
place for bugs to hide, and a missed "stricter" only costs a second click.

This is the rule-field part of the one test a change must pass to apply at once;
`approvals.policy.rules.effective_authority.first_widening` runs it first, then adds what rule
fields alone cannot show (a shortened deadline below the floor or for too many rules,
notification settings and membership that give anyone decide).

Pure Python: nothing here imports Django. Rules are compared by name as
``RuleSpec.to_dict()`` dicts; verbs as sets of words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .engine import RULE_KEYS, RuleSpec
from .levels import level_rank

__all__ = ["SECOND_ADMIN", "first_change_needing_approval", "is_provably_stricter"]

# Every reason ends the same way, so the UI can show it as it is.
SECOND_ADMIN = "needs a second risk-admin"

RuleLike = Mapping[str, Any] | RuleSpec


def is_provably_stricter(
    before_rules: Iterable[RuleLike],
    before_verbs: Iterable[str],
    after_rules: Iterable[RuleLike],
    after_verbs: Iterable[str],
) -> bool:
    """True when every difference is on the list above (no difference at all is True).

    Rules may be RuleSpec objects or dicts ``RuleSpec.from_dict`` accepts (raises
    RuleValidationError otherwise); verbs are compared as given (validate and
    case-fold them first).
    """
    return first_change_needing_approval(before_rules, before_verbs, after_rules, after_verbs) is None


def first_change_needing_approval(
    before_rules: Iterable[RuleLike],
    before_verbs: Iterable[str],
    after_rules: Iterable[RuleLike],
    after_verbs: Iterable[str],
) -> str | None:
    """The first difference that is not provably stricter, in words, or None.

    E.g. ``"changing the approver group of wire_transfer needs a second risk-admin"``.
    Rules are visited in the new policy's evaluation order (priority, then name),
    each rule's fields in ``RULE_KEYS`` order; then removed rules, then removed verbs.
    """
    before = _by_name(before_rules)
    after = _by_name(after_rules)
    for name, rule in sorted(after.items(), key=lambda item: (item[1]["priority"], item[0])):
        old = before.get(name)
        reason = _added(rule) if old is None else _changed(old, rule)
        if reason is not None:
            return f"{reason} {SECOND_ADMIN}"
    for name in sorted(before.keys() - after.keys()):
        return f"removing rule {name} {SECOND_ADMIN}"
    removed_verbs = sorted(set(before_verbs) - set(after_verbs))
    if removed_verbs:
        return f"removing the destructive verb {removed_verbs[0]!r} {SECOND_ADMIN}"
    return None


def _by_name(rules: Iterable[RuleLike]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for rule in rules:
        spec = rule if isinstance(rule, RuleSpec) else RuleSpec.from_dict(rule)
        # Normalized through RuleSpec so list-vs-tuple or condition spelling never counts as a change.
        found[spec.name] = spec.to_dict()
    return found


def _added(rule: Mapping[str, Any]) -> str | None:
    if rule["risk_level"] == "prohibited" and rule["enabled"]:
        return None
    state = "" if rule["enabled"] else "disabled "
    return f"adding the {state}{rule['risk_level']} rule {rule['name']}"


def _changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    name = new["name"]
    for key in RULE_KEYS:
        before, after = old[key], new[key]
        if before == after:
            continue
        reason = _field_change(key, name, before, after)
        if reason is not None:
            return reason
    return None


def _field_change(key: str, name: str, before: Any, after: Any) -> str | None:
    """Why changing `key` from `before` to `after` waits, or None when it is on the list."""
    if key == "risk_level":
        if before == "low":
            return f"raising the risk level of {name} from low to {after}"
        if level_rank(after) < level_rank(before):
            return f"lowering the risk level of {name} from {before} to {after}"
        return None
    if key == "required_approvals":
        return None if after > before else f"lowering the required approvals of {name} from {before} to {after}"
    if key in ("decision_ttl_seconds", "execution_window_seconds"):
        what = "decision deadline" if key == "decision_ttl_seconds" else "execution window"
        return None if after < before else f"lengthening the {what} of {name}"
    if key == "masked_params":
        unmasked = sorted(set(before) - set(after))
        return f"unmasking {', '.join(unmasked)} in {name}" if unmasked else None
    if key == "editable_params":
        opened = sorted(set(after) - set(before))
        return f"making {', '.join(opened)} editable in {name}" if opened else None
    if key == "step_up":
        return None if after else f"turning step-up off for {name}"
    # A field added to rules later waits until someone puts it on the list (fails closed).
    waiting = _WAITING.get(key)
    if waiting is None:
        return f"changing {key} of {name}"
    return waiting(name, before, after)


_WAITING: dict[str, Callable[[str, Any, Any], str | None]] = {
    "name": lambda name, before, after: f"renaming {before} to {after}",
    "priority": lambda name, before, after: f"moving {name} in the order (priority {before} to {after})",
    "enabled": lambda name, before, after: f"{'enabling' if after else 'disabling'} {name}",
    "action_type": lambda name, before, after: f"changing the action type pattern of {name}",
    "conditions": lambda name, before, after: f"changing the conditions of {name}",
    "match": lambda name, before, after: f"changing the match mode of {name} to {after}",
    "approver_group": lambda name, before, after: f"changing the approver group of {name}",
    "escalation_group": lambda name, before, after: f"changing the escalation group of {name}",
    "trusts_declared": lambda name, before, after: (
        f"trusting declared.* in {name}" if after else f"no longer trusting declared.* in {name}"
    ),
}
