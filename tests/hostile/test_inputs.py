"""Values nothing can store are refused once, at the edge, naming the field: NUL and
lone surrogates anywhere (API bodies, page forms, query strings, JSON typed into a
form) and JSON nested past 64 levels. Each of these used to answer 500."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from approvals.models import ApprovalRequest
from controlplane.http.inputs import MAX_JSON_DEPTH, first_problem
from tests.api.conftest import (
    api,  # noqa: F401 (a fixture: mail-bot's client)
)


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"n": value}
    return value


def refused(response, field: str) -> dict:
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body["code"] == "invalid_input" and body["details"]["field"] == field, body
    return body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"action_type": "x", "params": {"a": "\ud800"}}, "params.a"),
        ({"action_type": "x", "target": {"to": ["ok", "\udfff"]}}, "target.to[1]"),
        ({"action_type": "x", "params": {"a": "b\x00"}}, "params.a"),
        ({"action_type": "x", "params": {"a\x00": 1}}, "params.<key>"),
        ({"action_type": "x\x00"}, "action_type"),
    ],
)
def test_api_bodies_with_unstorable_text_name_the_field(api, body, field):
    # json.dumps escapes a lone surrogate as \ud800, as a hostile client would send it.
    refused(api.post("/api/v1/actions/", json.dumps(body), content_type="application/json"), field)
    assert not ApprovalRequest.objects.exists()


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 500, 950])
def test_api_bodies_nested_too_deeply_are_refused(api, depth):
    body = api.post("/api/v1/actions/", {"action_type": "x", "params": nested(depth)}, format="json")
    assert body.status_code == 400 and body.json()["code"] in ("invalid_input", "malformed_body")
    assert not ApprovalRequest.objects.exists()


def test_params_at_the_depth_limit_are_accepted(api):
    response = api.post(
        "/api/v1/actions/", {"action_type": "read_notes", "params": nested(MAX_JSON_DEPTH - 2)}, format="json"
    )
    assert response.status_code == 201, response.content[:300]


@pytest.mark.parametrize(
    ("url", "field"),
    [("/", "action_type"), ("/history/", "agent"), ("/audit/", "actor"), ("/rules/", "q")],
)
def test_a_nul_in_a_page_query_string_is_a_400_naming_it(client, people, admin_user, url, field):
    admin_user.groups.add(*people["alice"].groups.all())
    client.force_login(admin_user)
    response = client.get(url, {field: "x\x00"})
    assert response.status_code == 400
    assert field in response.content.decode()


def test_a_nul_in_an_api_query_string_is_a_json_400(api):
    refused(api.get("/api/v1/requests/", {"run_id": "r\x00"}), "run_id")


def test_a_nul_in_a_form_field_is_refused_before_the_decision(client, people, submit):
    pending = submit("send_email")
    client.force_login(people["alice"])
    response = client.post(f"/requests/{pending.pk}/reject/", {"feedback": "no\x00"})
    assert response.status_code == 400 and "feedback" in response.content.decode()
    pending.refresh_from_db()
    assert pending.state == "pending_approval"


def test_a_lone_surrogate_in_an_edited_value_is_refused_as_an_edit(client, people, submit):
    pending = submit("send_email")
    client.force_login(people["alice"])
    response = client.post(
        f"/requests/{pending.pk}/approve-with-edits/",
        {"edit:to": '["\\ud800"]', "feedback": "fixed"},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code in (400, 422), response.content[:300]
    assert "lone surrogate" in response.content.decode()
    pending.refresh_from_db()
    assert pending.state == "pending_approval"


def test_the_rule_editor_refuses_a_lone_surrogate_naming_the_field(client, admin_user):
    client.force_login(admin_user)
    rule_json = '{"name": "r1", "priority": 5, "action_type": "pay_*", "risk_level": "high", "note_x": "\\ud800"}'
    response = client.post("/rules/new/", {"rule_json": rule_json, "note": "n"})
    assert response.status_code == 422
    assert "lone surrogate" in response.content.decode()
    assert client.get("/rules/").status_code == 200


def test_a_page_json_endpoint_refuses_deep_nesting(client, admin_user):
    client.force_login(admin_user)
    response = client.post("/rules/validate.json", json.dumps({"rule": nested(200)}), content_type="application/json")
    refused(response, "rule" + ".n" * (MAX_JSON_DEPTH))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=30,
)


def _storable(value, depth=0) -> bool:
    if depth > MAX_JSON_DEPTH:
        return False
    if isinstance(value, str):
        return "\x00" not in value and all(not 0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return all(_storable(k, depth) and _storable(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_storable(v, depth + 1) for v in value)
    return True


@given(json_values)
def test_first_problem_finds_exactly_the_unstorable_values(value):
    assert (first_problem(value) is None) == _storable(value)


@pytest.mark.parametrize("next_url", ["0", "queue", "//evil.example/x", "https://evil.example/", "javascript:x"])
def test_a_decision_form_never_redirects_off_site_or_to_a_url_name(client, people, submit, next_url):
    """Found by test_pages_fuzz: `next=0` reached `redirect()`, which read it as a URL name (500)."""
    pending = submit("send_email")
    client.force_login(people["alice"])
    response = client.post(f"/requests/{pending.pk}/reject/", {"feedback": "no", "next": next_url, "revision": "1"})
    assert response.status_code == 302 and response["Location"] == "/"


@pytest.mark.parametrize("constant", ["Infinity", "-Infinity", "NaN"])
def test_non_finite_numbers_typed_into_an_edit_are_refused_as_invalid_json(client, people, submit, constant):
    """Found by test_pages_fuzz: `Infinity` parsed to a float no JSON column stores (500)."""
    pending = submit("send_email")
    client.force_login(people["alice"])
    response = client.post(
        f"/requests/{pending.pk}/approve-with-edits/",
        {"edit:to": f"[{constant}]", "revision": "1"},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code in (400, 422) and response.json()["code"] == "invalid_edit"
    pending.refresh_from_db()
    assert pending.state == "pending_approval"
