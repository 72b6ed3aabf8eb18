"""Deciding from the page: forms with CSRF, answers in words, step-up for critical risk."""

from __future__ import annotations

from django.urls import reverse

from approvals import services
from approvals.models import ApprovalRequest
from approvals.states import State
from tests.fixtures.revisions import current_revision

from .conftest import PASSWORDS

JSON = {"HTTP_ACCEPT": "application/json"}


def csrf_token(client) -> str:
    client.get(reverse("approvals:queue"))
    return client.cookies["csrftoken"].value


def test_every_decision_form_refuses_a_post_without_the_csrf_token(browser_client, people, submit):
    request = submit("send_email")
    browser_client.force_login(people["alice"])
    for name in ("approve", "reject", "approve-with-edits"):
        response = browser_client.post(
            reverse(f"approvals:{name}", args=[request.pk]), {"revision": "1", "feedback": "x"}
        )
        assert response.status_code == 403, name
    assert ApprovalRequest.objects.get().state == State.PENDING_APPROVAL
    token = csrf_token(browser_client)
    response = browser_client.post(
        reverse("approvals:approve", args=[request.pk]), {"revision": "1", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    assert ApprovalRequest.objects.get().state == State.APPROVED


def test_approving_from_the_page_answers_json_for_the_page_script(client, people, submit):
    request = submit("send_email")
    client.force_login(people["alice"])
    response = client.post(reverse("approvals:approve", args=[request.pk]), {"revision": "1"}, **JSON)
    assert response.status_code == 200
    assert response.json() == {"ok": True, "message": "send_email approved.", "state": "approved"}


def test_the_loser_of_a_race_reads_who_won_not_an_error_page(client, people, submit):
    request = submit("send_email")
    services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
    client.force_login(people["bob"])
    response = client.post(reverse("approvals:approve", args=[request.pk]), {"revision": "1"}, **JSON)
    assert response.status_code == 409
    assert response.json()["code"] == "already_decided"
    assert response.json()["message"] == "Already approved by alice."
    page = client.post(reverse("approvals:reject", args=[request.pk]), {"revision": "1"}, follow=True)
    assert page.status_code == 200 and "Already approved by alice." in page.content.decode()


def test_rejecting_with_feedback_stores_it_verbatim_for_the_agent(client, people, submit):
    request = submit("send_email")
    feedback = "Don't send this to Dana <dana@example.com>.\nAsk Rita first & retry tomorrow."
    client.force_login(people["bob"])
    response = client.post(
        reverse("approvals:reject", args=[request.pk]), {"revision": "1", "feedback": feedback}, **JSON
    )
    assert response.status_code == 200 and response.json()["state"] == "rejected"
    request.refresh_from_db()
    assert request.state == State.REJECTED and request.feedback == feedback and request.decided_by_label == "bob"


def test_approve_with_edits_changes_only_editable_params_as_a_new_revision(client, people, submit):
    request = submit("send_email", params={"to": ["dana@example.com"], "subject": "Hi", "body": "secret"})
    client.force_login(people["alice"])
    url = reverse("approvals:approve-with-edits", args=[request.pk])
    response = client.post(
        url,
        {
            "revision": "1",
            "edit:subject": "Hello Dana",
            "edit:to": '["dana@example.com"]',
            "edit:body": "",
            "masked:body": "1",
        },
        **JSON,
    )
    assert response.status_code == 200, response.json()
    request.refresh_from_db()
    assert request.state == State.APPROVED and request.current_revision == 2
    assert request.current_params() == {"to": ["dana@example.com"], "subject": "Hello Dana", "body": "secret"}
    nothing = client.post(url, {"revision": "2", "edit:subject": "Hello Dana"}, **JSON)
    assert nothing.status_code == 409 and nothing.json()["code"] == "already_decided"


def test_edits_that_change_nothing_or_are_not_json_are_refused_in_words(client, people, submit):
    request = submit("send_email", params={"to": ["dana@example.com"], "subject": "Hi", "body": "b"})
    client.force_login(people["alice"])
    url = reverse("approvals:approve-with-edits", args=[request.pk])
    same = client.post(url, {"revision": "1", "edit:subject": "Hi"}, **JSON)
    assert same.status_code == 422 and same.json()["code"] == "no_changes"
    broken = client.post(url, {"revision": "1", "edit:to": "dana@example.com"}, **JSON)
    assert broken.status_code == 422 and broken.json()["code"] == "invalid_edit"
    assert ApprovalRequest.objects.get().current_revision == 1


def test_critical_risk_asks_for_the_password_before_approving(client, people, submit, critical_rule):
    request = submit("run_payroll", params={"amount": 1})
    client.force_login(people["alice"])
    url = reverse("approvals:approve", args=[request.pk])
    for attempt, code in (({}, "step_up_required"), ({"password": "wrong"}, "step_up_failed")):
        response = client.post(url, {"revision": "1", **attempt}, **JSON)
        assert response.status_code == 403 and response.json()["code"] == code
    assert ApprovalRequest.objects.get().state == State.PENDING_APPROVAL
    edits = client.post(
        reverse("approvals:approve-with-edits", args=[request.pk]), {"revision": "1", "edit:amount": "2"}, **JSON
    )
    assert edits.status_code == 403 and edits.json()["code"] == "step_up_required"
    response = client.post(url, {"revision": "1", "password": PASSWORDS["alice"]}, **JSON)
    assert response.status_code == 200 and response.json()["state"] == "approved"


def test_the_critical_card_has_the_password_field(client, people, submit, critical_rule):
    submit("run_payroll", params={"amount": 1})
    client.force_login(people["alice"])
    html = client.get(reverse("approvals:queue")).content.decode()
    assert 'name="password"' in html and "Critical: confirm with your password" in html


def test_people_outside_the_approver_group_get_404_and_nothing_changes(client, people, submit):
    request = submit("send_email")
    client.force_login(people["mallory"])
    assert client.post(reverse("approvals:approve", args=[request.pk]), {"revision": "1"}, **JSON).status_code == 404
    assert ApprovalRequest.objects.get().state == State.PENDING_APPROVAL


def test_separation_of_duties_is_explained_on_the_card_and_enforced(client, people, submit):
    request = submit("send_email")
    client.force_login(people["owen"])
    html = client.get(reverse("approvals:queue")).content.decode()
    assert "You are the agent&#x27;s owner, so you cannot approve." in html
    response = client.post(reverse("approvals:approve", args=[request.pk]), {"revision": "1"}, **JSON)
    assert response.status_code == 403 and response.json()["code"] == "separation_of_duties"


def test_decisions_need_post(client, people, submit):
    request = submit("send_email")
    client.force_login(people["alice"])
    assert client.get(reverse("approvals:approve", args=[request.pk])).status_code == 405
