"""The condition builder's paths: suggested for the rule's action type, and a warning
(never a refusal) for a path nothing provides, so `impact.recipents` cannot pass for
`impact.recipient_count` unnoticed. See approvals/policy/tuning/paths.py for what is
known in each namespace."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from approvals.policy.tuning.paths import IMPACT_KEYS, catalogue_for, path_warnings

pytestmark = pytest.mark.django_db

EMAIL_EXECUTOR = {"send_email": ("to", "cc", "bcc", "subject", "body", "from")}
REFUND = {"amount": "12.50", "order_id": "A-17", "reason": "damaged"}


def answer(client, rule: dict[str, Any]):
    return client.post(
        reverse("rules:paths"),
        data=json.dumps({"rule": rule}),
        content_type="application/json",
        HTTP_ACCEPT="application/json",
    )


def condition(path: str, op: str = "gt", value: Any = 1) -> dict[str, Any]:
    return {"path": path, "op": op, "value": value}


def warned(rule_glob: str, *paths: str, executor_params=EMAIL_EXECUTOR) -> list[str]:
    catalogue = catalogue_for(rule_glob, executor_params=executor_params)
    return [w["field"] for w in path_warnings([condition(p) for p in paths], catalogue)]


# --- What is known ----------------------------------------------------------------------------


def test_an_email_rule_is_offered_the_impact_facts_and_the_params_its_executor_reads():
    paths = catalogue_for("send_email", executor_params=EMAIL_EXECUTOR).paths
    assert [p for p in paths if p.startswith("impact.")] == [f"impact.{key}" for key in IMPACT_KEYS]
    assert {"params.to", "params.subject", "params.body"} <= set(paths)
    assert "target.labels" in paths


def test_params_and_target_keys_seen_on_recent_requests_are_offered_for_the_glob(make_requests):
    make_requests([("refund_order", REFUND), ("refund_fee", {"fee_id": "F-1"}), ("read_file", {"path": "/x"})])
    catalogue = catalogue_for("refund_*", executor_params={})
    assert catalogue.action_types == ("refund_fee", "refund_order")
    assert {"params.amount", "params.order_id", "params.fee_id", "target.mailbox"} <= set(catalogue.paths)
    assert "params.path" not in catalogue.paths  # read_file's, which the glob does not match


def test_an_invalid_glob_matches_nothing_rather_than_failing():
    catalogue = catalogue_for("send email!", executor_params=EMAIL_EXECUTOR)
    assert catalogue.action_types == () and not catalogue.params_known


# --- What is flagged ----------------------------------------------------------------------------


def test_a_misspelt_impact_fact_is_flagged_with_the_fact_it_probably_meant():
    catalogue = catalogue_for("send_email", executor_params=EMAIL_EXECUTOR)
    (warning,) = path_warnings([condition("impact.recipents")], catalogue)
    assert warning["field"] == "conditions[0].path"
    assert "never holds" in warning["message"] and "did you mean impact.recipient_count?" in warning["message"]


def test_known_paths_are_not_flagged():
    assert warned("send_email", "impact.recipient_count", "params.to", "target.labels", "declared.purpose") == []


def test_a_param_the_action_type_never_carries_is_flagged_by_index():
    assert warned("send_email", "params.to", "params.ammount") == ["conditions[1].path"]


def test_a_param_of_an_action_type_nothing_is_known_about_is_flagged_as_unchecked():
    catalogue = catalogue_for("launch_rocket", executor_params=EMAIL_EXECUTOR)
    (warning,) = path_warnings([condition("params.countdown")], catalogue)
    assert "cannot be checked" in warning["message"]


def test_an_unseen_target_key_is_flagged(make_requests):
    make_requests([("refund_order", REFUND)])
    assert warned("refund_order", "target.mailbox", "target.mailbxo") == ["conditions[1].path"]


@hypothesis_settings(max_examples=150, deadline=None)
@given(
    conditions=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.sampled_from(["path", "op", "value", "x"]), inner, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_warnings_never_raise_on_whatever_a_builder_sends(conditions):
    catalogue = catalogue_for("send_email", executor_params=EMAIL_EXECUTOR, requests=[])
    assert isinstance(path_warnings(conditions, catalogue), list)


# --- The endpoint and the editor page -------------------------------------------------------------


def test_the_endpoint_answers_suggestions_and_warnings_but_saving_is_not_refused(admin_client):
    rule = {
        "name": "wide_mail",
        "priority": 7,
        "action_type": "send_email",
        "risk_level": "high",
        "conditions": [condition("impact.recipents", "gt", 10)],
    }
    body = answer(admin_client, rule).json()
    assert body["ok"] is True and "impact.recipient_count" in body["paths"] and "params.to" in body["paths"]
    assert [w["field"] for w in body["warnings"]] == ["conditions[0].path"]
    saved = admin_client.post(reverse("rules:new"), {"rule_json": json.dumps(rule), "note": "typo kept on purpose"})
    assert saved.status_code == 302  # a warning, not a block


@pytest.mark.parametrize("payload", [{"rule": "send_email"}, {"rule": None}, {}])
def test_the_endpoint_refuses_a_missing_rule_with_a_coded_error(admin_client, payload):
    response = admin_client.post(reverse("rules:paths"), data=json.dumps(payload), content_type="application/json")
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_rule" and response.json()["message"]


def test_the_endpoint_is_for_risk_admins_only(client, people):
    client.force_login(people["alice"])
    response = answer(client, {"action_type": "send_email", "conditions": []})
    assert response.status_code == 403 and response.json()["code"] == "not_permitted"


def test_the_editor_page_lists_the_paths_for_autocompletion(admin_client):
    page = admin_client.get(reverse("rules:edit", args=["send_email_default"])).content.decode()
    datalist = page[page.index('<datalist id="path-suggestions">') : page.index("</datalist>")]
    assert '<option value="impact.recipient_count">' in datalist and '<option value="params.subject">' in datalist
    assert 'id="path-warnings"' in page


def test_the_endpoint_reads_recent_requests_in_bounded_queries(
    admin_client, make_requests, django_assert_max_num_queries
):
    make_requests([("refund_order", REFUND)] * 300)
    with django_assert_max_num_queries(6):  # session, user, permission (2), the requests
        body = answer(admin_client, {"action_type": "refund_*", "conditions": [condition("params.amount")]}).json()
    assert body["warnings"] == []


def test_keys_an_agent_sends_are_suggested_only_when_a_path_can_name_them_and_never_by_the_thousand(make_requests):
    odd = {"to": ["a@x.io"], "a.b": 1, "<img src=x>": 2, "two words": 3, **{f"k{i:04d}": i for i in range(500)}}
    make_requests([("send_bulk", odd)])
    catalogue = catalogue_for("send_bulk", executor_params={})
    suggested = [path for path in catalogue.paths if path.startswith("params.")]
    assert len(suggested) == 200 and not any(("<" in p or " " in p or p.count(".") > 1) for p in suggested)
    warnings = path_warnings([condition("params.k0499"), condition("params.to")], catalogue)
    assert warnings == []  # beyond the suggestion cap, still known


def test_the_endpoint_needs_the_csrf_token_like_every_post(risk_admin):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(risk_admin)
    assert answer(client, {"action_type": "send_email", "conditions": []}).status_code == 403
