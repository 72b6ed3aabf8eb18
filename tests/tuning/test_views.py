"""The rule editor's pages and JSON endpoints: risk-admins only, thin over the
services, JSON errors with a stable code, bounded queries."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals.masking import MASK
from approvals.models import PolicyProposal, PolicyVersion, RiskRule
from approvals.notifications import dispatch
from approvals.people import Person
from approvals.states import State
from audit.models import AuditEvent

pytestmark = pytest.mark.django_db

LOW_EMAIL = {
    "name": "send_email_low",
    "priority": 15,
    "action_type": "send_email",
    "risk_level": "low",
    "conditions": [{"path": "impact.recipient_count", "op": "lte", "value": 3}],
}
FEW = {"to": ["dana@example.com"], "subject": "Hi", "body": "Hello"}


def _post_json(client, name, payload):
    return client.post(
        reverse(name), data=json.dumps(payload), content_type="application/json", HTTP_ACCEPT="application/json"
    )


def test_only_risk_admins_may_tune(client, people):
    assert client.get(reverse("rules:list")).status_code == 302  # anonymous: to the login page
    client.force_login(people["alice"])  # a reviewer
    assert client.get(reverse("rules:list")).status_code == 403
    assert client.get(reverse("rules:metrics")).status_code == 403
    response = _post_json(client, "rules:validate", {"rule": LOW_EMAIL})
    assert response.status_code == 403 and response.json()["code"] == "not_permitted"
    assert client.post(reverse("rules:restore", args=[1]), {"note": "x"}).status_code == 403
    assert PolicyVersion.objects.count() == 1


def test_the_list_shows_rules_in_order(admin_client, django_assert_max_num_queries):
    with django_assert_max_num_queries(12):
        response = admin_client.get(reverse("rules:list"))
    assert response.status_code == 200
    body = response.content.decode()
    assert body.index("delete_database_prohibited") < body.index("send_email_default") < body.index("get_low")


def test_validate_names_the_field_and_says_what_is_wrong(admin_client):
    response = _post_json(
        admin_client,
        "rules:validate",
        {"rule": {**LOW_EMAIL, "conditions": [{"path": "impact.recipient_count", "op": "gt", "value": "many"}]}},
    )
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_rule"
    assert response.json()["details"]["field"] == "conditions[0].value"
    assert "needs a number" in response.json()["message"]
    assert _post_json(admin_client, "rules:validate", {"rule": LOW_EMAIL}).json()["ok"] is True
    bad = admin_client.post(reverse("rules:validate"), data=b"{nope", content_type="application/json")
    assert bad.status_code == 400 and bad.json()["code"] == "malformed_body"  # the API's code for the same thing


def test_dry_run_endpoint_reports_in_words(admin_client, submit, email_is_not_destructive):
    for _ in range(3):
        submit("send_email", FEW)
    report = _post_json(admin_client, "rules:dry-run", {"rule": LOW_EMAIL}).json()
    assert report["ok"] and report["level_changes"] == 3
    assert report["transitions"][0]["sentence"] == (
        "3 requests would go from medium to low: approval needed today, auto-executed"
    )
    refused = _post_json(admin_client, "rules:dry-run", {"rule": LOW_EMAIL, "limit": 0})
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_limit"
    refused = _post_json(admin_client, "rules:dry-run", {"rule": {**LOW_EMAIL, "risk_level": "meh"}})
    assert refused.status_code == 422 and refused.json()["details"]["field"] == "risk_level"


def test_each_dry_run_row_links_to_the_request_it_would_affect(
    admin_client, risk_admin, reviewers_group, submit, email_is_not_destructive
):
    risk_admin.groups.add(reviewers_group)  # ada reviews too: she may open these requests
    submitted = {str(submit("send_email", FEW).pk) for _ in range(2)}
    report = _post_json(admin_client, "rules:dry-run", {"rule": LOW_EMAIL}).json()
    assert {change["url"] for change in report["changes"]} == {f"/requests/{pk}/" for pk in submitted}


def test_the_proposal_pages_dry_run_rows_link_to_the_requests(
    admin_client, risk_admin, reviewers_group, submit, email_is_not_destructive, settings
):
    risk_admin.groups.add(reviewers_group)  # ada reviews too: she may open the request
    settings.POLICY_FOUR_EYES = True
    request = submit("send_email", FEW)
    admin_client.post(reverse("rules:new"), {"rule_json": json.dumps(LOW_EMAIL), "note": "Loosen"})
    proposal = PolicyProposal.objects.latest("created_at")
    page = admin_client.get(reverse("rules:proposal", args=[proposal.pk])).content.decode()
    assert f'<a href="/requests/{request.pk}/" title="Open the request">' in page


def test_test_endpoint_classifies_a_stored_request(admin_client, submit, email_is_not_destructive):
    request = submit("send_email", FEW)
    result = _post_json(admin_client, "rules:test", {"rule": LOW_EMAIL, "request_id": str(request.pk)}).json()
    assert result["matched_rule"] == "send_email_low" and result["rule_matches"]
    assert result["conditions"][0]["held"] is True
    assert result["sample"]["params"]["body"] == MASK  # masked for the admin too
    missing = _post_json(admin_client, "rules:test", {"request_id": "not-a-uuid"})
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


def test_saving_needs_a_note_and_makes_one_version(admin_client):
    url = reverse("rules:new")
    response = admin_client.post(url, {"rule_json": json.dumps(LOW_EMAIL), "note": ""})
    assert response.status_code == 422
    assert "a change note is required" in response.content.decode()
    assert not RiskRule.objects.filter(name="send_email_low").exists()

    response = admin_client.post(url, {"rule_json": json.dumps(LOW_EMAIL), "note": "Small mail runs itself"})
    assert response.status_code == 302
    assert PolicyVersion.objects.latest().note == "Small mail runs itself"
    assert RiskRule.objects.get(name="send_email_low").risk_level == "low"


def test_a_broken_rule_is_refused_with_a_clear_message(admin_client):
    broken = {**LOW_EMAIL, "conditions": [{"path": "email.to", "op": "eq", "value": 1}]}
    response = admin_client.post(reverse("rules:new"), {"rule_json": json.dumps(broken), "note": "x"})
    assert response.status_code == 422
    assert "conditions[0].path" in response.content.decode()
    assert "must start with one of" in response.content.decode()
    assert PolicyVersion.objects.count() == 1


def test_edit_page_and_renaming_refused(admin_client):
    assert admin_client.get(reverse("rules:edit", args=["send_email_default"])).status_code == 200
    assert admin_client.get(reverse("rules:edit", args=["ghost"])).status_code == 404
    renamed = {**LOW_EMAIL, "name": "other"}
    response = admin_client.post(
        reverse("rules:edit", args=["send_email_default"]), {"rule_json": json.dumps(renamed), "note": "x"}
    )
    assert response.status_code == 422


def test_reorder_and_toggle_through_the_pages(admin_client):
    names = list(RiskRule.objects.order_by("priority").values_list("name", flat=True))
    response = admin_client.post(reverse("rules:reorder"), {"order": ",".join(reversed(names)), "note": "Flip"})
    assert response.status_code == 302
    assert list(RiskRule.objects.order_by("priority").values_list("name", flat=True)) == list(reversed(names))
    admin_client.post(reverse("rules:toggle", args=["read_low"]), {"enabled": "0", "note": "Look at reads"})
    assert not RiskRule.objects.get(name="read_low").enabled
    assert PolicyVersion.objects.count() == 3


def test_history_version_and_restore(admin_client, risk_admin, django_assert_max_num_queries):
    admin_client.post(reverse("rules:new"), {"rule_json": json.dumps(LOW_EMAIL), "note": "Loosen"})
    with django_assert_max_num_queries(12):
        page = admin_client.get(reverse("rules:history"))
    assert "added rule send_email_low" in page.content.decode()
    detail = admin_client.get(reverse("rules:version", args=[1])).content.decode()
    # Restoring v1 would remove the rule added since: side by side, every field of it struck out.
    restore = detail[detail.index('id="restore-changes"') :]
    assert '<span class="change-kind change-removed">removed</span> rule <code>send_email_low</code>' in restore
    assert "{&#x27;" not in detail and "[{" not in detail  # never a Python or JSON repr
    response = admin_client.post(reverse("rules:restore", args=[1]), {"note": "Too loose"})
    assert response.status_code == 302
    assert not RiskRule.objects.filter(name="send_email_low").exists()
    assert AuditEvent.objects.filter(verb="policy.changed").order_by("-seq").first().metadata["restored_from"] == 1


def test_metrics_page_and_csv_in_bounded_queries(admin_client, make_requests, django_assert_max_num_queries):
    now = timezone.now()
    make_requests(
        [("send_email", FEW)] * 1000,
        start=now - timedelta(days=2),
        rule_name="send_email_default",
        risk_level="medium",
        decide_by=now,
        decided_by_label=lambda i: "alice" if i % 2 else "",
        decided_at=lambda i: now - timedelta(days=1),
        state=State.APPROVED,
    )
    with django_assert_max_num_queries(20):
        response = admin_client.get(reverse("rules:metrics"))
    body = response.content.decode()
    assert response.status_code == 200 and "<svg" in body and "send_email_default" in body
    csv_response = admin_client.get(reverse("rules:metrics-csv", args=["rule"]))
    assert csv_response["Content-Type"].startswith("text/csv")
    assert b"send_email_default,1000," in csv_response.content
    assert admin_client.get(reverse("rules:metrics-csv", args=["nope"])).status_code == 404
    assert admin_client.get(reverse("rules:metrics-csv", args=["rule"]), {"from": "x"}).status_code == 400


def test_pages_carry_no_inline_script(admin_client):
    for name in ("rules:list", "rules:new", "rules:history", "rules:metrics"):
        body = admin_client.get(reverse(name)).content.decode()
        assert "<script>" not in body and " style=" not in body, name


def test_notification_settings_form(admin_client):
    response = admin_client.post(
        reverse("rules:notifications", args=["send_email_default"]),
        {"notify_on_arrival": "1", "remind_before_seconds": "600", "max_extension_seconds": "1800"},
    )
    assert response.status_code == 302
    saved = dispatch.settings_for("send_email_default")
    assert (saved.notify_on_arrival, saved.remind_before_seconds, saved.max_extension_seconds) == (True, 600, 1800)


def test_a_reviewer_extends_a_deadline_through_the_endpoint(client, people, submit, risk_admin):
    dispatch.save_settings("send_email_default", actor=Person(risk_admin), max_extension_seconds=1800)
    request = submit("send_email", FEW)
    client.force_login(people["alice"])
    url = reverse("rules:extend-deadline", args=[request.pk])
    response = client.post(url, {"seconds": "900"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 200 and response.json()["ok"]
    again = client.post(url, {"seconds": "900"}, HTTP_ACCEPT="application/json")
    assert again.status_code == 409 and again.json()["code"] == "already_extended"


def test_a_risk_admin_gets_links_only_to_requests_they_may_open(
    ben, people, submit, email_is_not_destructive, settings, django_assert_max_num_queries
):
    """ben is a risk-admin but no reviewer of support's email: the request page would
    answer him 404, so the dry-run shows him each row's details with no link. The guard
    on the request page stays as it is."""
    from django.test import Client

    settings.POLICY_FOUR_EYES = True
    hidden = submit("send_email", FEW)
    client = Client()
    client.force_login(ben)
    assert client.get(f"/requests/{hidden.pk}/").status_code == 404  # unchanged: not his to view

    report = _post_json(client, "rules:dry-run", {"rule": LOW_EMAIL}).json()
    assert [(c["request_id"], c["url"], c["to_level"]) for c in report["changes"]] == [(str(hidden.pk), None, "low")]

    client.post(reverse("rules:new"), {"rule_json": json.dumps(LOW_EMAIL), "note": "Loosen"})
    proposal = PolicyProposal.objects.latest("created_at")
    page = client.get(reverse("rules:proposal", args=[proposal.pk])).content.decode()
    assert f"/requests/{hidden.pk}/" not in page and "Open the request" not in page
    assert "send_email" in page  # the row's details are there

    people["alice"].groups.add(*ben.groups.all())  # a reviewer who is also a risk-admin sees links
    alice = Client()
    alice.force_login(people["alice"])
    more = [submit("send_email", FEW) for _ in range(5)]
    with django_assert_max_num_queries(40):
        report = _post_json(alice, "rules:dry-run", {"rule": LOW_EMAIL}).json()
    assert {c["url"] for c in report["changes"]} == {f"/requests/{r.pk}/" for r in [hidden, *more]}
