"""The engine: rule order, defaults, declared facts, validation, round trips."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from approvals.masking import MASK
from approvals.policy.rules import (
    LEVELS,
    ActionTypeError,
    Classification,
    ClassificationInput,
    CompiledPolicy,
    PolicyDefaults,
    RuleSpec,
    RuleValidationError,
    is_stricter,
    level_rank,
)

from .strategies import conditions

# Patterns in several spellings: each is stored normalized.
GLOBS = ("send_email", "Send_email", "read_file", "send_*", "*", "read_?ile", "[sd]e*", "*_email", "READ_*")


def rule(name: str, priority: int = 100, **kwargs: Any) -> RuleSpec:
    kwargs.setdefault("action_type", "send_email")
    kwargs.setdefault("risk_level", "high")
    return RuleSpec(name=name, priority=priority, **kwargs)


def classify(rules: list[RuleSpec], action_type: str = "send_email", **inp: Any) -> Classification:
    return CompiledPolicy(1, rules, PolicyDefaults()).classify(ClassificationInput(action_type, **inp))


def test_lower_priority_runs_first() -> None:
    rules = [rule("later", 20, risk_level="critical"), rule("first", 10, risk_level="medium")]
    assert classify(rules).rule_name == "first"


def test_disabled_rule_is_skipped() -> None:
    rules = [rule("off", 10, enabled=False), rule("on", 20, risk_level="critical")]
    assert classify(rules).rule_name == "on"


def test_priority_ties_broken_by_name() -> None:
    rules = [rule("bravo", 10), rule("alpha", 10, risk_level="critical")]
    assert classify(rules).rule_name == "alpha"


def test_exact_rule_and_glob_rule_interleave_by_priority() -> None:
    rules = [rule("exact", 20, risk_level="critical"), rule("glob", 10, action_type="send_*")]
    assert classify(rules).rule_name == "glob"


def test_globs_match_the_normalized_name() -> None:
    # Contract change (issue 12): names and patterns are case-folded, so SEND_email is send_email.
    assert classify([rule("r", action_type="send_*")], action_type="SEND_email").rule_name == "r"
    assert classify([rule("r", action_type="Send_*")], action_type="send_email/").rule_name == "r"
    assert classify([rule("r", action_type="send_*")], action_type="ｓｅｎｄ_email").rule_name == "r"


def test_an_action_type_outside_the_syntax_is_refused() -> None:
    with pytest.raises(ActionTypeError):
        classify([rule("r", action_type="*")], action_type="s\u0435nd_email")


def test_conditions_that_fail_fall_through() -> None:
    many = {"path": "impact.recipient_count", "op": "gt", "value": 10}
    rules = [rule("many", 10, conditions=(many,)), rule("rest", 20, risk_level="medium")]
    assert classify(rules, impact={"recipient_count": 14}).rule_name == "many"
    assert classify(rules, impact={"recipient_count": 3}).rule_name == "rest"


def test_match_any_and_all() -> None:
    conds = ({"path": "impact.a", "op": "eq", "value": 1}, {"path": "impact.b", "op": "eq", "value": 1})
    any_rule, all_rule = rule("any", match="any", conditions=conds), rule("all", conditions=conds)
    assert classify([any_rule], impact={"a": 1}).rule_name == "any"
    assert classify([all_rule], impact={"a": 1}).rule_name is None
    assert classify([all_rule], impact={"a": 1, "b": 1}).rule_name == "all"


def test_classification_explains_itself() -> None:
    many = {"path": "impact.recipient_count", "op": "gt", "value": 10}
    result = classify([rule("send_email_many_recipients", conditions=(many,))], impact={"recipient_count": 14})
    assert result.reason == "rule 'send_email_many_recipients' matched: impact.recipient_count > 10 (was 14)"
    assert "impact.recipient_count > 10 (was 14)" in result.explanation


def test_explanation_masks_masked_params() -> None:
    card = {"path": "params.body", "op": "matches", "value": "[0-9]{16}"}
    result = classify(
        [rule("card", conditions=(card,), masked_params=("body",))], params={"body": "pay 4111111111111111 now"}
    )
    assert "4111" not in result.reason
    assert f"(was {MASK})" in result.reason


def test_low_and_prohibited_need_no_approvals() -> None:
    # read_report: a low rule on send_email would be blocked by the destructive verb "send".
    low = rule("r", risk_level="low", required_approvals=3, action_type="read_report")
    assert classify([low], action_type="read_report").required_approvals == 0
    assert classify([rule("r", risk_level="prohibited", required_approvals=3)]).required_approvals == 0
    assert classify([rule("r", risk_level="high", required_approvals=3)]).required_approvals == 3


def test_classification_round_trips() -> None:
    result = classify([rule("r", editable_params=("body",), escalation_group="admins")])
    assert Classification.from_dict(result.to_dict()) == result


def test_classification_with_unknowns_and_blocked_rules_round_trips() -> None:
    rules = [
        rule("r", action_type="read*", risk_level="low"),
        rule("s", action_type="read*", conditions=({"path": "impact.amount", "op": "gt", "value": 5},)),
    ]
    result = classify(rules, action_type="readAndDeleteFile", impact={"unknown": ["amount"]})
    assert (result.blocked_rules, result.unknown_paths) == (("r",), ("impact.amount",))
    assert Classification.from_dict(result.to_dict()) == result


def test_a_classification_stored_before_the_new_fields_still_loads() -> None:
    stored = classify([rule("r")]).to_dict()
    del stored["unknown_paths"], stored["blocked_rules"], stored["step_up"]
    loaded = Classification.from_dict(stored)
    assert (loaded.unknown_paths, loaded.blocked_rules, loaded.step_up) == ((), (), False)


# ---------------------------------------------------------------------------
# Defaults
# ---------------------------------------------------------------------------


def test_no_match_gives_medium_default() -> None:
    result = classify([], action_type="frobnicate")
    assert (result.risk_level, result.rule_name, result.required_approvals) == ("medium", None, 1)
    assert result.reason == "no rule matched; policy default medium"


def test_default_can_never_be_low() -> None:
    with pytest.raises(RuleValidationError) as caught:
        PolicyDefaults(risk_level="low")
    assert caught.value.field == "risk_level"


@pytest.mark.parametrize("level", [level for level in LEVELS if level != "low"])
def test_other_default_levels_allowed(level: str) -> None:
    assert PolicyDefaults(risk_level=level).risk_level == level


def test_policy_defaults_round_trip() -> None:
    defaults = PolicyDefaults(risk_level="high", required_approvals=2)
    assert PolicyDefaults.from_dict(defaults.to_dict()) == defaults


# ---------------------------------------------------------------------------
# Declared facts
# ---------------------------------------------------------------------------

DECLARED_SAFE = {"path": "declared.internal_only", "op": "eq", "value": True}


def test_trusting_rule_reads_declared_facts() -> None:
    # update_document: a low rule on send_email would be blocked by the destructive verb "send".
    trusting = rule(
        "trusting", risk_level="low", conditions=(DECLARED_SAFE,), trusts_declared=True, action_type="update_document"
    )
    assert classify([trusting], "update_document", declared={"internal_only": True}).rule_name == "trusting"
    assert classify([trusting], "update_document", declared={}).rule_name is None


def test_untrusting_rule_sees_empty_declared_namespace() -> None:
    hidden = rule("untrusting", conditions=({"path": "params.x", "op": "exists", "value": True},))
    exists_check = {"path": "declared.internal_only", "op": "exists", "value": False}
    trusting_absent = rule("absent", 5, conditions=(exists_check,), trusts_declared=True)
    # Same input, declared present: only a trusting rule may see it.
    assert (
        classify([trusting_absent, hidden], declared={"internal_only": True}, params={"x": 1}).rule_name == "untrusting"
    )


def test_from_dict_refuses_declared_path_without_trust() -> None:
    data = {"name": "r", "action_type": "send_email", "risk_level": "low", "conditions": [DECLARED_SAFE]}
    with pytest.raises(RuleValidationError) as caught:
        RuleSpec.from_dict(data)
    assert caught.value.field == "conditions[0].path"
    assert "trusts_declared" in caught.value.message


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------

GOOD = {"name": "r", "action_type": "send_email", "risk_level": "high"}


@pytest.mark.parametrize(
    ("changes", "field", "message_part"),
    [
        (
            {
                "conditions": [
                    {"path": "impact.a", "op": "eq", "value": 1},
                    {"path": "impact.a", "op": "gtx", "value": 1},
                ]
            },
            "conditions[1].op",
            "unknown operator 'gtx'",
        ),
        ({"conditions": [{"path": "request.a", "op": "eq", "value": 1}]}, "conditions[0].path", "must start with"),
        ({"conditions": [{"path": "impact.a", "op": "gt", "value": "ten"}]}, "conditions[0].value", "needs a number"),
        ({"conditions": [{"path": "params.a", "op": "matches", "value": "[a-"}]}, "conditions[0].value", "compile"),
        ({"conditions": [{"path": "params.a", "op": "in", "value": "a"}]}, "conditions[0].value", "list"),
        ({"conditions": {"path": "params.a"}}, "conditions", "must be a list"),
        ({"colour": "red"}, "colour", "unknown key 'colour'"),
        ({"risk_level": "severe"}, "risk_level", "expected one of low, medium, high, critical, prohibited"),
        ({"required_approvals": 0}, "required_approvals", "at least 1"),
        ({"required_approvals": True}, "required_approvals", "integer"),
        ({"decision_ttl_seconds": 0}, "decision_ttl_seconds", "at least 1"),
        ({"execution_window_seconds": -5}, "execution_window_seconds", "at least 1"),
        ({"match": "some"}, "match", "unknown match"),
        ({"name": ""}, "name", "non-empty"),
        ({"name": " r"}, "name", "whitespace"),
        ({"action_type": ""}, "action_type", "non-empty"),
        ({"action_type": "send email"}, "action_type", "glob characters"),
        ({"action_type": "s\u0435nd_*"}, "action_type", "CYRILLIC"),
        ({"action_type": "files/*"}, "action_type", "'/'"),
        ({"priority": "1"}, "priority", "integer"),
        ({"enabled": 1}, "enabled", "true or false"),
        ({"trusts_declared": "yes"}, "trusts_declared", "true or false"),
        ({"editable_params": ["body", "body"]}, "editable_params", "twice"),
        ({"masked_params": ["a.b"]}, "masked_params[0]", "not a param name"),
        ({"escalation_group": "reviewers"}, "escalation_group", "differ"),
        ({"approver_group": None}, "approver_group", "non-empty"),
    ],
)
def test_bad_rule_refused_with_field(changes: dict[str, Any], field: str, message_part: str) -> None:
    with pytest.raises(RuleValidationError) as caught:
        RuleSpec.from_dict({**GOOD, **changes})
    assert caught.value.field == field
    assert message_part in caught.value.message


@pytest.mark.parametrize("missing", ["name", "action_type", "risk_level"])
def test_required_rule_keys(missing: str) -> None:
    data = {key: value for key, value in GOOD.items() if key != missing}
    with pytest.raises(RuleValidationError) as caught:
        RuleSpec.from_dict(data)
    assert caught.value.field == missing


def test_snapshot_errors_name_the_rule() -> None:
    with pytest.raises(RuleValidationError) as caught:
        CompiledPolicy.from_dicts(1, [GOOD, {**GOOD, "name": "s", "required_approvals": 0}])
    assert caught.value.field == "rules[1].required_approvals"


def test_rule_names_must_be_unique() -> None:
    with pytest.raises(RuleValidationError, match="unique"):
        CompiledPolicy(1, [RuleSpec.from_dict(GOOD), RuleSpec.from_dict(GOOD)])


def test_rule_copies_condition_dicts() -> None:
    condition = {"path": "impact.a", "op": "eq", "value": 1}
    spec = RuleSpec.from_dict({**GOOD, "conditions": [condition]})
    condition["value"] = 2
    assert spec.to_dict()["conditions"] == [{"path": "impact.a", "op": "eq", "value": 1}]


rule_dicts = st.fixed_dictionaries(
    {
        "name": st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True),
        "priority": st.integers(-100, 10_000),
        "enabled": st.booleans(),
        "action_type": st.sampled_from(GLOBS),
        "conditions": st.lists(conditions, max_size=3),
        "match": st.sampled_from(["all", "any"]),
        "risk_level": st.sampled_from(LEVELS),
        "required_approvals": st.integers(1, 5),
        "approver_group": st.sampled_from(["reviewers", "finance"]),
        "escalation_group": st.sampled_from([None, "admins"]),
        "decision_ttl_seconds": st.integers(1, 10**6),
        "execution_window_seconds": st.integers(1, 10**6),
        "editable_params": st.lists(st.sampled_from(["to", "body", "subject"]), unique=True),
        "masked_params": st.lists(st.sampled_from(["body", "token"]), unique=True),
        "trusts_declared": st.booleans(),
        "step_up": st.booleans(),
    }
)


@given(data=rule_dicts)
def test_rule_dicts_round_trip_exactly(data: dict[str, Any]) -> None:
    spec = RuleSpec.from_dict(data)
    # The pattern comes back normalized; lower-case patterns are unchanged.
    assert spec.to_dict() == {**data, "action_type": data["action_type"].casefold()}
    assert RuleSpec.from_dict(spec.to_dict()) == spec
    assert hash(spec) == hash(RuleSpec.from_dict(data))


def test_to_dict_returns_the_normalized_pattern() -> None:
    assert RuleSpec.from_dict({**GOOD, "action_type": "Send_*"}).to_dict()["action_type"] == "send_*"
    assert RuleSpec.from_dict({**GOOD, "action_type": "ｓｅｎｄ_email"}).action_type == "send_email"


def test_replace_revalidates() -> None:
    with pytest.raises(RuleValidationError):
        replace(RuleSpec.from_dict(GOOD), risk_level="extreme")


# ---------------------------------------------------------------------------
# Levels and strictness
# ---------------------------------------------------------------------------


def test_level_rank_orders_levels() -> None:
    assert [level_rank(level) for level in LEVELS] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        level_rank("severe")


def outcome(level: str, approvals: int) -> Classification:
    return Classification(
        risk_level=level,
        rule_name="r",
        required_approvals=approvals,
        approver_group="reviewers",
        escalation_group=None,
        decision_ttl_seconds=60,
        execution_window_seconds=60,
        editable_params=(),
        masked_params=(),
        policy_version=1,
        explanation=(),
        reason="",
    )


@pytest.mark.parametrize(
    ("new", "old", "expected"),
    [
        (outcome("high", 1), outcome("medium", 1), True),
        (outcome("medium", 1), outcome("high", 1), False),
        (outcome("medium", 2), outcome("medium", 1), True),
        (outcome("medium", 1), outcome("medium", 1), False),
        (outcome("medium", 2), outcome("high", 1), True),  # more approvals counts at any level
        (outcome("prohibited", 0), outcome("critical", 3), True),
        (outcome("high", 2), outcome("prohibited", 0), False),
        (outcome("prohibited", 0), outcome("prohibited", 0), False),
        (outcome("medium", 1), outcome("low", 0), True),
        (outcome("low", 0), outcome("medium", 1), False),
    ],
)
def test_is_stricter(new: Classification, old: Classification, expected: bool) -> None:
    assert is_stricter(new, old) is expected
