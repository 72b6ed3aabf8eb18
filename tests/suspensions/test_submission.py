"""`POST /api/v1/suspensions/`: a workflow step paused for a typed answer (seed 002's
approval step). The resume schema is hostile input: only drafts 2020-12 and 07, an
object at the top, local `$ref`s, RE2 patterns, bounded size; rules route it by its
suspend payload."""

from __future__ import annotations

import json

import pytest

from approvals.models import ApprovalRequest
from approvals.states import Kind, State

from .conftest import APPROVAL_SCHEMA, APPROVAL_STEP

pytestmark = pytest.mark.django_db


def refused(response, code: str) -> dict:
    body = response.json()
    assert (response.status_code, body["code"]) == (422, code), body
    assert body["message"]
    return body


class TestSubmitting:
    def test_the_seeds_approval_step_is_queued_with_its_payload_as_params(self, suspend):
        response = suspend()
        assert response.status_code == 201, response.json()
        body = response.json()
        assert body["kind"] == "suspension"
        assert body["action_type"] == "approval-flow.approval"
        assert body["params"] == APPROVAL_STEP["suspend_payload"]
        assert body["suspension"] == {
            "workflow_id": "approval-flow",
            "step_id": "approval",
            "title": "Approve the payment",
            "summary": APPROVAL_STEP["summary"],
            "resume_schema": APPROVAL_SCHEMA,
            "answer": None,
        }
        assert body["state"] == "pending_approval"
        assert body["resume"]["decided"] is False and body["resume"]["resume_data"] is None

    def test_a_low_risk_suspension_still_waits_for_a_person_because_only_a_person_can_answer(self, suspend, admin_user):
        from .conftest import rule

        rule(admin_user, name="approvals_low", priority=1, action_type="approval-flow.*", risk_level="low")
        body = suspend().json()
        assert (body["state"], body["risk_level"]) == ("pending_approval", "low")

    def test_an_explicit_action_type_wins(self, suspend):
        assert suspend(action_type="payments.approve").json()["action_type"] == "payments.approve"

    def test_without_an_action_type_or_the_ids_to_make_one_it_is_refused_naming_the_field(self, suspend):
        body = refused(suspend(workflow_id="", step_id="approval"), "validation_error")
        assert "action_type" in str(body)

    def test_the_payload_must_be_an_object(self, suspend):
        assert suspend(suspend_payload=[1, 2]).status_code == 422

    def test_a_payload_over_the_size_limit_is_refused(self, suspend, settings):
        settings.API_MAX_PARAMS_BYTES = 100
        assert suspend(suspend_payload={"blob": "x" * 200}).status_code == 422
        assert not ApprovalRequest.objects.exists()


class TestIdempotency:
    def test_the_same_key_and_body_replays_the_first_request(self, suspend):
        first = suspend(headers={"Idempotency-Key": "step-1"})
        again = suspend(headers={"Idempotency-Key": "step-1"})
        assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
        assert again.json()["id"] == first.json()["id"]
        assert ApprovalRequest.objects.filter(kind=Kind.SUSPENSION).count() == 1

    def test_the_same_key_with_another_payload_is_refused(self, suspend):
        suspend(headers={"Idempotency-Key": "step-1"})
        other = suspend(headers={"Idempotency-Key": "step-1"}, suspend_payload={"amount": 1, "reason": "x"})
        refused(other, "idempotency_key_reused")


class TestTheResumeSchema:
    def test_draft_2020_12_is_the_default(self, suspend):
        schema = {k: v for k, v in APPROVAL_SCHEMA.items() if k != "$schema"}
        assert suspend(resume_schema=schema).status_code == 201

    def test_draft_07_as_mastras_tool_approval_chunk_carries_it(self, suspend):
        schema = {**APPROVAL_SCHEMA, "$schema": "http://json-schema.org/draft-07/schema#"}
        assert suspend(resume_schema=schema).status_code == 201

    @pytest.mark.parametrize(
        "draft", ["http://json-schema.org/draft-04/schema#", "https://json-schema.org/draft/2019-09/schema", "", 7]
    )
    def test_other_drafts_are_refused_not_guessed(self, suspend, draft):
        refused(suspend(resume_schema={**APPROVAL_SCHEMA, "$schema": draft}), "unsupported_schema_draft")

    def test_the_answer_must_be_an_object(self, suspend):
        refused(suspend(resume_schema={"type": "boolean"}), "invalid_resume_schema")
        refused(suspend(resume_schema={"properties": {}}), "invalid_resume_schema")

    def test_a_schema_that_is_no_json_schema_is_refused_naming_where(self, suspend):
        body = refused(
            suspend(resume_schema={"type": "object", "properties": {"a": {"type": "strin"}}}), "invalid_resume_schema"
        )
        assert body["details"]["path"] == "#/properties/a/type"

    @pytest.mark.parametrize(
        "ref",
        [
            "https://attacker.example/schema.json",
            "http://127.0.0.1:9/x",
            "file:///etc/passwd",
            "other.json#/a",
            "urn:x:y",
        ],
    )
    def test_a_ref_outside_the_schema_is_refused_and_nothing_is_fetched(self, suspend, ref):
        schema = {"type": "object", "properties": {"a": {"$ref": ref}}}
        refused(suspend(resume_schema=schema), "schema_ref_refused")

    def test_local_refs_are_fine_and_a_dangling_one_is_refused(self, suspend):
        defs = {"$defs": {"yes": {"type": "boolean"}}}
        assert (
            suspend(
                resume_schema={"type": "object", **defs, "properties": {"approved": {"$ref": "#/$defs/yes"}}}
            ).status_code
            == 201
        )
        refused(
            suspend(resume_schema={"type": "object", "properties": {"a": {"$ref": "#/$defs/no"}}}),
            "invalid_resume_schema",
        )

    def test_a_ref_loop_is_refused(self, suspend):
        refused(suspend(resume_schema={"type": "object", "$ref": "#"}), "invalid_resume_schema")

    def test_refs_that_fan_out_exponentially_exhaust_the_budget_and_are_refused(self, suspend):
        defs = {f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]} for i in range(30)}
        defs["a30"] = {"required": ["never"]}
        refused(suspend(resume_schema={"type": "object", "$defs": defs, "$ref": "#/$defs/a0"}), "invalid_resume_schema")

    def test_too_deep_or_too_large_is_refused(self, suspend):
        deep: dict = {"type": "object"}
        for _ in range(20):  # 41 levels: under the API's body limit (64), over the schema's (32)
            deep = {"type": "object", "properties": {"a": deep}}
        refused(suspend(resume_schema=deep), "invalid_resume_schema")
        large = {
            "type": "object",
            "properties": {f"p{i}": {"type": "string", "description": "x" * 100} for i in range(400)},
        }
        refused(suspend(resume_schema=large), "invalid_resume_schema")

    @pytest.mark.parametrize("pattern", [r"(a)\1", r"^(?=a)a$", r"(?<!x)y", r"(?P<n>a)(?P=n)"])
    def test_a_pattern_re2_cannot_run_is_refused(self, suspend, pattern):
        schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}}
        body = refused(suspend(resume_schema=schema), "schema_pattern_refused")
        assert body["details"]["path"] == "#/properties/code/pattern"

    def test_re2_syntax_python_lacks_is_accepted_and_matched(self, suspend, reviewer_client):
        schema = {"type": "object", "properties": {"word": {"type": "string", "pattern": r"^\p{Greek}+$"}}}
        assert suspend(resume_schema=schema).status_code == 201

    def test_a_dangling_dynamic_ref_is_refused(self, suspend):
        schema = {"type": "object", "properties": {"a": {"$dynamicRef": "#meta"}}}
        refused(suspend(resume_schema=schema), "invalid_resume_schema")

    def test_a_pattern_property_re2_cannot_run_is_refused(self, suspend):
        schema = {"type": "object", "patternProperties": {r"(x)\1": {"type": "string"}}}
        refused(suspend(resume_schema=schema), "schema_pattern_refused")

    def test_a_pattern_inside_data_is_data_not_a_keyword(self, suspend):
        schema = {
            "type": "object",
            "properties": {"pattern": {"type": "string", "enum": ["(a)\\1"]}},
            "default": {"pattern": "(a)\\1"},
        }
        assert suspend(resume_schema=schema).status_code == 201


class TestRules:
    def test_params_amount_over_100_routes_the_seeds_step(self, suspend, big_amounts):
        high = suspend().json()
        assert (high["risk_level"], high["rule"]["name"]) == ("high", "big_amounts")
        small = suspend(suspend_payload={"amount": 99.5, "reason": "small"}).json()
        assert small["rule"]["name"] != "big_amounts"

    def test_a_payload_missing_the_amount_does_not_fall_through_to_a_weaker_rule(self, suspend, big_amounts):
        # Fail-closed classification: an unknown condition never makes a request less scrutinized.
        body = suspend(suspend_payload={"reason": "no amount"}).json()
        assert body["state"] == "pending_approval"
        assert body["risk_level"] in ("medium", "high", "critical")


def test_the_openapi_schema_documents_the_endpoint_with_every_error_code(client):
    schema = client.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/suspensions/"]["post"]
    documented = str(operation["responses"])
    for code in (
        "invalid_resume_schema",
        "unsupported_schema_draft",
        "schema_ref_refused",
        "schema_pattern_refused",
        "idempotency_key_reused",
    ):
        assert code in documented, code
    decide = str(schema["paths"]["/api/v1/requests/{id}/decisions/"]["post"]["responses"])
    for code in ("invalid_resume_data", "resume_data_required", "not_a_suspension"):
        assert code in decide, code
    assert State.PENDING_APPROVAL


@pytest.mark.parametrize(
    "path, body",
    [
        ("/api/v1/suspensions/", {**APPROVAL_STEP, "action_type": "approval-flow.approval"}),
        ("/api/v1/actions/", {"action_type": "send_email", "params": {}}),
    ],
)
def test_escaped_nul_in_json_sent_as_a_form_field_is_refused_not_stored(api, path, body):
    # The parser refuses a NUL in a JSON body; in multipart, DRF parses the field's JSON
    # text itself, so the escape arrives as a real NUL that PostgreSQL cannot store.
    field = "suspend_payload" if "suspend_payload" in body else "params"
    form = {key: json.dumps(value) if isinstance(value, dict) else value for key, value in body.items()}
    form[field] = '{"a\\u0000": "x\\ud800"}'
    response = api.post(path, form, format="multipart")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_input")
    assert not ApprovalRequest.objects.exists()
