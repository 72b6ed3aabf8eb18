"""Arbitrary JSON as a rule or a condition: the engine refuses it with
RuleValidationError (naming a field) or accepts it, and never raises anything else
(a TypeError or RecursionError here would be a 500 in the rule editor)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.policy.rules import RuleSpec, RuleValidationError, compile_condition
from approvals.policy.rules.conditions import OPERATORS
from approvals.policy.rules.engine import RULE_KEYS

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.sampled_from(["", "*", "params.a", "impact.recipients", "^(a+)+$", "[", "1e999", "NaN"]),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
# Mostly the real keys and operators, so generation gets past the first refusal.
condition_like = st.fixed_dictionaries(
    {},
    optional={
        "path": json_values | st.sampled_from(["params.amount", "target.0", "declared.x", "params..a"]),
        "op": json_values | st.sampled_from(sorted(OPERATORS)),
        "value": json_values,
        "extra": json_values,
    },
)
rule_like = (
    st.fixed_dictionaries({}, optional={key: json_values | st.lists(condition_like, max_size=3) for key in RULE_KEYS})
    | json_values
)


def _refused_cleanly(build, data: Any) -> None:
    try:
        build(data)
    except RuleValidationError as exc:
        assert exc.args and str(exc)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=rule_like)
def test_any_json_as_a_rule_is_accepted_or_refused_with_a_rule_validation_error(data: Any) -> None:
    _refused_cleanly(RuleSpec.from_dict, data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=condition_like | json_values)
def test_any_json_as_a_condition_is_accepted_or_refused_with_a_rule_validation_error(data: Any) -> None:
    _refused_cleanly(compile_condition, data)


def test_an_unhashable_operator_is_refused_not_crashed() -> None:
    """Found by the fuzzing above: `"op": []` used to raise TypeError (a 500 in the editor)."""
    for op in ([], {}, ["eq"]):
        try:
            compile_condition({"path": "params.a", "op": op, "value": 1})
        except RuleValidationError as exc:
            assert exc.field == "condition.op"
        else:
            raise AssertionError(f"{op!r} was accepted as an operator")
