"""Which policy changes apply without a second risk-admin: only the short list of
changes that can only make classification stricter, and only when every difference
is on it. Each item is tried both ways; a hypothesis run checks the list is sound:
whenever it says "stricter", no action is classified lower than before."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals.policy import compile_policy
from approvals.policy.rules.engine import ClassificationInput, RuleSpec
from approvals.policy.rules.levels import LEVELS, level_rank
from approvals.policy.rules.stricter import first_change_needing_approval, is_provably_stricter

WIRE = {
    "name": "wire_transfer",
    "priority": 20,
    "action_type": "wire_*",
    "risk_level": "high",
    "required_approvals": 2,
    "approver_group": "treasury",
    "escalation_group": "reviewers",
    "decision_ttl_seconds": 3600,
    "execution_window_seconds": 900,
    "editable_params": ["memo", "amount"],
    "masked_params": ["account"],
    "conditions": [{"path": "impact.amount", "op": "gt", "value": 1000}],
}
READS = {"name": "read_low", "priority": 50, "action_type": "read_*", "risk_level": "low"}
BEFORE = [WIRE, READS]
VERBS = ["delete", "transfer"]


def changed(name: str, **fields: Any) -> list[dict[str, Any]]:
    """BEFORE with rule `name` changed."""
    return [{**rule, **fields} if rule["name"] == name else rule for rule in BEFORE]


SHRED = {"name": "shred_prohibited", "priority": 1, "action_type": "shred_*", "risk_level": "prohibited"}

STRICTER = {
    "adding an enabled prohibited rule": ([*BEFORE, SHRED], VERBS),
    "raising a level": (changed("wire_transfer", risk_level="critical"), VERBS),
    "raising a level to prohibited": (changed("wire_transfer", risk_level="prohibited"), VERBS),
    "raising required approvals": (changed("wire_transfer", required_approvals=3), VERBS),
    "adding a masked param": (changed("wire_transfer", masked_params=["account", "memo"]), VERBS),
    "removing an editable param": (changed("wire_transfer", editable_params=["memo"]), VERBS),
    "shortening the decision deadline": (changed("wire_transfer", decision_ttl_seconds=600), VERBS),
    "shortening the execution window": (changed("wire_transfer", execution_window_seconds=60), VERBS),
    "turning step-up on": (changed("wire_transfer", step_up=True), VERBS),
    "adding a destructive verb": (BEFORE, [*VERBS, "wipe"]),
    "several stricter changes at once": (
        [*changed("wire_transfer", risk_level="critical", required_approvals=3, step_up=True), SHRED],
        [*VERBS, "wipe"],
    ),
    "no change at all": (BEFORE, list(reversed(VERBS))),
}


@pytest.mark.parametrize("after_rules, after_verbs", STRICTER.values(), ids=STRICTER.keys())
def test_a_stricter_change_applies_without_a_second_admin(after_rules, after_verbs):
    assert first_change_needing_approval(BEFORE, VERBS, after_rules, after_verbs) is None
    assert is_provably_stricter(BEFORE, VERBS, after_rules, after_verbs)


WAITS = {
    # The reverse of every item on the list...
    "adding a disabled prohibited rule": (
        [*BEFORE, {**SHRED, "enabled": False}],
        VERBS,
        "adding the disabled prohibited rule shred_prohibited",
    ),
    "lowering a level": (
        changed("wire_transfer", risk_level="medium"),
        VERBS,
        "lowering the risk level of wire_transfer from high to medium",
    ),
    "raising a level from low": (
        changed("read_low", risk_level="medium"),
        VERBS,
        "raising the risk level of read_low from low to medium",
    ),
    "lowering required approvals": (
        changed("wire_transfer", required_approvals=1),
        VERBS,
        "lowering the required approvals of wire_transfer from 2 to 1",
    ),
    "unmasking a param": (changed("wire_transfer", masked_params=[]), VERBS, "unmasking account in wire_transfer"),
    "making a param editable": (
        changed("wire_transfer", editable_params=["memo", "amount", "to"]),
        VERBS,
        "making to editable in wire_transfer",
    ),
    "lengthening the decision deadline": (
        changed("wire_transfer", decision_ttl_seconds=7200),
        VERBS,
        "lengthening the decision deadline of wire_transfer",
    ),
    "lengthening the execution window": (
        changed("wire_transfer", execution_window_seconds=901),
        VERBS,
        "lengthening the execution window of wire_transfer",
    ),
    "removing a destructive verb": (BEFORE, ["delete"], "removing the destructive verb 'transfer'"),
    # ...and everything that is not on it.
    "adding a low rule above all": (
        [*BEFORE, {"name": "anything_low", "priority": 0, "action_type": "*", "risk_level": "low"}],
        VERBS,
        "adding the low rule anything_low",
    ),
    "adding a medium rule": (
        [*BEFORE, {"name": "wire_medium", "priority": 10, "action_type": "wire_*", "risk_level": "medium"}],
        VERBS,
        "adding the medium rule wire_medium",
    ),
    "reordering": (changed("read_low", priority=5), VERBS, "moving read_low in the order (priority 50 to 5)"),
    "editing a pattern": (
        changed("wire_transfer", action_type="wire_transfer"),
        VERBS,
        "changing the action type pattern of wire_transfer",
    ),
    "editing a condition": (
        changed("wire_transfer", conditions=[{"path": "impact.amount", "op": "gt", "value": 1_000_000}]),
        VERBS,
        "changing the conditions of wire_transfer",
    ),
    "changing the match mode": (
        changed("wire_transfer", match="any"),
        VERBS,
        "changing the match mode of wire_transfer to any",
    ),
    "changing the approver group": (
        changed("wire_transfer", approver_group="reviewers", escalation_group=None),
        VERBS,
        "changing the approver group of wire_transfer",
    ),
    "changing the escalation group": (
        changed("wire_transfer", escalation_group="auditors"),
        VERBS,
        "changing the escalation group of wire_transfer",
    ),
    "disabling a rule": (changed("wire_transfer", enabled=False), VERBS, "disabling wire_transfer"),
    "trusting declared.*": (
        changed("wire_transfer", trusts_declared=True),
        VERBS,
        "trusting declared.* in wire_transfer",
    ),
    "removing a rule": ([WIRE], VERBS, "removing rule read_low"),
    "a stricter change with one that is not": (
        changed("wire_transfer", risk_level="critical", approver_group="reviewers", escalation_group=None),
        VERBS,
        "changing the approver group of wire_transfer",
    ),
}


@pytest.mark.parametrize("after_rules, after_verbs, reason", WAITS.values(), ids=WAITS.keys())
def test_any_other_change_waits_and_says_which_change_needs_a_second_admin(after_rules, after_verbs, reason):
    assert first_change_needing_approval(BEFORE, VERBS, after_rules, after_verbs) == (
        f"{reason} needs a second risk-admin"
    )
    assert not is_provably_stricter(BEFORE, VERBS, after_rules, after_verbs)


def test_enabling_a_rule_waits():
    disabled = [{**WIRE, "enabled": False}, READS]
    assert first_change_needing_approval(disabled, VERBS, BEFORE, VERBS) == (
        "enabling wire_transfer needs a second risk-admin"
    )


def test_turning_step_up_off_waits():
    with_step_up = [{**WIRE, "step_up": True}, READS]
    assert first_change_needing_approval(with_step_up, VERBS, BEFORE, VERBS) == (
        "turning step-up off for wire_transfer needs a second risk-admin"
    )


def test_spelling_is_not_a_change():
    """Lists and tuples, and rules given as RuleSpec or as dicts, compare by meaning."""
    specs = [RuleSpec.from_dict(rule) for rule in BEFORE]
    assert is_provably_stricter(specs, VERBS, BEFORE, VERBS)
    assert is_provably_stricter(BEFORE, tuple(VERBS), specs, list(VERBS))


# --- Soundness: "provably stricter" never lets anything be classified lower -----------------------

GROUPS = ("reviewers", "treasury")
GLOBS = ("*", "send_*", "read_*", "delete_*", "wire_*", "*_report", "transfer_funds", "read_and_delete_database")
ACTIONS = (
    "send_email",
    "read_file",
    "read_and_delete_database",
    "delete_database",
    "wire_transfer",
    "transfer_funds",
    "list_payments_report",
    "read_report",
)
CONDITIONS = (
    {"path": "params.amount", "op": "gt", "value": 1000},
    {"path": "impact.recipient_count", "op": "gt", "value": 10},
    {"path": "params.to", "op": "exists", "value": True},
    {"path": "target.env", "op": "eq", "value": "prod"},
)
PARAMS = ({}, {"amount": 5000}, {"amount": 10}, {"amount": "5e6"}, {"to": [f"p{i}@x.com" for i in range(12)]})
TARGETS = ({}, {"env": "prod"})
VERB_POOL = ("delete", "send", "transfer", "read", "wire", "report", "list")

rules_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "priority": st.integers(0, 6),
            "enabled": st.booleans(),
            "action_type": st.sampled_from(GLOBS),
            "conditions": st.lists(st.sampled_from(CONDITIONS), max_size=2, unique_by=lambda c: c["path"]),
            "match": st.sampled_from(["all", "any"]),
            "risk_level": st.sampled_from(LEVELS),
            "required_approvals": st.integers(1, 3),
            "approver_group": st.sampled_from(GROUPS),
            "decision_ttl_seconds": st.integers(2, 5000),
            "execution_window_seconds": st.integers(2, 5000),
            "editable_params": st.lists(st.sampled_from(["amount", "memo"]), unique=True),
            "masked_params": st.lists(st.sampled_from(["amount", "memo"]), unique=True),
            "step_up": st.booleans(),
        }
    ),
    max_size=6,
).map(lambda rules: [{**rule, "name": f"rule{index}"} for index, rule in enumerate(rules)])

STRICTER_OPS = (
    "add_prohibited",
    "raise_level",
    "raise_approvals",
    "add_masked",
    "remove_editable",
    "shorten_ttl",
    "shorten_window",
    "step_up_on",
    "add_verb",
)
OTHER_OPS = (
    "lower_level",
    "raise_from_low",
    "add_rule",
    "move",
    "toggle",
    "regroup",
    "repattern",
    "recondition",
    "remove_rule",
    "remove_verb",
    "lower_approvals",
)


def new_name(rules: list[dict]) -> str:
    names = {rule["name"] for rule in rules}
    return next(f"new{i}" for i in range(len(rules) + 1) if f"new{i}" not in names)


def apply_op(op: str, rules: list[dict], verbs: list[str], data) -> None:
    """Change `rules`/`verbs` in place by one operation of kind `op` (a no-op when it cannot apply)."""
    draw = data.draw
    if op == "add_prohibited":
        rules.append(
            {
                "name": new_name(rules),
                "priority": draw(st.integers(0, 6)),
                "action_type": draw(st.sampled_from(GLOBS)),
                "risk_level": "prohibited",
                "conditions": draw(st.lists(st.sampled_from(CONDITIONS), max_size=1)),
            }
        )
        return
    if op == "add_rule":
        rules.append(
            {
                "name": new_name(rules),
                "priority": draw(st.integers(0, 6)),
                "action_type": draw(st.sampled_from(GLOBS)),
                "risk_level": draw(st.sampled_from(LEVELS[:4])),
            }
        )
        return
    if op == "add_verb":
        verbs.extend(v for v in [draw(st.sampled_from(VERB_POOL))] if v not in verbs)
        return
    if op == "remove_verb":
        if verbs:
            verbs.remove(draw(st.sampled_from(verbs)))
        return
    if not rules:
        return
    rule = rules[draw(st.integers(0, len(rules) - 1))]
    rank = level_rank(rule["risk_level"])
    if op == "raise_level" and rule["risk_level"] != "low" and rank < len(LEVELS) - 1:
        rule["risk_level"] = LEVELS[draw(st.integers(rank + 1, len(LEVELS) - 1))]
    elif op == "raise_from_low" and rule["risk_level"] == "low":
        rule["risk_level"] = draw(st.sampled_from(LEVELS[1:]))
    elif op == "lower_level" and rank > 0:
        rule["risk_level"] = LEVELS[draw(st.integers(0, rank - 1))]
    elif op == "raise_approvals":
        rule["required_approvals"] = rule.get("required_approvals", 1) + draw(st.integers(1, 2))
    elif op == "lower_approvals" and rule.get("required_approvals", 1) > 1:
        rule["required_approvals"] -= 1
    elif op == "add_masked":
        rule["masked_params"] = sorted({*rule.get("masked_params", []), draw(st.sampled_from(["amount", "to"]))})
    elif op == "remove_editable" and rule.get("editable_params"):
        rule["editable_params"] = rule["editable_params"][1:]
    elif op == "shorten_ttl" and rule.get("decision_ttl_seconds", 3600) > 1:
        rule["decision_ttl_seconds"] = rule.get("decision_ttl_seconds", 3600) - 1
    elif op == "shorten_window" and rule.get("execution_window_seconds", 900) > 1:
        rule["execution_window_seconds"] = rule.get("execution_window_seconds", 900) - 1
    elif op == "step_up_on":
        rule["step_up"] = True
    elif op == "move":
        rule["priority"] = draw(st.integers(0, 6))
    elif op == "toggle":
        rule["enabled"] = not rule.get("enabled", True)
    elif op == "regroup":
        rule["approver_group"] = draw(st.sampled_from(GROUPS))
    elif op == "repattern":
        rule["action_type"] = draw(st.sampled_from(GLOBS))
    elif op == "recondition":
        rule["conditions"] = draw(st.lists(st.sampled_from(CONDITIONS), max_size=2, unique_by=lambda c: c["path"]))
    elif op == "remove_rule":
        rules.remove(rule)


def outcome(policy, action: str, params: dict, target: dict) -> tuple[int, int]:
    """What an action gets, ordered as the design orders strictness: level, then approvals."""
    classification = policy.classify(ClassificationInput.build(action, params, target))
    return level_rank(classification.risk_level), classification.required_approvals


@settings(max_examples=300, deadline=None)
@given(before=rules_strategy, verbs=st.lists(st.sampled_from(VERB_POOL), unique=True), data=st.data())
def test_a_provably_stricter_change_never_classifies_anything_lower(before, verbs, data):
    # Mostly stricter operations, so "yes" is common; sometimes others, to try to fool it.
    ops = data.draw(st.lists(st.sampled_from(STRICTER_OPS * 3 + OTHER_OPS), min_size=1, max_size=4))
    after, after_verbs = copy.deepcopy(before), list(verbs)
    for op in ops:
        apply_op(op, after, after_verbs, data)

    stricter = is_provably_stricter(before, verbs, after, after_verbs)
    if all(op in STRICTER_OPS for op in ops):
        assert stricter, "every operation was on the list, yet the change was not recognized as stricter"
    if not stricter:
        return
    old = compile_policy(1, [RuleSpec.from_dict(r) for r in before], verbs)
    new = compile_policy(2, [RuleSpec.from_dict(r) for r in after], after_verbs)
    for action in ACTIONS:
        for params in PARAMS:
            for target in TARGETS:
                assert outcome(new, action, params, target) >= outcome(old, action, params, target), (
                    action,
                    params,
                    target,
                )


def test_a_change_off_the_list_can_lower_what_an_action_gets():
    """Why the list is short: each of these, which wait, lowers someone's classification."""

    def level(rules, action):
        return (
            compile_policy(1, [RuleSpec.from_dict(r) for r in rules], VERBS)
            .classify(ClassificationInput.build(action, {"amount": 5000}, {}))
            .risk_level
        )

    low_above_all = [*BEFORE, {"name": "anything_low", "priority": 0, "action_type": "*", "risk_level": "low"}]
    assert (level(BEFORE, "export_report"), level(low_above_all, "export_report")) == ("medium", "low")
    # A destructive verb keeps a low rule off wire_transfer, however high it stands.
    assert level(low_above_all, "wire_transfer") == "high"
    narrowed = changed("wire_transfer", conditions=[{"path": "impact.amount", "op": "gt", "value": 10**6}])
    assert level(narrowed, "wire_transfer") == "medium"  # the policy default
    assert level(changed("wire_transfer", enabled=False), "wire_transfer") == "medium"
