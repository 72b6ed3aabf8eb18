"""Hostile resume schemas are refused at submission (the hostile-schema list): patterns RE2
cannot run, refs outside the schema, loops and fan-out, whatever keyword hides them; and any
schema with any answer is answered with a code, never an exception.

Nothing here measures time: each test asserts what was refused and with which field, or
counts operations.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals import resume_schema
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.resume_schema import engine as schema_engine
from approvals.resume_schema import graph as schema_graph

from ..suspensions.conftest import (
    agent_api_settings,
    api,
    fresh_counters,
    pending,
    reviewer_client,
    suspend,
)

__all__ = ["agent_api_settings", "api", "fresh_counters", "pending", "reviewer_client", "suspend"]


BACKREFERENCE = {"type": "string", "pattern": r"(a)\1"}
NOT_A_STRING = {"type": "string", "pattern": 12}
HIDDEN = "#/x-hidden"


def _behind(keyword: str) -> dict:
    """A property whose `keyword` reaches the hidden schema only through a $ref."""
    ref = {"$ref": HIDDEN}
    shapes = {
        "items": {"type": "array", "items": ref},
        "prefixItems": {"type": "array", "prefixItems": [ref]},
        "additionalProperties": {"type": "object", "additionalProperties": ref},
        "dependentSchemas": {"type": "object", "dependentSchemas": {"a": ref}},
        "if": {"if": ref},
        "then": {"if": {"type": "string"}, "then": ref},
        "else": {"if": {"type": "string"}, "else": ref},
        "not": {"not": ref},
        "contains": {"type": "array", "contains": ref},
        "propertyNames": {"type": "object", "propertyNames": ref},
        "unevaluatedProperties": {"type": "object", "unevaluatedProperties": ref},
    }
    return shapes[keyword]


KEYWORDS = [
    "items",
    "prefixItems",
    "additionalProperties",
    "dependentSchemas",
    "if",
    "then",
    "else",
    "not",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
]


def _refused(response, code: str) -> dict:
    body = response.json()
    assert (response.status_code, body["code"]) == (422, code), body
    assert not ApprovalRequest.objects.exists()
    return body


class TestHostileSchemasAreRefusedAtSubmission:
    @pytest.mark.parametrize("keyword", KEYWORDS)
    def test_a_backreference_behind_a_ref_inside_any_keyword_is_422(self, suspend, keyword):
        schema = {"type": "object", "properties": {"a": _behind(keyword)}, "x-hidden": BACKREFERENCE}
        body = _refused(suspend(resume_schema=schema), "schema_pattern_refused")
        assert body["details"]["path"] == "#/x-hidden/pattern"

    @pytest.mark.parametrize("keyword", KEYWORDS)
    def test_a_non_string_pattern_behind_a_ref_inside_any_keyword_is_422(self, suspend, keyword):
        schema = {"type": "object", "properties": {"a": _behind(keyword)}, "x-hidden": NOT_A_STRING}
        _refused(suspend(resume_schema=schema), "invalid_resume_schema")

    @pytest.mark.parametrize(
        "hidden",
        [
            {"patternProperties": {r"(?=x)": {}}},
            {"properties": {"deeper": {"anyOf": [{"$ref": "#/x-more"}]}}},
            {"not": {"not": {"pattern": r"(a)\1"}}},
        ],
        ids=["patternProperties", "a second ref", "nested"],
    )
    def test_whatever_a_ref_reaches_is_checked_too(self, suspend, hidden):
        schema = {
            "type": "object",
            "properties": {"a": {"$ref": HIDDEN}},
            "x-hidden": hidden,
            "x-more": {"pattern": r"(?<=a)b"},
        }
        assert suspend(resume_schema=schema).json()["code"] in ("schema_pattern_refused",)
        assert not ApprovalRequest.objects.exists()

    def test_a_ref_into_enum_data_is_read_as_the_schema_it_becomes(self, suspend):
        schema = {
            "type": "object",
            "properties": {"a": {"$ref": "#/properties/b/enum/0"}, "b": {"enum": [{"pattern": r"(a)\1"}]}},
        }
        _refused(suspend(resume_schema=schema), "schema_pattern_refused")

    def test_a_ref_to_something_not_a_schema_is_422(self, suspend):
        schema = {"type": "object", "properties": {"a": {"$ref": "#/properties/b/enum"}, "b": {"enum": [1, 2]}}}
        _refused(suspend(resume_schema=schema), "invalid_resume_schema")

    def test_a_loop_an_empty_answer_never_reaches_is_refused(self, suspend):
        schema = {
            "type": "object",
            "$defs": {"a": {"properties": {"x": {"$ref": "#/$defs/b"}}}, "b": {"items": {"$ref": "#/$defs/a"}}},
            "properties": {"tree": {"$ref": "#/$defs/a"}},
        }
        body = _refused(suspend(resume_schema=schema), "invalid_resume_schema")
        assert "loop" in body["message"]

    def test_a_fan_out_of_2_to_the_30_under_a_property_is_refused(self, suspend):
        defs = {f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]} for i in range(30)}
        defs["a30"] = {"type": "string"}
        schema = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/a0"}}}
        body = _refused(suspend(resume_schema=schema), "invalid_resume_schema")
        assert str(resume_schema.MAX_SCHEMA_NODES) in body["message"]

    def test_refs_chained_deeper_than_the_limit_are_refused(self, suspend):
        depth = resume_schema.MAX_REF_DEPTH + 1
        defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(depth)}
        defs[f"d{depth}"] = {"type": "string"}
        schema = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}}
        body = _refused(suspend(resume_schema=schema), "invalid_resume_schema")
        assert str(resume_schema.MAX_REF_DEPTH) in body["message"]

    def test_a_nested_id_that_would_move_where_refs_point_is_refused(self, suspend):
        schema = {"type": "object", "properties": {"a": {"$id": "https://x.test/a", "$ref": "#/y"}}}
        _refused(suspend(resume_schema=schema), "invalid_resume_schema")

    def test_the_schema_graph_walk_is_linear_in_the_schema(self, monkeypatch):
        # Every node checked once, however many refs point at it: count the checks.
        calls = []
        original = schema_graph._check_patterns
        monkeypatch.setattr(
            schema_graph, "_check_patterns", lambda node, path: (calls.append(path), original(node, path))
        )
        shared = {"type": "string", "pattern": "^[a-z]+$"}
        schema = {
            "type": "object",
            "$defs": {"s": shared},
            "properties": {f"p{i}": {"$ref": "#/$defs/s"} for i in range(200)},
        }
        resume_schema.check_resume_schema(schema)
        assert len(calls) == 1 + 200 + 1  # the top, each property's ref, $defs/s once: nothing twice

    def test_each_part_of_the_schema_meets_the_metaschema_once(self, monkeypatch):
        # The top's check covers its tree; a target outside it is checked with what it holds, once.
        checked = []
        validator_class = schema_engine._VALIDATORS[resume_schema.DRAFT_2020_12]
        original = validator_class.check_schema.__func__
        monkeypatch.setattr(
            validator_class,
            "check_schema",
            classmethod(lambda cls, schema, **kw: (checked.append(schema), original(cls, schema, **kw))),
        )
        inner = {"type": "string"}
        hidden = {"type": "object", "properties": {"b": inner}}
        schema = {
            "type": "object",
            "$defs": {"s": {"type": "string"}},
            "x-hidden": {"a": hidden},
            "properties": {
                **{f"p{i}": {"$ref": "#/$defs/s"} for i in range(50)},
                **{f"q{i}": {"$ref": "#/x-hidden/a/properties/b"} for i in range(50)},
                "r": {"$ref": "#/x-hidden/a"},
            },
        }
        resume_schema.check_resume_schema(schema)
        assert [id(part) for part in checked] == [id(hidden), id(schema)]


SCHEMA_KEYWORDS = [
    "type",
    "properties",
    "items",
    "prefixItems",
    "additionalProperties",
    "dependentSchemas",
    "if",
    "then",
    "else",
    "not",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "patternProperties",
    "pattern",
    "enum",
    "anyOf",
    "$defs",
    "$ref",
    "$id",
    "uniqueItems",
    "x",
    "format",
]
POINTERS = [
    "#",
    "#/x",
    "#/x/0",
    "#/x/x",
    "#/properties/x",
    "#/properties/x/enum/0",
    "#/$defs/x",
    "#/$defs/x/items",
    "#/anyOf/0",
    "#/not",
    "#/enum",
    "#/x/pattern",
]
hostile_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | st.sampled_from(
        ["string", "object", "array", r"(a)\1", "^(a+)+$", "(?=a)", "regex", *POINTERS, "https://x.test/s"]
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(SCHEMA_KEYWORDS), inner, max_size=4),
    max_leaves=20,
)
hostile_schemas = st.builds(
    lambda extra: {"type": "object", **extra},
    st.dictionaries(st.sampled_from(SCHEMA_KEYWORDS), hostile_values, max_size=6),
)
small_answers = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["a", "aaa!", "x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["x", "a", "b"]), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=500, deadline=None)
@given(schema=hostile_schemas, answer=st.dictionaries(st.sampled_from(["x", "a", "b"]), small_answers, max_size=3))
def test_a_hostile_schema_and_any_answer_are_answered_with_a_code_never_an_exception(schema, answer):
    try:
        resume_schema.check_resume_schema(schema)
    except DomainError as refused:
        assert refused.code in {
            "invalid_resume_schema",
            "unsupported_schema_draft",
            "schema_ref_refused",
            "schema_pattern_refused",
        }
        return
    try:
        resume_schema.validate_resume_data(schema, answer)
    except DomainError as refused:
        assert refused.code in {"invalid_resume_data", "invalid_resume_schema"}
