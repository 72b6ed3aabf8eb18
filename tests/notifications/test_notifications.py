"""Notifications: email the approver group when a card arrives (real SMTP), remind
before decide_by, escalate after a set time undecided, extend decide_by once, and a
signed, allow-listed, retried webhook. Masked params never leave the building."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta

import pytest
from django.utils import timezone
from freezegun import freeze_time

from approvals import services
from approvals.errors import DomainError
from approvals.masking import MASK
from approvals.models import ApprovalRequest, DeliveryAttempt, Notification
from approvals.notifications import channels, dispatch, tasks
from approvals.permissions import can_decide
from audit.models import AuditEvent
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db

SECRET_MAIL = {"to": ["dana@example.com"], "subject": "Quarterly numbers", "body": "the password is hunter2"}
T0 = "2026-03-02 09:00:00"


def _submit_and_commit(submit, django_capture_on_commit_callbacks, params=SECRET_MAIL):
    with django_capture_on_commit_callbacks(execute=True):
        request = submit("send_email", params)
    return request


def test_arrival_emails_the_approver_group_over_smtp_with_masked_params(
    smtp_server, mailed_people, email_rule_settings, submit, django_capture_on_commit_callbacks
):
    email_rule_settings(notify_on_arrival=True)
    request = _submit_and_commit(submit, django_capture_on_commit_callbacks)
    assert request.state == "pending_approval"
    # Queued on commit, not sent in the submitting request:
    assert Notification.objects.filter(request=request, event="arrived", channel="email").count() == 1

    assert tasks.deliver_due() == 1

    ((recipients, message),) = smtp_server.messages
    assert sorted(recipients) == sorted(f"{n}@example.com" for n in ("alice", "bob", "carol", "owen", "rita"))
    assert message["Subject"] == "[control plane] Approval needed: send_email (medium)"
    text = message.get_payload(decode=True).decode()
    assert "Quarterly numbers" in text and f"body: {MASK}" in text
    assert "hunter2" not in message.as_string()
    assert Notification.objects.get(request=request).status == "delivered"
    assert tasks.deliver_due() == 0  # sent once


def test_rules_without_settings_send_nothing(smtp_server, mailed_people, submit, django_capture_on_commit_callbacks):
    _submit_and_commit(submit, django_capture_on_commit_callbacks)
    assert not Notification.objects.exists()


def test_reminder_goes_out_once_before_the_deadline(smtp_server, mailed_people, email_rule_settings, submit):
    email_rule_settings(notify_on_arrival=False, remind_before_seconds=600)
    with freeze_time(T0):
        request = submit("send_email", SECRET_MAIL)  # decide_by = T0 + 1 h
    with freeze_time("2026-03-02 09:40:00"):
        assert tasks.send_due_reminders() == 0
    with freeze_time("2026-03-02 09:51:00"):
        assert tasks.send_due_reminders() == 1
        assert tasks.send_due_reminders() == 0
        assert tasks.deliver_due() == 1
    ((_, message),) = smtp_server.messages
    assert message["Subject"].startswith("[control plane] Decision due soon")
    assert "hunter2" not in message.as_string()
    with freeze_time("2026-03-02 10:01:00"):  # past the deadline: no reminder for an expired request
        services.expire_overdue()
        assert tasks.send_due_reminders() == 0
    assert Notification.objects.filter(request=request, event="reminder").count() == 1


def test_undecided_requests_escalate_to_the_second_group(
    smtp_server, mailed_people, email_rule_settings, submit, oncall
):
    email_rule_settings(notify_on_arrival=False, escalate_after_seconds=1800, escalation_group=oncall)
    with freeze_time(T0):
        request = submit("send_email", SECRET_MAIL)
    erin = oncall.user_set.get()
    assert not can_decide(erin, request)

    with freeze_time("2026-03-02 09:20:00"):
        assert tasks.escalate_overdue() == 0
    with freeze_time("2026-03-02 09:31:00"):
        assert tasks.escalate_overdue() == 1
        assert tasks.escalate_overdue() == 0
        assert tasks.deliver_due() == 1

    request.refresh_from_db()
    assert request.escalated and can_decide(erin, request)
    event = AuditEvent.objects.get(verb="request.escalated", request_id=request.pk)
    assert event.metadata == {"group": "oncall", "reason": "undecided"}
    ((recipients, message),) = smtp_server.messages
    assert recipients == ["erin@example.com"]
    assert message["Subject"].startswith("[control plane] Escalated to you")
    assert "hunter2" not in message.as_string()
    with freeze_time("2026-03-02 09:32:00"):
        services.approve(
            request.pk, revision=current_revision(request.pk), actor=services.Person(erin)
        )  # the second line can decide
    assert ApprovalRequest.objects.get(pk=request.pk).state == "approved"


def test_decided_requests_are_neither_reminded_nor_escalated(email_rule_settings, submit, people, oncall):
    email_rule_settings(remind_before_seconds=3000, escalate_after_seconds=60, escalation_group=oncall)
    with freeze_time(T0):
        request = submit("send_email", SECRET_MAIL)
        services.reject(
            request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]), feedback="no"
        )
    with freeze_time("2026-03-02 09:30:00"):
        assert tasks.send_due_reminders() == 0
        assert tasks.escalate_overdue() == 0


# --- Extending decide_by ------------------------------------------------------------------------


def test_a_reviewer_extends_the_deadline_once_within_the_rules_limit(email_rule_settings, submit, people):
    email_rule_settings(max_extension_seconds=7200)
    with freeze_time(T0):
        request = submit("send_email", SECRET_MAIL)
        original = request.decide_by

        with pytest.raises(DomainError) as refused:
            services.extend_decision_deadline(request.pk, actor=services.Person(people["alice"]), seconds=7201)
        assert refused.value.code == "extension_not_allowed"
        with pytest.raises(DomainError) as refused:
            services.extend_decision_deadline(request.pk, actor=services.Person(people["mallory"]), seconds=60)
        assert refused.value.code == "not_permitted"

        extended = services.extend_decision_deadline(
            request.pk, actor=services.Person(people["alice"]), seconds=3600, reason="Waiting for finance"
        )
        assert extended.decide_by == original + timedelta(hours=1)

        with pytest.raises(DomainError) as refused:
            services.extend_decision_deadline(request.pk, actor=services.Person(people["bob"]), seconds=60)
        assert refused.value.code == "already_extended"

    event = AuditEvent.objects.get(verb="request.deadline_extended")
    assert event.actor_label == "alice" and event.metadata["seconds"] == 3600
    assert event.metadata["to"] == (original + timedelta(hours=1)).isoformat()
    with freeze_time("2026-03-02 10:30:00"):  # past the original deadline, before the new one
        assert services.expire_overdue() == 0


def test_no_extension_where_the_rule_allows_none(submit, people):
    request = submit("send_email", SECRET_MAIL)
    with pytest.raises(DomainError) as refused:
        services.extend_decision_deadline(request.pk, actor=services.Person(people["alice"]), seconds=60)
    assert refused.value.code == "extension_not_allowed"
    assert ApprovalRequest.objects.get(pk=request.pk).decide_by == request.decide_by


# --- Webhook -----------------------------------------------------------------------------------------


def test_webhook_is_signed_masked_and_retried_with_a_row_per_attempt(
    webhook_receiver, email_rule_settings, submit, django_capture_on_commit_callbacks
):
    email_rule_settings(notify_on_arrival=False, webhook_url=webhook_receiver.url)
    webhook_receiver.statuses = [503]
    request = _submit_and_commit(submit, django_capture_on_commit_callbacks)
    (notification,) = Notification.objects.filter(request=request)
    assert notification.channel == "webhook"

    now = timezone.now()
    assert dispatch.deliver_due(now=now) == 0  # 503: retry later
    notification.refresh_from_db()
    (first,) = DeliveryAttempt.objects.filter(notification=notification)
    assert (first.succeeded, first.status_code, notification.status) == (False, 503, "pending")
    assert first.next_attempt_at == notification.next_attempt_at == now + dispatch.backoff(1)
    assert dispatch.deliver_due(now=now + timedelta(seconds=5)) == 0  # not due yet: no call
    assert len(webhook_receiver.calls) == 1

    assert dispatch.deliver_due(now=now + timedelta(seconds=31)) == 1
    notification.refresh_from_db()
    assert notification.status == "delivered" and notification.attempts == 2
    assert DeliveryAttempt.objects.filter(notification=notification, succeeded=True).count() == 1

    headers, body = webhook_receiver.calls[-1]
    expected = hmac.new(
        channels.webhook_secret(), headers["x-controlplane-timestamp"].encode() + b"." + body, hashlib.sha256
    ).hexdigest()
    assert headers["x-controlplane-signature"] == f"sha256={expected}"
    payload = json.loads(body)
    assert payload["event"] == "request.arrived" and payload["request_id"] == str(request.pk)
    assert payload["params"]["body"] == MASK and payload["masked_params"] == ["body"]
    assert b"hunter2" not in body


def test_webhook_gives_up_after_the_last_attempt(webhook_receiver, email_rule_settings, submit, settings):
    settings.NOTIFICATION_MAX_ATTEMPTS = 2
    email_rule_settings(notify_on_arrival=False, webhook_url=webhook_receiver.url)
    webhook_receiver.statuses = [500, 500, 500]
    request = submit("send_email", SECRET_MAIL)
    dispatch.queue_arrival(request.pk)
    now = timezone.now()
    dispatch.deliver_due(now=now)
    dispatch.deliver_due(now=now + timedelta(hours=1))
    notification = Notification.objects.get(request=request)
    assert notification.status == "gave_up" and notification.attempts == 2
    assert dispatch.deliver_due(now=now + timedelta(days=1)) == 0
    assert len(webhook_receiver.calls) == 2


def test_webhook_urls_must_be_allow_listed(settings, email_rule_settings, webhook_receiver, submit):
    settings.OUTBOUND_URL_ALLOWLIST = ["hooks.example.com"]
    with pytest.raises(ValueError, match="webhook_url"):
        email_rule_settings(webhook_url=webhook_receiver.url)

    # Allowed when saved, refused when delivered (the allow-list changed): no call, no retry.
    settings.OUTBOUND_URL_ALLOWLIST = ["127.0.0.1"]
    email_rule_settings(notify_on_arrival=False, webhook_url=webhook_receiver.url)
    settings.OUTBOUND_URL_ALLOWLIST = ["hooks.example.com"]
    request = submit("send_email", SECRET_MAIL)
    dispatch.queue_arrival(request.pk)
    assert dispatch.deliver_due() == 0
    notification = Notification.objects.get(request=request)
    assert notification.status == "gave_up" and "outbound_url_not_allowed" in notification.last_error
    assert webhook_receiver.calls == []


def test_settings_changes_are_audited_before_and_after(email_rule_settings, oncall):
    email_rule_settings(remind_before_seconds=600)
    email_rule_settings(remind_before_seconds=900, escalation_group=oncall)
    event = AuditEvent.objects.filter(verb="rule.notifications_changed").order_by("-seq").first()
    assert event.metadata["before"]["remind_before_seconds"] == 600
    assert event.metadata["after"]["remind_before_seconds"] == 900
    assert event.metadata["after"]["escalation_group"] == "oncall"
    with pytest.raises(ValueError, match="remind_before_seconds"):
        email_rule_settings(remind_before_seconds=-5)


def test_beat_schedule_entries():
    assert set(tasks.beat_schedule()) == {
        "approvals.notifications.send_due_reminders",
        "approvals.notifications.escalate_overdue",
        "approvals.notifications.deliver_due",
    }
