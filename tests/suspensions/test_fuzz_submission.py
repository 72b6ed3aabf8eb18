"""Schemathesis over `POST /api/v1/suspensions/` as published: whatever an agent sends,
the answer is a documented 201 or 4xx with a registered code, never a 5xx. Runs in
process (WSGI) inside the test's transaction, like tests/hostile/test_cross_agent.py."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import checks as sc

from agents.services import issue_token
from controlplane.http import codes

from ..hostile.test_cross_agent import in_process_app
from .conftest import APPROVAL_SCHEMA

__all__ = ["in_process_app"]

pytestmark = pytest.mark.django_db


def test_any_submission_is_answered_as_documented(agent, in_process_app):  # noqa: F811 - the fixture above
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", in_process_app)
    operation = schema["/api/v1/suspensions/"]["POST"]
    auth = {"Authorization": f"Bearer {issue_token(agent).secret}"}
    registered = {code.code for code in codes.all_codes()}
    statuses = []

    @given(case=operation.as_strategy(), data=st.data())
    @settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    def check(case, data) -> None:
        # The published schema says only "JSON" for the payload and schema: make them objects
        # (the schema often an object's) in half the cases, to get past those checks.
        if isinstance(case.body, dict) and data.draw(st.booleans()):
            case.body["suspend_payload"] = data.draw(st.dictionaries(st.text(max_size=5), st.integers() | st.text()))
            case.body["resume_schema"] = data.draw(
                st.sampled_from(
                    [
                        APPROVAL_SCHEMA,
                        {"type": "object"},
                        {"type": "object", "properties": {"a": {"pattern": "^(a+)+$"}}},
                        {**APPROVAL_SCHEMA, "$schema": "http://json-schema.org/draft-07/schema#"},
                        {"type": "string"},
                    ]
                )
            )
            case.body.setdefault("action_type", "approval-flow.approval")
        response = case.call(headers=auth)
        statuses.append(response.status_code)
        case.validate_response(response, checks=[sc.not_a_server_error, sc.response_schema_conformance])
        if response.status_code >= 400:
            assert response.json()["code"] in registered

    check()
    assert 201 in statuses and any(400 <= status < 500 for status in statuses)
