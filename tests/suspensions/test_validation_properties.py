"""The answer check, for any answer: the server's validator (jsonschema with RE2 in
place of `re`, an evaluation budget, offline refs) accepts exactly what the reference
implementation (jsonschema as shipped) accepts, for schemas both can run; and an
accepted answer is stored and resumed as exactly the same JSON value."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from jsonschema import Draft7Validator, Draft202012Validator

from approvals.resume_schema import check_resume_schema

from .strategies import SIMPLE, SIMPLE_07, answers, server_accepts


@pytest.mark.parametrize("schema, reference", [(SIMPLE, Draft202012Validator), (SIMPLE_07, Draft7Validator)],
                         ids=["2020-12", "draft-07"])
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
