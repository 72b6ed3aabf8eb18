"""Slack approvals through the real slack-sdk against a fake Slack Web API on loopback:
signed payloads only, linked people only, every guard in the one decision core."""

from __future__ import annotations

import hashlib
import json
import time
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.utils import timezone

from approvals.chat import posting, slack, tasks
from approvals.models import Decision, Notification, SlackLink, SlackLinkStart
from approvals.notifications import dispatch
from approvals.services import Person, approve
from approvals.states import State
from audit.models import AuditEvent
from controlplane.celery import app as celery_app
from tests.chat.conftest import TEAM, signed

pytestmark = pytest.mark.django_db


def answers(fake_slack) -> list[str]:
    return [args["text"] for name, args in fake_slack.calls if name == "respond"]


class TestSignature:
    def test_an_unsigned_or_wrongly_signed_press_is_refused_and_nothing_is_queued(self, submit, press, fake_slack):
        request = submit()
        refused = press(request, secret="not-the-secret-" + "y" * 20)
        assert refused.status_code == 401
        assert refused.json()["code"] == "slack_signature_invalid"
        assert fake_slack.calls == []
        assert Decision.objects.filter(request=request).count() == 0

    def test_a_replay_older_than_five_minutes_is_refused(self, submit, press, slack_links):
        request = submit()
        refused = press(request, timestamp=int(time.time()) - 301)
        assert refused.status_code == 401
        assert refused.json()["code"] == "slack_signature_invalid"
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL

    def test_a_press_is_acknowledged_without_touching_the_database(
        self, submit, client, fake_slack, slack_links, django_assert_num_queries
    ):
        request = submit()
        payload = {"type": "block_actions", "user": {"id": "U_ALICE", "team_id": TEAM}, "actions": []}
        body = urlencode({"payload": json.dumps(payload)}).encode()
        started = time.monotonic()
        try:
            with django_assert_num_queries(0):  # queued on the real broker (Redis), decided on the worker
                answer = client.generic(
                    "POST",
                    "/slack/interactivity/",
                    body,
                    content_type="application/x-www-form-urlencoded",
                    **signed(body),
                )
        finally:
            celery_app.control.purge()
        assert answer.status_code == 200 and time.monotonic() - started < 3
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL

    def test_a_body_over_the_bound_is_refused_before_verification(self, client, fake_slack):
        body = b"payload=" + b"a" * (slack.MAX_BODY + 1)
        answer = client.generic(
            "POST", "/slack/interactivity/", body, content_type="application/x-www-form-urlencoded", **signed(body)
        )
        assert answer.status_code == 413
        assert answer.json()["code"] == "slack_payload_too_large"


class TestDecidingFromSlack:
    def test_a_linked_reviewer_approves_with_the_revision_the_button_carried(
        self, submit, press, slack_links, fake_slack, django_capture_on_commit_callbacks
    ):
        request = submit()
        posting.post_request(request, "U_ALICE")
        with django_capture_on_commit_callbacks(execute=True):
            assert press(request).status_code == 200
        request.refresh_from_db()
        assert request.state == State.APPROVED
        decision = Decision.objects.get(request=request)
        assert decision.reviewer.username == "alice"
        assert decision.revision == request.current_revision
        assert answers(fake_slack) == ["send_email approved."]
        (update,) = fake_slack.called("chat.update")
        assert "approved by alice" in str(update["blocks"])
        assert "Approve" not in str(update["blocks"])

    def test_the_owner_of_the_agent_is_refused_by_separation_of_duties(self, submit, press, slack_links, fake_slack):
        request = submit()
        press(request, slack_user="U_OWEN")
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL
        assert Decision.objects.filter(request=request).count() == 0
        assert len(answers(fake_slack)) == 1 and answers(fake_slack)[0]

    def test_an_unlinked_slack_user_is_asked_to_link(self, submit, press, slack_links, fake_slack):
        request = submit()
        press(request, slack_user="U_STRANGER")
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL
        assert answers(fake_slack) == ["Link your account first: run /approvals-link and confirm it in the browser."]

    def test_a_linked_user_without_permission_decides_nothing(self, submit, press, slack_links, fake_slack):
        request = submit()
        press(request, slack_user="U_MALLORY")
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL
        assert Decision.objects.filter(request=request).count() == 0

    def test_a_second_press_after_a_decision_changes_nothing(self, submit, press, people, slack_links, fake_slack):
        request = submit()
        approve(request.pk, actor=Person(people["bob"]), revision=request.current_revision)
        press(request)
        assert list(Decision.objects.filter(request=request).values_list("reviewer__username", flat=True)) == ["bob"]
        assert "bob" in answers(fake_slack)[0]

    def test_a_forged_response_url_is_never_called(self, submit, client, slack_links, fake_slack, eager_celery):
        request = submit()
        payload = {
            "type": "block_actions",
            "user": {"id": "U_ALICE", "team_id": TEAM},
            "response_url": "http://127.0.0.1:9/steal",
            "actions": [{"action_id": "approve", "value": f"{request.pk}:{request.current_revision}"}],
        }
        body = urlencode({"payload": json.dumps(payload)}).encode()
        client.generic(
            "POST", "/slack/interactivity/", body, content_type="application/x-www-form-urlencoded", **signed(body)
        )
        request.refresh_from_db()
        assert request.state == State.APPROVED  # the decision stands; only the answer is not sent
        assert answers(fake_slack) == []

    def test_a_deactivated_or_unlinked_person_decides_nothing(self, submit, press, people, slack_links, fake_slack):
        request = submit()
        people["alice"].is_active = False
        people["alice"].save(update_fields=["is_active"])
        press(request)
        SlackLink.objects.create(user=people["carol"], team_id=TEAM, slack_user_id="U_CAROL").delete()
        press(request, slack_user="U_CAROL")
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL
        assert answers(fake_slack) == [tasks.LINK_YOUR_ACCOUNT] * 2

    def test_a_user_of_another_workspace_is_refused_even_with_a_linked_id(self, submit, press, slack_links, fake_slack):
        request = submit()
        press(request, team="T0OTHER")
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL

    def test_a_stale_revision_is_refused(self, submit, press, slack_links, fake_slack):
        request = submit()
        press(request, revision=request.current_revision + 1)
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL
        assert answers(fake_slack) == ["This request changed since this message was sent: reopen it."]

    def test_a_critical_request_is_approved_only_in_the_browser(
        self, submit, critical_rule, press, slack_links, fake_slack
    ):
        request = submit("run_payroll", params={"amount": 1})
        posting.post_request(request, "U_ALICE")
        (posted,) = fake_slack.called("chat.postMessage")
        (actions,) = [block for block in posted["blocks"] if block["type"] == "actions"]
        buttons = {button["text"]["text"]: button for button in actions["elements"]}
        assert buttons["Approve in the browser"]["url"].endswith(f"/requests/{request.pk}/")
        assert "value" not in buttons["Approve in the browser"] and "Approve" not in buttons
        press(request)  # a forged press of the Approve the message never had
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL
        assert answers(fake_slack)[0].startswith("This request needs a step-up: decide it in the browser")

    def test_a_decision_in_the_browser_updates_the_slack_message(
        self, submit, people, fake_slack, eager_celery, django_capture_on_commit_callbacks
    ):
        request = submit()
        posting.post_request(request, "U_ALICE")
        with django_capture_on_commit_callbacks(execute=True):
            approve(request.pk, actor=Person(people["bob"]), revision=request.current_revision)
        (update,) = fake_slack.called("chat.update")
        assert "approved by bob" in str(update["blocks"])


class TestNotifications:
    def test_arrival_sends_each_linked_reviewer_one_dm_through_the_outbox(
        self, submit, admin_user, slack_links, fake_slack
    ):
        dispatch.save_settings("send_email_default", actor=Person(admin_user), notify_on_arrival=True)
        request = submit()
        dispatch.queue_arrival(request.pk)
        notification = Notification.objects.get(request=request, channel="slack")
        assert dispatch.deliver(notification.pk) == "delivered"
        # alice and owen are linked reviewers; mallory is linked but no reviewer
        assert sorted(args["channel"] for args in fake_slack.called("chat.postMessage")) == ["U_ALICE", "U_OWEN"]
        assert posting.notify_group(request, request.approver_group.name) == 0  # a retry posts nothing twice


class TestLinking:
    def test_a_link_started_in_slack_is_confirmed_by_the_signed_in_person(self, client, fake_slack, people, login_as):
        body = f"command=/approvals-link&team_id={TEAM}&user_id=U_BOB".encode()
        started = client.generic(
            "POST", "/slack/commands/link/", body, content_type="application/x-www-form-urlencoded", **signed(body)
        )
        url = started.json()["text"].split()[1]
        path = url.split("localhost:8000", 1)[-1] if "localhost" in url else "/" + url.split("/", 3)[3]
        login_as(people["bob"])
        shown = client.get(path)
        assert f'data-slack="team">{TEAM}<' in shown.content.decode()
        assert 'data-slack="user">U_BOB<' in shown.content.decode()
        assert client.post(path).url == "/slack/links/"
        assert SlackLink.objects.get(slack_user_id="U_BOB").user == people["bob"]
        assert client.post(path).status_code == 404  # one time
        assert SlackLinkStart.objects.get().used_at is not None
        assert client.post("/slack/unlink/").json() == {"unlinked": 1}
        assert not SlackLink.objects.filter(user=people["bob"]).exists()
        events = AuditEvent.objects.filter(verb__startswith="auth.chat_").order_by("seq")
        assert [(event.verb, event.actor_label) for event in events] == [
            ("auth.chat_linked", "bob"),
            ("auth.chat_unlinked", "bob"),
        ]
        assert events[0].metadata == {"enterprise_id": "", "team_id": TEAM, "slack_user_id": "U_BOB"}


def test_the_confirm_page_shows_a_hostile_identity_as_text(client, people, login_as):
    token = "hostile-identity-token"
    SlackLinkStart.objects.create(
        token_sha256=hashlib.sha256(token.encode()).hexdigest(),
        team_id=TEAM,
        slack_user_id='<img src=x onerror="1">',
        expires_at=timezone.now() + timedelta(minutes=10),
    )
    login_as(people["bob"])
    shown = client.get(f"/slack/link/{token}/").content.decode()
    assert "<img" not in shown
    assert 'data-slack="user">&lt;img src=x onerror=&quot;1&quot;&gt;<' in shown
