"""Three-valued rule evaluation: True, False, or UNKNOWN (None).

A condition is UNKNOWN when its value could be read either way (DESIGN.md
"Classification fails closed"):

- it reads ``target.*`` in a rule that does not set ``trusts_declared`` (only the
  agent vouches for the target);
- it reads ``impact.<key>`` and ``<key>`` is listed in ``impact["unknown"]`` (the
  extractor could not read that fact with certainty);
- it compares a ``params.*`` value that is missing or not plainly a number with
  gt, gte, lt or lte (``Condition.truth``);
- it is a ``matches`` whose pattern RE2 cannot run as written (a rule stored before
  the switch to RE2), or whose reading could differ between RE2 and Python's ``re``
  on this input (``patterns.py``).

A rule with match "all" is False if any condition is False, else UNKNOWN if any is
UNKNOWN, else True; "any" is True if any is True, else UNKNOWN if any is, else False.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .conditions import MISSING, UNKNOWN, Condition, Truth
from .rulespec import RuleSpec

__all__ = ["UNKNOWN", "Reading", "Truth", "condition_truth", "rule_truth", "unknown_conditions"]

_UNRESOLVED: Final = object()
# The memoized value of a path whose impact fact is listed as unknown.
_UNREADABLE: Final = object()
_NOTHING: Final[frozenset[str]] = frozenset()


class Reading:
    """One classification's view of its input, with path lookups memoized.

    With many rules most conditions read the same few paths; the memo resolves each
    path once per classification. Not thread-safe: build one per ``classify`` call.
    """

    __slots__ = ("doc", "masked", "memo", "unknown_impact")

    def __init__(
        self,
        params: Mapping[str, Any],
        target: Mapping[str, Any],
        impact: Mapping[str, Any],
        declared: Mapping[str, Any],
        *,
        masked: frozenset[str] = _NOTHING,
    ) -> None:
        # Params the explanation must show masked besides the deciding rule's own.
        self.masked = masked
        # Rules without trusts_declared cannot read declared.* (refused at validation),
        # so one document serves every rule.
        self.doc = {"params": params, "target": target, "impact": impact, "declared": declared}
        self.memo: dict[str, Any] = {}
        listed = impact.get("unknown") if isinstance(impact, Mapping) else None
        self.unknown_impact: frozenset[str] = (
            frozenset(str(key) for key in listed) if listed and isinstance(listed, (list, tuple)) else _NOTHING
        )

    def value(self, condition: Condition) -> Any:
        """The memoized value ``condition`` reads: a value, ``MISSING``, or the unreadable marker."""
        actual = self.memo.get(condition.path, _UNRESOLVED)
        if actual is _UNRESOLVED:
            if condition.impact_key is not None and condition.impact_key in self.unknown_impact:
                actual = _UNREADABLE
            else:
                actual = condition.resolve(self.doc)
            self.memo[condition.path] = actual
        return actual

    def is_unreadable(self, condition: Condition) -> bool:
        """Whether ``condition`` reads an impact fact listed in ``impact["unknown"]``."""
        return self.value(condition) is _UNREADABLE


def condition_truth(condition: Condition, agent_only: bool, reading: Reading) -> Truth:
    """True, False or UNKNOWN for one condition of a rule (``agent_only`` from the rule's plan)."""
    if agent_only:
        return UNKNOWN
    actual = reading.value(condition)
    if actual is _UNREADABLE:
        return UNKNOWN
    return condition.truth(actual)


def rule_truth(rule: RuleSpec, reading: Reading) -> Truth:
    """Whether ``rule``'s conditions hold (True), fail (False) or could hold (UNKNOWN).

    The classify hot path: the memo lookup is inlined, and each mode stops at the
    first value that decides it.
    """
    plan = rule.evaluation_plan
    if not plan:
        return True
    memo = reading.memo
    result: Truth
    if rule.match_all:
        result = True
        for condition, agent_only in plan:
            if agent_only:
                result = UNKNOWN
                continue
            actual = memo.get(condition.path, _UNRESOLVED)
            if actual is _UNRESOLVED:
                actual = reading.value(condition)
            truth = UNKNOWN if actual is _UNREADABLE else condition.truth(actual)
            if truth is False:
                return False
            if truth is UNKNOWN:
                result = UNKNOWN
        return result
    result = False
    for condition, agent_only in plan:
        if agent_only:
            result = UNKNOWN
            continue
        actual = memo.get(condition.path, _UNRESOLVED)
        if actual is _UNRESOLVED:
            actual = reading.value(condition)
        truth = UNKNOWN if actual is _UNREADABLE else condition.truth(actual)
        if truth is True:
            return True
        if truth is UNKNOWN:
            result = UNKNOWN
    return result


def unknown_conditions(rule: RuleSpec, reading: Reading) -> list[tuple[Condition, str]]:
    """The conditions of ``rule`` that read as UNKNOWN, each with why, in words."""
    found = []
    for condition, agent_only in rule.evaluation_plan:
        if condition_truth(condition, agent_only, reading) is not UNKNOWN:
            continue
        if agent_only:
            why = "is only the agent's word"
        elif reading.is_unreadable(condition):
            why = "could not be read"
        elif condition.pattern_problem is not None:
            why = "has a pattern the linear-time engine cannot run as written (a risk-admin must rewrite it)"
        elif condition.op == "matches":
            why = "could read differently in RE2 than in Python's re (characters outside plain ASCII)"
        elif reading.value(condition) is MISSING:
            why = "is missing"
        else:
            why = "is not plainly a number"
        found.append((condition, why))
    return found
