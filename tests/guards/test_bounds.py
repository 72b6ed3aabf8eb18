"""Every whole number an admin, a reviewer or an agent sets is bounded at the edge.

ada (a risk-admin) types a rule priority of 10**30; an agent asks for a page of
10**40 requests; a proxy rewrites a decision's revision to `true`. Each is refused
with the field named (422, or a form error on a plain form page), never a 500 from
the database or the datetime library. The bounds are one table (`approvals.bounds`);
the numbers at each edge are the same five shapes: 40 digits, a negative, a float, a
bool and a string, and a hypothesis run over arbitrary numbers, floats, bools and
text for each endpoint.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from approvals.bounds import BOUNDS, YEAR_SECONDS
from approvals.models import ApprovalRequest, RuleNotification
from approvals.notifications import dispatch
from approvals.people import Person
from approvals.permissions import RISK_ADMINS

FORTY_DIGITS = 10**40 - 1
HOSTILE = [
    pytest.param(FORTY_DIGITS, id="40-digits"),
    pytest.param(-(10**39), id="huge-negative"),
    pytest.param(-1, id="negative"),
    pytest.param(2.5, id="float"),
    pytest.param(3.0, id="whole-float"),
    pytest.param(True, id="bool"),
    pytest.param("5", id="string"),
    pytest.param(None, id="null"),
]
RULE_FIELDS = ["priority", "required_approvals", "decision_ttl_seconds", "execution_window_seconds"]
NOTIFICATION_FIELDS = ["remind_before_seconds", "escalate_after_seconds", "max_extension_seconds"]
RULE = {
    "name": "bounded_rule",
    "priority": 50,
    "action_type": "send_email",
    "risk_level": "high",
    "required_approvals": 1,
    "approver_group": "reviewers",
    "decision_ttl_seconds": 3600,
    "execution_window_seconds": 900,
    "editable_params": [],
    "masked_params": [],
    "conditions": [],
}
# Anything a JSON body or a form can carry where a number is expected.
ANY_NUMBER = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**45), max_value=10**45),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=50),
)  # NaN and Infinity are not JSON: test_a_number_json_cannot_hold_is_refused_not_a_500
ANY_TEXT = st.one_of(
    st.integers(min_value=-(10**45), max_value=10**45).map(str),
    st.text(max_size=50),
    st.sampled_from(["²", "١٢", "1e400", "nan", "-0", "0x10", " 5 ", "5.0", "true", "9" * 5000]),
)
HYPOTHESIS = hypothesis_settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@pytest.fixture
def ada(admin_user) -> Client:
    """ada, a risk-admin, signed in."""
    from django.contrib.auth.models import Group

    admin_user.groups.add(Group.objects.get(name=RISK_ADMINS))
    client = Client()
    client.force_login(admin_user)
    return client


def post_json(client: Client, name: str, body: dict, *args) -> object:
    return client.post(reverse(name, args=args), data=json.dumps(body), content_type="application/json")


def in_bounds(field: str, value: object) -> bool:
    return BOUNDS[field].problem(value) is None


def refused_at_the_input_edge(response, raw: object) -> bool:
    """A NUL or a lone surrogate: every field's 400 (controlplane.http.inputs), before any number is read."""
    if response.status_code != 400 or not isinstance(raw, str):
        return False
    assert "\x00" in raw or any(0xD800 <= ord(char) <= 0xDFFF for char in raw), (raw, response.content[:200])
    return True


# --- Rule fields: the JSON endpoints and the editor form ------------------------------------------


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


# --- Notification settings: save_settings and its form ---------------------------------------------


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


# --- The reviewer's deadline extension ---------------------------------------------------------------


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


# --- The reviewer API: revisions, page sizes ------------------------------------------------------


def session_api(user) -> APIClient:
    from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    secret = _get_new_csrf_string()
    client.cookies["csrftoken"] = secret
    client.credentials(HTTP_X_CSRFTOKEN=_mask_cipher_secret(secret))
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("value", HOSTILE + [pytest.param(0, id="zero"), pytest.param(2**31, id="past-int32")])
def test_a_decisions_revision_out_of_bounds_is_422_naming_it(people, submit, value):
    request = submit()
    alice = session_api(people["alice"])
    response = alice.post(
        f"/api/v1/requests/{request.pk}/decisions/",
        {"decision": "reject", "revision": value, "feedback": "no"},
        format="json",
    )
    if value is None:
        assert response.status_code == 422  # null is not a revision either
    else:
        assert response.status_code == 422, (value, response.status_code, response.content[:300])
        assert "revision" in response.json()["details"]["fields"]
    batch = alice.post(
        "/api/v1/decisions/",
        {"decision": "reject", "feedback": "no", "requests": [{"id": str(request.pk), "revision": value}]},
        format="json",
    )
    assert batch.status_code == 422
    request.refresh_from_db()
    assert request.state == "pending_approval", "nothing was decided"


@pytest.mark.django_db
@hypothesis_settings(parent=HYPOTHESIS)
@given(value=ANY_NUMBER)
def test_any_revision_through_the_api_is_decided_on_or_refused_never_a_500(people, submit, value):
    request = submit()
    response = session_api(people["alice"]).post(
        f"/api/v1/requests/{request.pk}/decisions/", {"decision": "reject", "revision": value}, format="json"
    )
    assert response.status_code in (200, 409, 422), (value, response.status_code)
    if response.status_code == 422:
        assert response.json()["code"] == "validation_error"


@pytest.mark.django_db
@pytest.mark.parametrize("raw", [str(FORTY_DIGITS), "-1", "0", "2.5", "true", "five", "²", "201"])
def test_a_page_size_out_of_bounds_is_422_naming_it(api_client_for_agent, raw):
    response = api_client_for_agent.get("/api/v1/requests/", {"page_size": raw})
    assert response.status_code == 422
    assert response.json()["code"] == "validation_error"
    assert "page_size" in response.json()["details"]["fields"]


@pytest.mark.django_db
def test_a_page_size_within_bounds_is_used(api_client_for_agent, submit):
    for _ in range(3):
        submit()
    assert len(api_client_for_agent.get("/api/v1/requests/", {"page_size": "2"}).json()["results"]) == 2
    assert api_client_for_agent.get("/api/v1/requests/", {"page_size": "200"}).status_code == 200


@pytest.fixture
def api_client_for_agent(token) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.mark.django_db
@hypothesis_settings(parent=HYPOTHESIS)
@given(raw=ANY_TEXT)
def test_any_page_size_is_used_or_refused_never_a_500(api_client_for_agent, raw):
    response = api_client_for_agent.get("/api/v1/requests/", {"page_size": raw})
    assert refused_at_the_input_edge(response, raw) or response.status_code in (200, 422), (raw, response.status_code)


# --- The agent's long-poll: ?wait= -----------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("raw", ["-1", "true", "five", "nan", "-inf"])
def test_a_wait_that_is_not_a_number_of_seconds_is_422(api_client_for_agent, submit, raw):
    request = submit()
    response = api_client_for_agent.get(f"/api/v1/requests/{request.pk}/resume/", {"wait": raw})
    assert response.status_code == 422 and "wait" in response.json()["details"]["fields"]


@pytest.mark.django_db
@pytest.mark.parametrize("raw", [str(FORTY_DIGITS), "1e400", "inf", "2.5"])
def test_a_longer_wait_than_the_server_keeps_is_capped_as_documented(api_client_for_agent, submit, people, raw):
    """The long-poll may answer earlier than asked (API_MAX_WAIT_SECONDS, documented): a huge
    wait is capped, not a 500; a decided request answers at once however long the wait."""
    from approvals import services

    request = submit()
    services.reject(request.pk, actor=Person(people["alice"]), feedback="no", revision=1)
    response = api_client_for_agent.get(f"/api/v1/requests/{request.pk}/resume/", {"wait": raw})
    assert response.status_code == 200 and response.json()["state"] == "rejected"


# --- The dashboard's own forms and pages ----------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("raw", [str(FORTY_DIGITS), "-1", "2.5", "true", "²", "١٢", "9" * 5000])
def test_a_dashboard_decision_with_a_hostile_revision_decides_nothing_and_is_no_500(client, people, submit, raw):
    request = submit()
    client.force_login(people["alice"])
    response = client.post(
        reverse("approvals:reject", args=[request.pk]),
        {"revision": raw, "feedback": "no"},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 422, response.content[:300]
    batch = client.post(
        reverse("approvals:decide-batch"),
        {"decision": "reject", "request": f"{request.pk}:{raw}"},
        HTTP_ACCEPT="application/json",
    )
    assert batch.status_code == 422
    request.refresh_from_db()
    assert request.state == "pending_approval"


@pytest.mark.django_db
@pytest.mark.parametrize("raw", [str(FORTY_DIGITS), "²", "-1", "9" * 5000])
def test_the_audit_pages_cursor_with_a_hostile_seq_is_no_500(client, people, raw):
    from django.contrib.auth.models import Group

    people["alice"].groups.add(Group.objects.get_or_create(name="auditors")[0])
    client.force_login(people["alice"])
    for key in ("before", "after"):
        assert client.get("/audit/", {key: raw}).status_code == 200


# --- The dashboard's decision forms are held to the API's sizes -------------------------------------


@pytest.mark.django_db
def test_dashboard_feedback_longer_than_the_api_allows_is_refused(client, people, submit):
    request = submit()
    client.force_login(people["alice"])
    too_long = "x" * 10_001
    for name in ("approvals:reject", "approvals:approve"):
        response = client.post(
            reverse(name, args=[request.pk]),
            {"revision": str(request.current_revision), "feedback": too_long},
            HTTP_ACCEPT="application/json",
        )
        assert response.status_code == 422 and response.json()["details"]["fields"] == ["feedback"]
    batch = client.post(
        reverse("approvals:decide-batch"),
        {"decision": "reject", "request": f"{request.pk}:{request.current_revision}", "feedback": too_long},
        HTTP_ACCEPT="application/json",
    )
    assert batch.status_code == 422 and batch.json()["details"]["fields"] == ["feedback"]
    api = session_api(people["alice"]).post(
        f"/api/v1/requests/{request.pk}/decisions/",
        {"decision": "reject", "revision": request.current_revision, "feedback": too_long},
        format="json",
    )
    assert api.status_code == 422, "the same limit as the API's"
    request.refresh_from_db()
    assert request.state == "pending_approval"
    assert (
        client.post(
            reverse("approvals:reject", args=[request.pk]),
            {"revision": str(request.current_revision), "feedback": "x" * 10_000},
            HTTP_ACCEPT="application/json",
        ).status_code
        == 200
    ), "exactly the limit is fine"


@pytest.mark.django_db
def test_dashboard_edits_larger_than_the_api_allows_are_refused(client, people, submit, admin_user, settings):
    from approvals import policy

    policy.save_rule(
        {**RULE, "name": "editable_mail", "priority": 1, "editable_params": ["body"], "risk_level": "medium"},
        actor=Person(admin_user),
        note="edit bodies",
    )
    request = submit()
    assert request.rule_name == "editable_mail"
    client.force_login(people["alice"])
    response = client.post(
        reverse("approvals:approve-with-edits", args=[request.pk]),
        {"edit:body": "y" * (settings.API_MAX_PARAMS_BYTES + 1), "revision": "1"},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 422 and response.json()["details"]["fields"] == ["edits"]
    request.refresh_from_db()
    assert request.current_revision == 1


@pytest.mark.django_db
def test_a_form_encoded_decision_still_takes_its_revision_as_digits(people, submit):
    """A JSON body's revision must be a JSON integer; a form's fields are text, so ASCII digits count."""
    request = submit()
    alice = session_api(people["alice"])
    url = f"/api/v1/requests/{request.pk}/decisions/"
    assert alice.post(url, {"decision": "reject", "revision": "²"}, format="multipart").status_code == 422
    assert alice.post(url, {"decision": "reject", "revision": "1.0"}, format="multipart").status_code == 422
    decided = alice.post(url, {"decision": "reject", "revision": str(request.current_revision)}, format="multipart")
    assert decided.status_code == 200, decided.content[:300]
