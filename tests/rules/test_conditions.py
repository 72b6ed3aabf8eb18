"""Conditions: every operator, missing paths, type mismatches, and validation."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given

from approvals.masking import MASK
from approvals.policy.rules.conditions import MISSING, UNKNOWN, RuleValidationError, compile_condition, to_decimal

from .strategies import conditions, documents

DOC: dict[str, Any] = {
    "params": {
        "to": ["a@x", "b@x"],
        "subject": "Quarterly numbers",
        "amount": "100.50",
        "count": 14,
        "ratio": 0.1,
        "flag": True,
        "nothing": None,
        "items": [{"id": 7}, {"id": 8}],
        "meta": {"kind": "invoice"},
    },
    "target": {"labels": ["pii", "internal"]},
    "impact": {"recipient_count": 14, "sensitive": False},
    "declared": {},
}


def holds(path: str, op: str, value: Any, doc: dict[str, Any] = DOC) -> bool:
    return compile_condition({"path": path, "op": op, "value": value}).evaluate(doc)[0]


@pytest.mark.parametrize(
    ("path", "op", "value", "expected"),
    [
        ("params.subject", "eq", "Quarterly numbers", True),
        ("params.subject", "eq", "quarterly numbers", False),
        ("params.count", "eq", 14, True),
        ("params.flag", "eq", True, True),
        ("params.flag", "eq", 1, False),  # a bool is not the number 1
        ("params.count", "eq", True, False),
        ("params.nothing", "eq", None, True),
        ("params.count", "ne", 15, True),
        ("params.count", "ne", 14, False),
        ("impact.recipient_count", "gt", 10, True),
        ("impact.recipient_count", "gt", 14, False),
        ("impact.recipient_count", "gte", 14, True),
        ("impact.recipient_count", "gte", 15, False),
        ("impact.recipient_count", "lt", 15, True),
        ("impact.recipient_count", "lt", 14, False),
        ("impact.recipient_count", "lte", 14, True),
        ("impact.recipient_count", "lte", 13, False),
        ("params.amount", "gt", "100.49", True),  # decimal strings compare as numbers
        ("params.amount", "gt", "100.50", False),
        ("params.amount", "gte", 100, True),
        ("params.ratio", "eq", 0, False),
        ("params.ratio", "lte", "0.1", True),  # floats go through str(): 0.1 stays 0.1
        ("params.subject", "in", ["Quarterly numbers", "x"], True),
        ("params.subject", "in", ["x", "y"], False),
        ("params.count", "in", [13, 14], True),
        ("target.labels", "contains", "pii", True),
        ("target.labels", "contains", "public", False),
        ("params.subject", "contains", "numbers", True),
        ("params.subject", "contains", "letters", False),
        ("params.meta", "contains", "kind", True),
        ("params.subject", "matches", r"^Quarter", True),
        ("params.subject", "matches", r"^numbers", False),
        ("params.to", "len_gt", 1, True),
        ("params.to", "len_gt", 2, False),
        ("params.subject", "len_gt", 5, True),
        ("params.subject", "exists", True, True),
        ("params.subject", "exists", False, False),
        ("params.items.1.id", "eq", 8, True),
        ("params.items.2.id", "exists", False, True),
    ],
)
def test_operator(path: str, op: str, value: Any, expected: bool) -> None:
    assert holds(path, op, value) is expected


@pytest.mark.parametrize(
    "op, value",
    [
        ("eq", "x"),
        ("ne", "x"),
        ("gt", 1),
        ("in", ["x"]),
        ("contains", "x"),
        ("matches", "x"),
        ("len_gt", 0),
        ("exists", True),
    ],
)
def test_missing_path_is_false(op: str, value: Any) -> None:
    condition = compile_condition({"path": "params.absent.deeper", "op": op, "value": value})
    assert condition.evaluate(DOC) == (False, MISSING)


def test_missing_path_satisfies_exists_false() -> None:
    assert holds("params.absent", "exists", False)
    assert holds("params.nothing", "exists", False)  # JSON null counts as absent


@pytest.mark.parametrize(
    ("path", "op", "value"),
    [
        ("params.subject", "gt", 1),  # gt on a non-numeric string
        ("params.flag", "gt", 0),  # a bool is not a number
        ("params.count", "len_gt", 0),  # len_gt on an int
        ("params.count", "matches", "1"),  # matches on an int
        ("params.count", "contains", 1),
        ("params.to.a", "eq", "x"),  # identifier segment into a list
        ("params.subject.0", "eq", "Q"),  # index into a string
        ("params.meta", "gt", 0),
    ],
)
def test_type_mismatch_is_false(path: str, op: str, value: Any) -> None:
    assert holds(path, op, value) is False


@given(condition=conditions, doc=documents)
def test_valid_conditions_never_raise_on_any_json(condition: dict[str, Any], doc: dict[str, Any]) -> None:
    compiled = compile_condition(condition)
    held, _actual = compiled.evaluate(doc)
    assert isinstance(held, bool)
    assert isinstance(compiled.describe(_actual), str)
    assert compiled.to_dict() == condition


# ---------------------------------------------------------------------------
# Three-valued reading (Condition.truth): a threshold on an agent's param
# ---------------------------------------------------------------------------


def truth(path: str, op: str, value: Any, doc: dict[str, Any] = DOC) -> bool | None:
    condition = compile_condition({"path": path, "op": op, "value": value})
    return condition.truth(condition.resolve(doc))


@pytest.mark.parametrize("op", ["gt", "gte", "lt", "lte"])
@pytest.mark.parametrize(
    "written",
    [
        "5e6",
        "2,500,000",
        " 2500000",
        "",
        "NaN",
        "Infinity",
        True,
        None,
        [2500000],
        {"value": 2500000},
        float("nan"),
        float("inf"),
    ],
)
def test_a_param_threshold_on_a_value_not_plainly_a_number_is_unknown(op: str, written: Any) -> None:
    doc = {"params": {"amount": written}}
    assert truth("params.amount", op, 1_000_000, doc) is UNKNOWN


@pytest.mark.parametrize("op", ["gt", "gte", "lt", "lte"])
def test_a_param_threshold_on_a_missing_value_is_unknown(op: str) -> None:
    assert truth("params.absent", op, 10) is UNKNOWN


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        (2_500_000, True),
        (2_500_000.5, True),
        (Decimal("2500000"), True),
        ("2500000.00", True),
        (500, False),
        ("-3", False),
    ],
)
def test_a_param_threshold_on_a_plain_number_is_definite(written: Any, expected: bool) -> None:
    assert truth("params.amount", "gt", 1_000_000, {"params": {"amount": written}}) is expected


@pytest.mark.parametrize(
    ("path", "op", "value", "expected"),
    [
        ("params.subject", "eq", "x", False),  # other operators on params stay two-valued
        ("params.absent", "eq", "x", False),
        ("params.absent", "exists", False, True),
        ("params.subject", "len_gt", 100, False),
        ("impact.recipient_count", "gt", 100, False),  # impact is read unknown only where listed
        ("impact.absent", "gt", 1, False),
    ],
)
def test_other_conditions_are_definite(path: str, op: str, value: Any, expected: bool) -> None:
    assert truth(path, op, value) is expected


@given(condition=conditions, doc=documents)
def test_truth_agrees_with_evaluate_wherever_it_is_definite(condition: dict[str, Any], doc: dict[str, Any]) -> None:
    compiled = compile_condition(condition)
    result = compiled.truth(compiled.resolve(doc))
    assert result in (True, False, UNKNOWN)
    if result is not UNKNOWN:
        assert result is compiled.evaluate(doc)[0]
    else:
        assert condition["path"].startswith("params.") and condition["op"] in ("gt", "gte", "lt", "lte")


def test_describe_shows_actual_value() -> None:
    condition = compile_condition({"path": "impact.recipient_count", "op": "gt", "value": 10})
    assert condition.describe(14) == "impact.recipient_count > 10 (was 14)"
    assert condition.describe(MISSING) == "impact.recipient_count > 10 (was missing)"
    assert condition.describe("x" * 200).endswith("…)")
    assert condition.describe(14, redact=True) == f"impact.recipient_count > 10 (was {MASK})"
    assert condition.test_text() == "impact.recipient_count > 10"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, Decimal(3)),
        ("100.50", Decimal("100.50")),
        (0.1, Decimal("0.1")),
        (True, None),
        ("1e5", None),
        ("NaN", None),
        (float("inf"), None),
        ("", None),
        (None, None),
        ([1], None),
    ],
)
def test_to_decimal(value: Any, expected: Decimal | None) -> None:
    assert to_decimal(value) == expected


@pytest.mark.parametrize(
    ("data", "field", "message_part"),
    [
        (
            {"path": "impact.x", "op": "gtx", "value": 1},
            "condition.op",
            "unknown operator 'gtx'; expected one of eq, ne",
        ),
        ({"path": "request.user", "op": "eq", "value": 1}, "condition.path", "must start with one of params."),
        ({"path": "params", "op": "eq", "value": 1}, "condition.path", "whole namespace"),
        ({"path": "params.a-b", "op": "eq", "value": 1}, "condition.path", "invalid segment"),
        ({"path": "params..a", "op": "eq", "value": 1}, "condition.path", "invalid segment"),
        ({"path": "params.-1", "op": "eq", "value": 1}, "condition.path", "invalid segment"),
        ({"path": "impact.amount", "op": "gt", "value": "lots"}, "condition.value", "needs a number"),
        ({"path": "impact.amount", "op": "gt", "value": True}, "condition.value", "needs a number"),
        ({"path": "impact.amount", "op": "gt", "value": 1.5}, "condition.value", "decimal string"),
        ({"path": "params.a", "op": "matches", "value": "("}, "condition.value", "does not compile"),
        ({"path": "params.a", "op": "matches", "value": "a" * 501}, "condition.value", "longer than 500"),
        ({"path": "params.a", "op": "in", "value": "abc"}, "condition.value", "non-empty list"),
        ({"path": "params.a", "op": "in", "value": []}, "condition.value", "non-empty list"),
        ({"path": "params.a", "op": "in", "value": [1, [2]]}, "condition.value[1]", "list items"),
        ({"path": "params.a", "op": "len_gt", "value": -1}, "condition.value", "non-negative integer"),
        ({"path": "params.a", "op": "contains", "value": ["x"]}, "condition.value", "needs a string"),
        ({"path": "params.a", "op": "exists", "value": "yes"}, "condition.value", "true or false"),
        ({"path": "params.a", "op": "eq"}, "condition.value", "required"),
        ({"path": "params.a", "op": "eq", "value": 1, "note": ""}, "condition.note", "unknown key 'note'"),
        ("params.a == 1", "condition", "must be an object"),
    ],
)
def test_bad_condition_refused_with_field(data: Any, field: str, message_part: str) -> None:
    with pytest.raises(RuleValidationError) as caught:
        compile_condition(data)
    assert caught.value.field == field
    assert message_part in caught.value.message
