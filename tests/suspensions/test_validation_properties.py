"""The answer check, for any answer: the server's validator (jsonschema with RE2 in
place of `re`, an evaluation budget, offline refs) accepts exactly what the reference
implementation (jsonschema as shipped) accepts, for schemas both can run; and an
accepted answer is stored and resumed as exactly the same JSON value."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator, Draft202012Validator

from approvals.resume_schema import check_resume_schema, validate_resume_data

from .strategies import SIMPLE, SIMPLE_07, answers, server_accepts


@pytest.mark.parametrize(
    "schema, reference", [(SIMPLE, Draft202012Validator), (SIMPLE_07, Draft7Validator)], ids=["2020-12", "draft-07"]
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=answers)
def test_the_server_accepts_exactly_what_the_reference_validator_accepts(schema, reference, answer):
    check_resume_schema(schema)
    assert server_accepts(schema, answer) == reference(schema).is_valid(answer)


@settings(max_examples=200, deadline=None)
@given(answer=answers)
def test_an_accepted_answer_survives_storage_as_the_same_json(answer):
    # The stored form (approvals.services.suspensions._propose) read back as resume does.
    if server_accepts(SIMPLE, answer):
        stored = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
        assert json.dumps(json.loads(stored)) == json.dumps(answer)


# Schemas an agent could send: keyword-shaped keys with any values, nested.
KEYWORDS = [
    "type",
    "properties",
    "required",
    "items",
    "prefixItems",
    "enum",
    "const",
    "pattern",
    "patternProperties",
    "additionalProperties",
    "$ref",
    "$dynamicRef",
    "$defs",
    "definitions",
    "$id",
    "$anchor",
    "$schema",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "format",
    "minimum",
    "maxLength",
    "uniqueItems",
    "dependentRequired",
    "unevaluatedProperties",
    "contains",
    "a",
    "#",
]
schema_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(
        [
            "object",
            "string",
            "#",
            "#/$defs/a",
            "#a",
            "http://x.test/s",
            "^(a+)+$",
            "(a)\\1",
            "regex",
            "::::",
            "https://json-schema.org/draft/2020-12/schema",
            "http://json-schema.org/draft-07/schema#",
            "a",
        ]
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYWORDS), inner, max_size=4),
    max_leaves=15,
)
schemas = st.builds(
    lambda extra: {"type": "object", **extra}, st.dictionaries(st.sampled_from(KEYWORDS), schema_values, max_size=5)
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, answer=answers)
def test_any_schema_is_accepted_or_refused_with_a_code_and_any_answer_likewise(schema, answer):
    from approvals.errors import DomainError

    try:
        check_resume_schema(schema)
    except DomainError as refused:
        assert refused.code in (
            "invalid_resume_schema",
            "unsupported_schema_draft",
            "schema_ref_refused",
            "schema_pattern_refused",
        )
        return
    try:
        validate_resume_data(schema, answer)
    except DomainError as refused:
        assert refused.code in ("invalid_resume_data", "invalid_resume_schema")


# Well-formed schemas from a grammar: nested objects, arrays and alternatives over
# constrained leaves, patterns included (short answers, so `re` in the reference is quick).
NAMES = ["approved", "amount", "code", "tags", "contact", "name", "x-note"]
leaf = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "number", "integer", "boolean", "null"])},
    optional={
        "minimum": st.integers(-5, 5),
        "maxLength": st.integers(0, 5),
        "minLength": st.integers(0, 2),
        "pattern": st.sampled_from(["^a", "(a+)+$", "[0-9]", "^[a-z]{2,4}-[0-9]+$", "^$"]),
        "enum": st.lists(st.integers(0, 3) | st.text(max_size=2) | st.booleans(), min_size=1, max_size=3),
    },
)
node = st.recursive(
    leaf,
    lambda inner: (
        st.fixed_dictionaries(
            {"type": st.just("object"), "properties": st.dictionaries(st.sampled_from(NAMES), inner, max_size=3)},
            optional={
                "required": st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
                "additionalProperties": st.booleans() | inner,
                "patternProperties": st.dictionaries(st.sampled_from(["^x-", "e$", "(a|b)+"]), inner, max_size=2),
            },
        )
        | st.fixed_dictionaries(
            {"type": st.just("array"), "items": inner},
            optional={"maxItems": st.integers(0, 3), "uniqueItems": st.booleans()},
        )
        | st.fixed_dictionaries({"anyOf": st.lists(inner, min_size=1, max_size=2)})
    ),
    max_leaves=8,
)
well_formed = st.builds(
    lambda body, draft: {**body, "type": "object", **draft},
    node.filter(lambda n: "type" in n),
    st.sampled_from([{}, {"$schema": "http://json-schema.org/draft-07/schema#"}]),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(schema=well_formed, answer=answers)
def test_for_any_well_formed_schema_the_server_agrees_with_the_reference(schema, answer):
    check_resume_schema(schema)  # nothing in the grammar is refused
    reference = Draft7Validator if "$schema" in schema else Draft202012Validator
    assert server_accepts(schema, answer) == reference(schema).is_valid(answer)
