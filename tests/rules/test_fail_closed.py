"""Classification fails closed (DESIGN.md "Risk rules"): deny overrides, destructive
verbs, and unknown values read the strict way.

Each test states one sentence of the design; the properties at the end check them
over random policies.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from approvals.policy.rules import (
    LEVELS,
    SEED_DESTRUCTIVE_VERBS,
    Classification,
    ClassificationInput,
    CompiledPolicy,
    PolicyDefaults,
    RuleSpec,
    RuleValidationError,
    destructive_words,
    strictness,
)

from .strategies import KEYS, conditions, documents


def rule(name: str, priority: int, **kwargs: Any) -> RuleSpec:
    kwargs.setdefault("action_type", "wire_funds")
    kwargs.setdefault("risk_level", "high")
    return RuleSpec(name=name, priority=priority, **kwargs)


def classify(
    rules: list[RuleSpec], action_type: str = "wire_funds", *, verbs: Any = None, **inp: Any
) -> Classification:
    return CompiledPolicy(1, rules, PolicyDefaults(), verbs).classify(ClassificationInput(action_type, **inp))


AMOUNT_OVER_A_MILLION = {"path": "impact.amount", "op": "gt", "value": 1_000_000}
TARGET_IS_STAGING = {"path": "target.environment", "op": "eq", "value": "staging"}
PARAM_OVER_A_MILLION = {"path": "params.amount", "op": "gt", "value": 1_000_000}

# ---------------------------------------------------------------------------
# Deny overrides: a prohibited rule wins wherever it stands in the order
# ---------------------------------------------------------------------------


def test_a_prohibited_rule_wins_over_an_earlier_match() -> None:
    rules = [
        rule("anything_goes", 10, action_type="*", risk_level="medium"),
        rule("never_drop", 90, action_type="drop_*", risk_level="prohibited"),
    ]
    result = classify(rules, "drop_table")
    assert (result.risk_level, result.rule_name) == ("prohibited", "never_drop")
    assert "prohibited rule 'never_drop' wins wherever it stands in the order (deny overrides)" in result.explanation


def test_a_prohibited_rule_that_could_match_wins() -> None:
    rules = [rule("wire", 10), rule("no_big_wires", 90, risk_level="prohibited", conditions=(AMOUNT_OVER_A_MILLION,))]
    result = classify(rules, impact={"amount": None, "unknown": ["amount"]})
    assert (result.risk_level, result.unknown_paths) == ("prohibited", ("impact.amount",))
    assert result.reason == "impact.amount could not be read; read the strict way: rule 'no_big_wires' could match"


def test_a_prohibited_rule_whose_conditions_fail_does_not_win() -> None:
    rules = [rule("wire", 10), rule("no_big_wires", 90, risk_level="prohibited", conditions=(AMOUNT_OVER_A_MILLION,))]
    assert classify(rules, impact={"amount": "500", "unknown": []}).rule_name == "wire"


def test_a_disabled_prohibited_rule_does_not_win() -> None:
    rules = [rule("wire", 10), rule("off", 90, risk_level="prohibited", enabled=False)]
    assert classify(rules).rule_name == "wire"


# ---------------------------------------------------------------------------
# Destructive verbs: a low rule never applies to a name containing one
# ---------------------------------------------------------------------------

READ_ANYTHING = rule("read_low", 10, action_type="read*", risk_level="low")


@pytest.mark.parametrize(
    "action_type",
    ["read_and_delete_database", "readAndDeleteDatabase", "read.drop-table", "ReadThenPayInvoice", "read_DELETEall"],
)
def test_a_low_rule_is_skipped_for_a_destructive_verb(action_type: str) -> None:
    result = classify([READ_ANYTHING], action_type)
    assert (result.risk_level, result.rule_name, result.blocked_rules) == ("medium", None, ("read_low",))
    assert result.explanation[0].startswith("no other enabled rule matched action type")
    assert any("destructive verb" in line and "skipped" in line for line in result.explanation)
    assert "low rule 'read_low' skipped" in result.reason


def test_a_blocked_low_rule_falls_through_to_the_next_rule() -> None:
    rules = [READ_ANYTHING, rule("reads_that_write", 20, action_type="read*", risk_level="high")]
    result = classify(rules, "readAndDeleteDatabase")
    assert (result.risk_level, result.rule_name, result.blocked_rules) == ("high", "reads_that_write", ("read_low",))


def test_a_word_that_only_contains_a_verb_does_not_block() -> None:
    result = classify([rule("list_low", 10, action_type="list_*", risk_level="low")], "list_payments_report")
    assert (result.risk_level, result.blocked_rules) == ("low", ())


def test_a_low_rule_whose_conditions_fail_is_not_reported_blocked() -> None:
    never = rule(
        "read_low",
        10,
        action_type="read*",
        risk_level="low",
        conditions=({"path": "params.x", "op": "eq", "value": "never"},),
    )
    assert classify([never], "read_and_delete_file").blocked_rules == ()


def test_verbs_other_than_low_rules_are_untouched() -> None:
    result = classify([rule("delete_medium", 10, action_type="delete_*", risk_level="medium")], "delete_file")
    assert (result.rule_name, result.blocked_rules) == ("delete_medium", ())


def test_the_policys_verb_list_decides() -> None:
    archive = rule("read_low", 10, action_type="read*", risk_level="low")
    assert classify([archive], "read_and_archive", verbs=["archive"]).rule_name is None
    assert classify([archive], "read_and_delete", verbs=["archive"]).rule_name == "read_low"
    assert classify([archive], "read_and_delete", verbs=[]).rule_name == "read_low"


def test_no_verb_list_means_the_seeded_list_never_none() -> None:
    assert CompiledPolicy(1, []).destructive_verbs == tuple(SEED_DESTRUCTIVE_VERBS)
    assert CompiledPolicy.from_dicts(1, []).destructive_verbs == tuple(SEED_DESTRUCTIVE_VERBS)
    assert CompiledPolicy(1, [], destructive_verbs=["Wipe"]).destructive_verbs == ("wipe",)


def test_a_bad_verb_list_is_refused_naming_the_item() -> None:
    with pytest.raises(RuleValidationError) as caught:
        CompiledPolicy.from_dicts(1, [], None, ["delete", "drop table"])
    assert caught.value.field == "destructive_verbs[1]"


# ---------------------------------------------------------------------------
# Unknown values are read the strict way
# ---------------------------------------------------------------------------

WIRE_RULES = [
    rule(
        "wire_critical",
        10,
        risk_level="critical",
        required_approvals=2,
        approver_group="treasury",
        conditions=(AMOUNT_OVER_A_MILLION,),
    ),
    rule("wire_high", 20),
]


def test_an_unreadable_amount_reads_the_strict_way() -> None:
    result = classify(WIRE_RULES, impact={"amount": None, "unknown": ["amount"]})
    assert (result.risk_level, result.required_approvals, result.approver_group) == ("critical", 2, "treasury")
    assert result.unknown_paths == ("impact.amount",)
    assert result.reason == "impact.amount could not be read; read the strict way: rule 'wire_critical' could match"
    assert "rule 'wire_high' matched, but rule 'wire_critical' could match and is stricter" in result.explanation


def test_a_readable_amount_is_definite() -> None:
    result = classify(WIRE_RULES, impact={"amount": "500", "unknown": []})
    assert (result.rule_name, result.unknown_paths) == ("wire_high", ())


def test_a_param_threshold_on_an_unreadable_number_reads_the_strict_way() -> None:
    rules = [rule("big", 10, risk_level="critical", conditions=(PARAM_OVER_A_MILLION,)), rule("wire_high", 20)]
    result = classify(rules, params={"amount": "5e6"})
    assert (result.rule_name, result.unknown_paths) == ("big", ("params.amount",))
    assert result.reason == "params.amount is not plainly a number; read the strict way: rule 'big' could match"
    assert classify(rules, params={}).reason.startswith("params.amount is missing;")
    assert classify(rules, params={"amount": 500}).rule_name == "wire_high"


def test_target_is_only_the_agents_word_unless_the_rule_trusts_it() -> None:
    rules = [
        rule("staging_low", 10, action_type="deploy_*", risk_level="low", conditions=(TARGET_IS_STAGING,)),
        rule("deploy_high", 20, action_type="deploy_*"),
    ]
    untrusted = classify(rules, "deploy_app", target={"environment": "staging"})
    assert untrusted.rule_name == "deploy_high"  # the low rule only could match; high is stricter
    trusting = [RuleSpec.from_dict({**rules[0].to_dict(), "trusts_declared": True}), rules[1]]
    assert classify(trusting, "deploy_app", target={"environment": "staging"}).rule_name == "staging_low"
    assert classify(trusting, "deploy_app", target={"environment": "prod"}).rule_name == "deploy_high"


def test_a_stricter_rule_on_the_target_applies_on_the_strict_reading() -> None:
    prod = {"path": "target.environment", "op": "eq", "value": "production"}
    rules = [
        rule("prod_critical", 10, action_type="deploy_*", risk_level="critical", conditions=(prod,)),
        rule("deploy_medium", 20, action_type="deploy_*", risk_level="medium"),
    ]
    result = classify(rules, "deploy_app", target={"environment": "staging"})
    assert (result.rule_name, result.unknown_paths) == ("prod_critical", ("target.environment",))
    assert "target.environment is only the agent's word" in result.reason


@pytest.mark.parametrize(
    ("possible", "definite", "winner"),
    [
        (("high", 2), ("high", 1), "possible"),  # more approvals at the same level
        (("high", 1), ("medium", 3), "possible"),  # level first
        (("medium", 3), ("high", 1), "definite"),
        (("high", 1), ("high", 1), "possible"),  # a tie goes to the earliest in the order
        (("low", 1), ("medium", 1), "definite"),
    ],
)
def test_the_strictest_of_what_could_match_decides(
    possible: tuple[str, int], definite: tuple[str, int], winner: str
) -> None:
    rules = [
        rule(
            "possible",
            10,
            risk_level=possible[0],
            required_approvals=possible[1],
            approver_group="a",
            conditions=(AMOUNT_OVER_A_MILLION,),
        ),
        rule("definite", 20, risk_level=definite[0], required_approvals=definite[1], approver_group="b"),
    ]
    result = classify(rules, impact={"amount": None, "unknown": ["amount"]})
    assert result.rule_name == winner
    assert result.approver_group == {"possible": "a", "definite": "b"}[winner]  # the winner's group, TTL, params


def test_a_rule_that_could_match_beats_the_defaults_only_if_stricter() -> None:
    maybe_medium = [rule("maybe", 10, risk_level="medium", conditions=(AMOUNT_OVER_A_MILLION,))]
    assert classify(maybe_medium, impact={"unknown": ["amount"]}).rule_name == "maybe"  # tie with medium: earliest
    maybe_low = [rule("maybe", 10, risk_level="low", conditions=(AMOUNT_OVER_A_MILLION,))]
    assert classify(maybe_low, "read_x", impact={"unknown": ["amount"]}).rule_name is None


def test_rules_after_the_first_definite_match_do_not_count() -> None:
    rules = [
        rule("wire_high", 10),
        rule("late_critical", 20, risk_level="critical", conditions=(AMOUNT_OVER_A_MILLION,)),
    ]
    assert classify(rules, impact={"unknown": ["amount"]}).rule_name == "wire_high"


def test_match_any_is_true_if_any_condition_is_true_despite_unknowns() -> None:
    many = {"path": "impact.recipient_count", "op": "gt", "value": 10}
    either = rule("either", 10, match="any", conditions=(AMOUNT_OVER_A_MILLION, many))
    result = classify([either], impact={"unknown": ["amount"], "recipient_count": 11})
    assert (result.rule_name, result.unknown_paths) == ("either", ())


def test_match_all_is_false_if_any_condition_is_false_despite_unknowns() -> None:
    many = {"path": "impact.recipient_count", "op": "gt", "value": 10}
    both = rule("both", 10, risk_level="critical", conditions=(AMOUNT_OVER_A_MILLION, many))
    assert classify([both], impact={"unknown": ["amount"], "recipient_count": 3}).rule_name is None


# ---------------------------------------------------------------------------
# Properties over random policies
# ---------------------------------------------------------------------------

NAMES = ("wire_funds", "read_report", "readAndDeleteReport", "delete_files", "list_payments")
GLOBS = ("*", "wire_*", "read*", "delete_*", "list_*", "wire_funds", "read_report")
rule_specs = st.builds(
    lambda index, glob, conds, match, level, approvals, trusts: RuleSpec(
        name=f"r{index}",
        priority=index % 4,
        action_type=glob,
        conditions=tuple(conds),
        match=match,
        risk_level=level,
        required_approvals=approvals,
        trusts_declared=trusts,
    ),
    st.integers(0, 1000),
    st.sampled_from(GLOBS),
    st.lists(conditions, max_size=2),
    st.sampled_from(["all", "any"]),
    st.sampled_from(LEVELS),
    st.integers(1, 3),
    st.booleans(),
)
policies = st.lists(rule_specs, max_size=10, unique_by=lambda r: r.name).map(lambda rules: CompiledPolicy(1, rules))
UNREADABLE = ("5 million", "2.500.000", {"value": {}}, None, [1], "NaN")


def key(result: Classification) -> tuple[int, int]:
    return strictness(result.risk_level, result.required_approvals)


@given(
    policy=policies,
    name=st.sampled_from(NAMES),
    doc=documents,
    unknown=st.lists(st.sampled_from(KEYS), unique=True),
    more=st.lists(st.sampled_from(KEYS), min_size=1),
)
def test_listing_more_impact_facts_unknown_never_lowers_the_outcome(
    policy: CompiledPolicy, name: str, doc: dict[str, Any], unknown: list[str], more: list[str]
) -> None:
    before = ClassificationInput(name, doc["params"], doc["target"], {**doc["impact"], "unknown": unknown})
    after = ClassificationInput(
        name, doc["params"], doc["target"], {**doc["impact"], "unknown": sorted({*unknown, *more})}
    )
    assert key(policy.classify(after)) >= key(policy.classify(before))


@given(
    policy=policies,
    name=st.sampled_from(NAMES),
    doc=documents,
    param=st.sampled_from(KEYS),
    unreadable=st.sampled_from(UNREADABLE),
)
def test_making_a_param_unreadable_never_lowers_the_outcome_of_thresholds(
    policy: CompiledPolicy, name: str, doc: dict[str, Any], param: str, unreadable: Any
) -> None:
    # Only thresholds read params the strict way; eq or matches on a param are the
    # admin's exact test, and an agent changing the value may change their answer.
    thresholds = [
        r
        for r in policy.rules
        if all(c.root != "params" or c.op in ("gt", "gte", "lt", "lte") for c in r.compiled_conditions)
    ]
    policy = CompiledPolicy(1, thresholds)
    plain = {**doc["params"], param: 1_000}
    before = ClassificationInput(name, plain, doc["target"], doc["impact"])
    after = ClassificationInput(name, {**plain, param: unreadable}, doc["target"], doc["impact"])
    assert key(policy.classify(after)) >= key(policy.classify(before))


@given(policy=policies, name=st.sampled_from(NAMES), doc=documents)
def test_what_the_agent_says_about_its_target_changes_nothing_for_rules_that_do_not_trust_it(
    policy: CompiledPolicy, name: str, doc: dict[str, Any]
) -> None:
    untrusting = CompiledPolicy(
        1, [RuleSpec.from_dict({**r.to_dict(), "trusts_declared": False}) for r in policy.rules]
    )
    silent = untrusting.classify(ClassificationInput(name, doc["params"], {}, doc["impact"]))
    claimed = untrusting.classify(ClassificationInput(name, doc["params"], doc["target"], doc["impact"]))
    assert claimed == silent


@given(policy=policies, name=st.sampled_from(NAMES), doc=documents)
def test_a_blocked_low_rule_never_decides(policy: CompiledPolicy, name: str, doc: dict[str, Any]) -> None:
    result = policy.classify(ClassificationInput(name, doc["params"], doc["target"], doc["impact"]))
    if destructive_words(name, policy.destructive_verbs):
        assert result.risk_level != "low"
        assert result.rule_name not in result.blocked_rules
