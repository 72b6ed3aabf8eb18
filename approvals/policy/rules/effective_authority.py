"""Who may decide what, derived from the whole policy: the *effective authority*.

DESIGN.md "Who may decide is policy". Everything that feeds who may decide (the
rules, their approver and escalation groups, the notification settings that grant
anything, the membership of every group that can decide, the destructive verbs and
trusted ``declared.*`` fields) is read as one `Snapshot`; `effective_authority`
derives from it, for each enabled rule and for the policy default, which people may
decide, with which quorum, step-up and deadlines.

`first_widening(before, after, limits)` is the one all-or-nothing test a change must
pass to apply at once. It returns the first reason the change waits for a second
risk-admin, in words, or None. In order:

1. the rule-field reasoning of `stricter.first_change_needing_approval` (a new rule,
   reordering, enabling, disabling or deleting a rule, a pattern, condition, group or
   trust change: all routing, so all wait; a level, quorum or deadline that only
   tightens applies);
2. the deadline limits: a decision deadline or execution window shortened below
   `Limits.min_deadline_seconds`, or deadlines of more than
   `Limits.max_shortened_rules` rules shortened by one admin within an hour;
3. the authority comparison, rule by rule and for the default: nobody gains decide,
   no level lowers, no quorum shrinks, step-up is not dropped, no deadline grows
   (decision deadline, execution window, the reviewer's extension), and escalation
   hands nothing to anyone new nor any sooner;
4. nobody new among the policy admins (``risk-admins``), who approve the rest.

Pure Python (no Django): the service (`approvals.policy.authority`) builds snapshots
from the database, and the tests can build them by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .levels import level_rank
from .stricter import SECOND_ADMIN, first_change_needing_approval

__all__ = [
    "DEFAULT_RULE",
    "Authority",
    "Limits",
    "Snapshot",
    "effective_authority",
    "first_widening",
    "shortened_rules",
]

# The policy default's row in an effective authority (no rule may be named this: names are identifiers).
DEFAULT_RULE = "(default)"
NEVER = None  # escalate_after: no escalation by time


@dataclass(frozen=True)
class Snapshot:
    """Everything that decides who may decide, at one moment.

    `rules`: RuleSpec dicts (``RuleSpec.to_dict()``). `notifications`: rule name ->
    ``{"escalation_group", "escalate_after_seconds", "max_extension_seconds"}`` (the
    settings that grant; missing keys mean none). `members`: group name -> the ids of
    its active members. `default`: the policy default's ``risk_level``,
    ``approver_group``, ``decision_ttl_seconds``, ``execution_window_seconds``.
    """

    rules: tuple[Mapping[str, Any], ...]
    verbs: frozenset[str]
    notifications: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    members: Mapping[str, frozenset[int]] = field(default_factory=dict)
    default: Mapping[str, Any] = field(default_factory=dict)
    step_up_levels: frozenset[str] = frozenset({"critical"})
    policy_admins: str = "risk-admins"

    def people(self, group: str | None) -> frozenset[int]:
        return frozenset(self.members.get(group, frozenset())) if group else frozenset()


@dataclass(frozen=True)
class Authority:
    """Who may decide what one rule (or the default) classifies, and under what terms."""

    rule: str
    level: str
    quorum: int
    step_up: bool
    deciders: frozenset[int]  # the approver group's members
    escalation_deciders: frozenset[int]  # who gets decide on escalation (rule's and notifications' targets)
    escalate_after: int | None  # seconds until escalation by time; None: only when the quorum is unreachable
    decision_ttl: int
    execution_window: int
    max_extension: int


@dataclass(frozen=True)
class Limits:
    """What a change may do to deadlines at once (settings; see `approvals.policy.authority`)."""

    min_deadline_seconds: int = 300
    max_shortened_rules: int = 3
    recently_shortened: frozenset[str] = frozenset()  # rules this admin shortened at once in the last hour


def _notification(snapshot: Snapshot, rule: str) -> Mapping[str, Any]:
    return snapshot.notifications.get(rule) or {}


def _authority(snapshot: Snapshot, name: str, rule: Mapping[str, Any]) -> Authority:
    settings = _notification(snapshot, name)
    timed_group = settings.get("escalation_group") or rule.get("escalation_group")
    after = settings.get("escalate_after_seconds") or 0
    targets = {rule.get("escalation_group"), timed_group if after > 0 else None}
    escalation = frozenset().union(*(snapshot.people(group) for group in targets if group))
    level = rule["risk_level"]
    return Authority(
        rule=name,
        level=level,
        quorum=int(rule.get("required_approvals") or 1),
        step_up=level in snapshot.step_up_levels or bool(rule.get("step_up")),
        deciders=snapshot.people(rule.get("approver_group")),
        escalation_deciders=escalation,
        escalate_after=after if (after > 0 and timed_group) else NEVER,
        decision_ttl=int(rule.get("decision_ttl_seconds") or 0),
        execution_window=int(rule.get("execution_window_seconds") or 0),
        max_extension=int(settings.get("max_extension_seconds") or 0),
    )


def effective_authority(snapshot: Snapshot) -> dict[str, Authority]:
    """Rule name -> its Authority, for every rule and the default (`DEFAULT_RULE`).

    A disabled rule is listed as it would decide once enabled (enabling waits anyway,
    but settings made on it meanwhile must not slip in with it). A ``prohibited`` or
    ``low`` rule is listed too: nobody decides those (refused or automatic), so their
    deciders are empty.
    """
    found: dict[str, Authority] = {}
    for rule in snapshot.rules:
        authority = _authority(snapshot, rule["name"], rule)
        if rule["risk_level"] in ("prohibited", "low"):
            authority = Authority(**{**authority.__dict__, "deciders": frozenset(), "escalation_deciders": frozenset()})
        found[rule["name"]] = authority
    default = {
        "name": DEFAULT_RULE,
        "risk_level": snapshot.default.get("risk_level", "medium"),
        "required_approvals": 1,
        "approver_group": snapshot.default.get("approver_group"),
        "decision_ttl_seconds": snapshot.default.get("decision_ttl_seconds", 0),
        "execution_window_seconds": snapshot.default.get("execution_window_seconds", 0),
    }
    found[DEFAULT_RULE] = _authority(snapshot, DEFAULT_RULE, default)
    return found


def shortened_rules(before_rules: Iterable[Mapping[str, Any]], after_rules: Iterable[Mapping[str, Any]]) -> set[str]:
    """Names of rules whose decision deadline or execution window got shorter."""
    old = {rule["name"]: rule for rule in before_rules}
    found = set()
    for rule in after_rules:
        previous = old.get(rule["name"])
        if previous is None:
            continue
        if any(rule[key] < previous[key] for key in ("decision_ttl_seconds", "execution_window_seconds")):
            found.add(rule["name"])
    return found


def first_widening(before: Snapshot, after: Snapshot, limits: Limits = Limits()) -> str | None:
    """The first reason `after` may not replace `before` at once, in words, or None."""
    reason = first_change_needing_approval(before.rules, before.verbs, after.rules, after.verbs)
    if reason is not None:
        return reason
    reason = _deadline_limits(before, after, limits)
    if reason is not None:
        return f"{reason} {SECOND_ADMIN}"
    old = effective_authority(before)
    for name, now in effective_authority(after).items():
        reason = _widens(old.get(name), now)
        if reason is not None:
            return f"{reason} {SECOND_ADMIN}"
    gained = after.people(after.policy_admins) - before.people(before.policy_admins)
    if gained:
        return f"adding {_count(gained)} to {after.policy_admins} {SECOND_ADMIN}"
    return None


def _deadline_limits(before: Snapshot, after: Snapshot, limits: Limits) -> str | None:
    old = {rule["name"]: rule for rule in before.rules}
    floor = limits.min_deadline_seconds
    for rule in sorted(after.rules, key=lambda r: (r["priority"], r["name"])):
        previous = old.get(rule["name"])
        for key, what in (
            ("decision_ttl_seconds", "decision deadline"),
            ("execution_window_seconds", "execution window"),
        ):
            if previous is not None and rule[key] < previous[key] and rule[key] < floor:
                return f"shortening the {what} of {rule['name']} to {rule[key]} s (below {floor} s)"
    now = shortened_rules(before.rules, after.rules)
    if now - limits.recently_shortened and len(now | limits.recently_shortened) > limits.max_shortened_rules:
        return (
            f"shortening the deadlines of {len(now | limits.recently_shortened)} rules within an hour "
            f"(more than {limits.max_shortened_rules})"
        )
    return None


def _count(people: frozenset[int]) -> str:
    return "1 person" if len(people) == 1 else f"{len(people)} people"


def _widens(old: Authority | None, new: Authority) -> str | None:
    """Why `new` gives more authority than `old` (same rule), or None."""
    name = "the policy default" if new.rule == DEFAULT_RULE else new.rule
    if old is None:
        # Only an enabled prohibited rule passes the rule-field test as new: nobody decides it.
        return None if not (new.deciders or new.escalation_deciders) else f"adding the rule {name}"
    if level_rank(new.level) < level_rank(old.level):
        return f"lowering the risk level of {name}"
    if new.quorum < old.quorum and new.level not in ("low", "prohibited"):
        return f"lowering the required approvals of {name}"
    if old.step_up and not new.step_up:
        return f"dropping step-up for {name}"
    gained = new.deciders - old.deciders
    if gained:
        return f"giving {_count(gained)} decide on {name}"
    if new.decision_ttl > old.decision_ttl:
        return f"lengthening the decision deadline of {name}"
    if new.execution_window > old.execution_window:
        return f"lengthening the execution window of {name}"
    if new.max_extension > old.max_extension:
        return f"letting reviewers extend the deadline of {name} further"
    handed = new.escalation_deciders - new.deciders
    if handed - old.escalation_deciders - old.deciders:
        return f"escalating {name} to {_count(handed - old.escalation_deciders - old.deciders)} who could not decide it"
    sooner = new.escalate_after is not None and (old.escalate_after is None or new.escalate_after < old.escalate_after)
    if handed and sooner:
        return f"escalating {name} sooner"
    return None
