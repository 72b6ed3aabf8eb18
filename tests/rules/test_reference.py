"""classify against a plain reference of DESIGN.md's rules, over random rule sets.

The reference below is the spec written as plainly as possible (no caches, no memo,
no short cuts); the engine must agree with it on every input.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from approvals.policy.rules import (
    LEVELS,
    SEED_DESTRUCTIVE_VERBS,
    ClassificationInput,
    CompiledPolicy,
    Condition,
    PolicyDefaults,
    RuleSpec,
    destructive_words,
    parse_action_type,
    to_decimal,
)

from .strategies import KEYS, conditions, documents

# ---------------------------------------------------------------------------
# Order: compare classify with a plain reference over random rule sets
# ---------------------------------------------------------------------------

ACTION_TYPES = (
    "send_email",
    "send_sms",
    "read_file",
    "delete_database",
    "Send_email",
    "read_and_delete_file",
    "readAndDeleteFile",
    "list_payments",
    "SEND_EMAIL/",
)
GLOBS = (*ACTION_TYPES[:5], "send_*", "*", "read_?ile", "[sd]e*", "*_email", "read*", "READ_*", "list_*")
NUMERIC = ("gt", "gte", "lt", "lte")


def reference_truth(rule: RuleSpec, condition: Condition, inp: ClassificationInput) -> bool | None:
    """DESIGN.md's three-valued reading of one condition, written as plainly as possible."""
    if condition.root == "target" and not rule.trusts_declared:
        return None
    listed = inp.impact.get("unknown")
    unknown = {str(key) for key in listed} if isinstance(listed, list) else set()
    if condition.root == "impact" and condition.path.split(".")[1] in unknown:
        return None
    doc = {"params": inp.params, "target": inp.target, "impact": inp.impact, "declared": inp.declared}
    held, actual = condition.evaluate(doc)
    if condition.root == "params" and condition.op in NUMERIC and to_decimal(actual) is None:
        return None
    return held


def reference_rule_truth(rule: RuleSpec, inp: ClassificationInput) -> bool | None:
    results = [reference_truth(rule, c, inp) for c in rule.compiled_conditions]
    if not results:
        return True  # no conditions: the rule always matches, whatever its match mode
    if rule.match == "all":
        return False if False in results else (None if None in results else True)
    return True if True in results else (None if None in results else False)


def reference_outcome(rules: list[RuleSpec], inp: ClassificationInput, verbs: frozenset[str]) -> str | None:
    """The name of the deciding rule (None for the defaults), by the spec."""
    name = parse_action_type(inp.action_type)
    ordered = [
        r
        for r in sorted(rules, key=lambda r: (r.priority, r.name))
        if r.enabled and fnmatch.fnmatchcase(name.normalized, r.action_type)
    ]
    for rule in ordered:
        if rule.risk_level == "prohibited" and reference_rule_truth(rule, inp) is not False:
            return rule.name
    blocks_low = bool(destructive_words(name.sent, verbs))
    collected: list[RuleSpec | None] = []
    for rule in ordered:
        truth = reference_rule_truth(rule, inp)
        if rule.risk_level == "prohibited" or truth is False or (blocks_low and rule.risk_level == "low"):
            continue
        collected.append(rule)
        if truth is True:
            break
    else:
        collected.append(None)  # the defaults, last in the order

    def key(item: tuple[int, RuleSpec | None]) -> tuple[tuple[int, int], int]:
        index, rule = item
        return (rule.strictness if rule else PolicyDefaults().strictness), -index  # a tie goes to the earliest

    decider = max(enumerate(collected), key=key)[1]
    return decider.name if decider is not None else None


rule_specs = st.builds(
    lambda index, priority, enabled, glob, conds, match, level, approvals, trusts: RuleSpec(
        name=f"rule{index}",
        priority=priority,
        enabled=enabled,
        action_type=glob,
        conditions=tuple(conds),
        match=match,
        risk_level=level,
        required_approvals=approvals,
        trusts_declared=trusts,
    ),
    st.integers(0, 10_000),
    st.integers(0, 5),  # few priorities, so ties (broken by name) are common
    st.booleans(),
    st.sampled_from(GLOBS),
    st.lists(conditions, max_size=2),
    st.sampled_from(["all", "any"]),
    st.sampled_from(LEVELS),
    st.integers(1, 3),
    st.booleans(),
)
rule_sets = st.lists(rule_specs, max_size=12, unique_by=lambda rule: rule.name)


@given(
    rules=rule_sets,
    action_type=st.sampled_from(ACTION_TYPES),
    doc=documents,
    unknown=st.lists(st.sampled_from(KEYS), unique=True),
)
def test_classify_agrees_with_reference(
    rules: list[RuleSpec], action_type: str, doc: dict[str, Any], unknown: list[str]
) -> None:
    impact = {**doc["impact"], "unknown": unknown}
    inp = ClassificationInput(action_type, doc["params"], doc["target"], impact, doc["declared"])
    policy = CompiledPolicy(7, rules, PolicyDefaults())
    result = policy.classify(inp)
    assert result.rule_name == reference_outcome(rules, inp, frozenset(SEED_DESTRUCTIVE_VERBS))
    assert result.policy_version == 7
    if result.rule_name is None:
        assert result.risk_level == "medium"
    # Classifying again (cached candidates) gives the same answer.
    assert policy.classify(inp) == result
