"""Every whole number a risk-admin or a reviewer sets on policy is bounded at the edge: rule fields
(the JSON endpoints and the editor form), notification settings (the service and its form) and
the reviewer's deadline extension. ada types a rule priority of 10**30: it is refused with the
field named (422, or a form error on a plain form page), never a 500 from the database or the
datetime library. The bounds are one table (`approvals.bounds`).
"""

from __future__ import annotations

import json

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from approvals.bounds import BOUNDS, YEAR_SECONDS
from approvals.models import ApprovalRequest, RuleNotification
from approvals.notifications import dispatch
from approvals.people import Person

from .bounds_edges import (
    ANY_NUMBER,
    ANY_TEXT,
    FORTY_DIGITS,
    HOSTILE,
    HYPOTHESIS,
    NOTIFICATION_FIELDS,
    RULE,
    RULE_FIELDS,
    in_bounds,
    post_json,
    refused_at_the_input_edge,
)


@pytest.mark.django_db
@pytest.mark.parametrize("field", RULE_FIELDS)
@pytest.mark.parametrize("value", HOSTILE)
def test_a_rule_field_out_of_bounds_is_422_naming_it_on_every_rule_endpoint(ada, field, value):
    if in_bounds(field, value):
        pytest.skip(f"{value!r} is a fine {field}")  # a priority may be negative
    rule = {**RULE, field: value}
    for name, body in (
        ("rules:validate", {"rule": rule}),
        ("rules:dry-run", {"rule": rule}),
        ("rules:test", {"rule": rule, "sample": {"action_type": "send_email", "params": {}}}),
    ):
        response = post_json(ada, name, body)
        assert response.status_code == 422, (name, response.status_code, response.content[:300])
        assert response.json()["code"] == "invalid_rule"
        assert response.json()["details"]["field"] == field, name
    page = ada.post(reverse("rules:new"), {"rule_json": json.dumps(rule), "note": "bounds"})
    assert page.status_code == 422
    assert page.context["error"].field == field
    assert not ApprovalRequest.objects.exists() and not _saved("bounded_rule")


@pytest.mark.django_db
@pytest.mark.parametrize("field", RULE_FIELDS)
def test_a_rule_field_at_its_bounds_saves_and_one_past_them_does_not(ada, field):
    bound = BOUNDS[field]
    for value, ok in ((bound.high, True), (bound.high + 1, False), (bound.low - 1, False)):
        rule = {**RULE, "name": f"edge_{field}_{'ok' if ok else 'no'}_{value}".replace("-", "m"), field: value}
        response = ada.post(reverse("rules:new"), {"rule_json": json.dumps(rule), "note": "bounds"})
        assert (response.status_code == 302) is ok, (field, value, response.status_code)
        assert _saved(rule["name"]) is ok


def _saved(name: str) -> bool:
    from approvals.models import RiskRule

    return RiskRule.objects.filter(name=name).exists()


@pytest.mark.django_db
@hypothesis_settings(parent=HYPOTHESIS)
@given(field=st.sampled_from(RULE_FIELDS), value=ANY_NUMBER)
def test_any_number_in_a_rule_field_is_accepted_or_refused_naming_it(ada, field, value):
    response = post_json(ada, "rules:validate", {"rule": {**RULE, field: value}})
    if refused_at_the_input_edge(response, value):
        return
    if in_bounds(field, value) and not (field != "priority" and value < 1):
        assert response.status_code == 200, (value, response.content[:300])
    else:
        assert response.status_code == 422, (value, response.status_code)
        assert response.json()["details"]["field"] == field


@pytest.mark.django_db
@pytest.mark.parametrize("number", ["9" * 5000, "NaN", "Infinity", "-Infinity", "1e400"])
def test_a_number_json_cannot_hold_is_refused_not_a_500(ada, number):
    text = '{"rule": {"name": "x", "action_type": "a", "risk_level": "high", "priority": ' + number + "}}"
    response = ada.post(reverse("rules:validate"), data=text, content_type="application/json")
    assert response.status_code in (400, 422), response.status_code
    assert response.json()["code"] in ("malformed_body", "invalid_rule")


@pytest.mark.django_db
def test_the_admin_rule_form_refuses_a_priority_past_its_bound(ada, admin_user):
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    response = ada.post(
        "/admin/approvals/riskrule/add/",
        {
            "name": "admin_rule",
            "priority": str(10**30),
            "enabled": "on",
            "action_type": "send_email",
            "conditions": "[]",
            "match": "all",
            "risk_level": "high",
            "required_approvals": "1",
            "decision_ttl_seconds": "3600",
            "execution_window_seconds": "900",
            "editable_params": "[]",
            "masked_params": "[]",
            "change_note": "bounds",
        },
    )
    assert response.status_code == 200, "the form again, with its errors"
    assert response.context["adminform"].form.errors
    assert not _saved("admin_rule")


@pytest.mark.django_db
@pytest.mark.parametrize("field", NOTIFICATION_FIELDS)
@pytest.mark.parametrize("value", HOSTILE)
def test_save_settings_refuses_a_number_out_of_bounds_naming_the_field(admin_user, field, value):
    if value is None:
        pytest.skip("None is 'not set' for the optional ones")
    with pytest.raises(ValueError, match=f"^{field}: "):
        dispatch.save_settings("send_email_default", actor=Person(admin_user), **{field: value})
    assert not RuleNotification.objects.filter(rule_name="send_email_default").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("field", NOTIFICATION_FIELDS)
@pytest.mark.parametrize("raw", [str(FORTY_DIGITS), "-1", "2.5", "true", "five", "²", "١٢", str(YEAR_SECONDS + 1)])
def test_the_notification_form_refuses_a_number_out_of_bounds_naming_the_field(ada, field, raw):
    response = ada.post(reverse("rules:notifications", args=["send_email_default"]), {field: raw})
    assert response.status_code == 302
    said = [str(message) for message in get_messages(response.wsgi_request)]
    assert any(message.startswith("Notification settings not saved: " + field) for message in said), said
    assert not RuleNotification.objects.filter(rule_name="send_email_default").exists()


@pytest.mark.django_db
@hypothesis_settings(parent=HYPOTHESIS)
@given(field=st.sampled_from(NOTIFICATION_FIELDS), raw=ANY_TEXT)
def test_any_text_in_a_notification_field_is_saved_or_refused_never_a_500(ada, field, raw):
    response = ada.post(reverse("rules:notifications", args=["send_email_default"]), {field: raw})
    if refused_at_the_input_edge(response, raw):
        return
    assert response.status_code == 302
    stored = dispatch.settings_for("send_email_default")
    value = getattr(stored, field) if stored is not None else None
    assert value is None or 0 <= value <= YEAR_SECONDS


@pytest.mark.django_db
@pytest.mark.parametrize("raw", [str(FORTY_DIGITS), "-1", "2.5", "true", "five", "²", "9" * 5000, ""])
def test_a_deadline_extension_out_of_bounds_is_422(client, people, submit, admin_user, raw):
    dispatch.save_settings("send_email_default", actor=Person(admin_user), max_extension_seconds=1800)
    request = submit()
    client.force_login(people["alice"])
    response = client.post(
        reverse("rules:extend-deadline", args=[request.pk]), {"seconds": raw}, HTTP_ACCEPT="application/json"
    )
    assert response.status_code == 422 and response.json()["code"] == "extension_not_allowed"
