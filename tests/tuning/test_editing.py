"""The rule editor's services: validation as the admin types (every operator, bad
paths, bad values), reordering and enabling as one version each, and "test this rule"."""

from __future__ import annotations

import pytest

from approvals import policy
from approvals.masking import MASK
from approvals.models import PolicyVersion, RiskRule
from approvals.people import Person
from approvals.policy.rules.conditions import OPERATORS, RuleValidationError
from approvals.policy.tuning import editing

pytestmark = pytest.mark.django_db


def _rule(*conditions, **extra):
    return {"name": "r", "action_type": "send_email", "risk_level": "high", "conditions": list(conditions), **extra}


GOOD_VALUE = {
    "eq": "x",
    "ne": None,
    "gt": 10,
    "gte": "100.50",
    "lt": -1,
    "lte": 0,
    "in": ["a", 1],
    "contains": "@example.com",
    "matches": "^urgent",
    "len_gt": 3,
    "exists": True,
}
BAD_VALUE = {
    "eq": {"a": 1},
    "ne": [1],
    "gt": "ten",
    "gte": 1.5,
    "lt": True,
    "lte": None,
    "in": [],
    "contains": [1],
    "matches": "([",
    "len_gt": -1,
    "exists": "yes",
}


@pytest.mark.parametrize("op", OPERATORS)
def test_every_operator_accepts_a_good_value_and_refuses_a_bad_one_naming_the_value(op):
    assert editing.validate_rule(_rule({"path": "params.x", "op": op, "value": GOOD_VALUE[op]}))["ok"]
    result = editing.validate_rule(_rule({"path": "params.x", "op": op, "value": BAD_VALUE[op]}))
    assert result["ok"] is False
    assert result["field"].startswith("conditions[0].value")
    assert result["message"]


@pytest.mark.parametrize(
    "path, fragment",
    [
        ("", "non-empty"),
        ("body.x", "must start with one of"),
        ("params", "whole namespace"),
        ("params.a b", "invalid segment"),
        ("declared.cost", "trusts_declared"),
        (".".join(["params"] + ["a"] * 20), "deeper"),
    ],
)
def test_bad_paths_are_refused_with_a_clear_message(path, fragment):
    result = editing.validate_rule(_rule({"path": path, "op": "eq", "value": 1}))
    assert result["ok"] is False
    assert result["field"] == "conditions[0].path"
    assert fragment in result["message"]


def test_unknown_operator_and_fields_are_named():
    assert editing.validate_rule(_rule({"path": "params.x", "op": "like", "value": 1}))["field"] == "conditions[0].op"
    assert editing.validate_rule({**_rule(), "risk_level": "severe"})["field"] == "risk_level"
    assert editing.validate_rule({**_rule(), "colour": "red"})["field"] == "colour"
    assert editing.validate_rule(_rule({"path": "params.x", "op": "eq"}))["field"] == "conditions[0].value"


def test_reordering_is_one_save_and_one_version(risk_admin):
    names = list(RiskRule.objects.order_by("priority", "name").values_list("name", flat=True))
    new_order = [names[-1], *names[:-1]]
    before = PolicyVersion.objects.count()

    version = editing.reorder(new_order, actor=Person(risk_admin), note="Reads first")

    assert PolicyVersion.objects.count() == before + 1
    assert list(RiskRule.objects.order_by("priority", "name").values_list("name", flat=True)) == new_order
    assert [r["name"] for r in policy.current_policy().compiled.to_dicts()] == new_order
    assert version.note == "Reads first"


def test_reordering_must_list_every_rule_once(risk_admin):
    names = list(RiskRule.objects.values_list("name", flat=True))
    for bad in (names[:-1], [*names, names[0]], [*names[:-1], "ghost"]):
        with pytest.raises(RuleValidationError):
            editing.reorder(bad, actor=Person(risk_admin), note="x")


def test_disabling_a_rule_is_a_version_and_changes_classification(risk_admin):
    editing.set_enabled("read_low", False, actor=Person(risk_admin), note="Reads need a look this week")
    assert RiskRule.objects.get(name="read_low").enabled is False
    result = editing.try_rule(None, {"action_type": "read_file", "params": {}})
    assert result.classification["risk_level"] == "medium"
    with pytest.raises(RuleValidationError):
        editing.set_enabled("read_low", False, actor=Person(risk_admin), note="again")


def test_try_rule_explains_which_conditions_held_and_masks_masked_params():
    rule = {
        "name": "secret_mail",
        "priority": 1,
        "action_type": "send_email",
        "risk_level": "critical",
        "match": "all",
        "masked_params": ["body"],
        "conditions": [
            {"path": "params.body", "op": "contains", "value": "password"},
            {"path": "impact.recipient_count", "op": "gt", "value": 5},
        ],
    }
    sample = {"action_type": "send_email", "params": {"to": ["a@x.com"], "body": "the password is hunter2"}}

    result = editing.try_rule(rule, sample)

    assert result.action_type_matches and not result.rule_matches
    assert [c.held for c in result.conditions] == [True, False]
    assert result.conditions[0].actual == MASK
    assert "hunter2" not in str(result.to_dict())
    assert result.conditions[1].actual == "1"
    assert result.matched_rule == "send_email_default"

    result = editing.try_rule({**rule, "match": "any"}, sample)
    assert result.rule_matches and result.matched_rule == "secret_mail"
    assert result.classification["risk_level"] == "critical"


def test_a_sample_can_be_a_stored_request(submit):
    request = submit("send_email", {"to": ["a@x.com"], "subject": "s", "body": "secret plans"})
    found = editing.sample_from_request(str(request.pk))
    assert found.sample["params"]["body"] == "secret plans"  # evaluated on the server only
    assert found.shown["params"] == {"to": ["a@x.com"], "subject": "s", "body": MASK}  # body is masked
    assert found.masked == {"body"}  # what its own rule masks
    assert editing.recent_samples()[0]["id"] == str(request.pk)
    with pytest.raises(RuleValidationError) as caught:
        editing.try_rule(None, {"params": {}})
    assert caught.value.field == "sample.action_type"
