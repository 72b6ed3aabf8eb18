"""Per-rule notification settings, the notification outbox with one row per
delivery attempt, and the one-time extensions of a decision deadline.

Imported by `approvals.models`, so these are models of the approvals app.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.utils import timezone

from .deliveries import Delivery, DeliveryTry


class RuleNotification(models.Model):
    """How people hear about requests a rule classifies. Keyed by rule name (the
    rules engine's RuleSpec has a fixed set of keys, and a rule's notification
    settings are not part of what classifies a request, so they are not versioned
    with the policy). Change only through `approvals.notifications.save_settings`.
    """

    rule_name = models.CharField(max_length=100, unique=True)
    notify_on_arrival = models.BooleanField(default=True, help_text="Email the approver group when a card arrives.")
    remind_before_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Remind the approver group this long before decide_by (empty: never)."
    )
    escalate_after_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Escalate a request still undecided this long after it arrived (empty: never)."
    )
    escalation_group = models.ForeignKey(
        Group,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Who gets the request on escalation; defaults to the rule's escalation group.",
    )
    max_extension_seconds = models.PositiveIntegerField(
        default=0, help_text="How far a reviewer may push decide_by back, once (0: no extension)."
    )
    webhook_url = models.URLField(max_length=500, blank=True, help_text="Also POST signed JSON here (allow-listed).")
    slack_channel = models.CharField(
        max_length=32,
        blank=True,
        help_text="Also tell this Slack channel (its id), with a stub only: action type, risk, deadline, a link.",
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by_label = models.CharField(max_length=150, blank=True)

    def __str__(self) -> str:
        return f"notifications for {self.rule_name}"


class Notification(Delivery):
    """One message about one request to one destination: the outbox row.

    Created in bulk by the notification entry points and delivered by a task.
    Unique per (request, event, channel): a redelivered task or a second sweep
    never notifies twice.
    """

    class Event(models.TextChoices):
        ARRIVED = "arrived", "A card arrived"
        REMINDER = "reminder", "Decision deadline approaching"
        ESCALATED = "escalated", "Escalated"

    class Channel(models.TextChoices):
        EMAIL = "email", "Email"
        WEBHOOK = "webhook", "Webhook"
        SLACK = "slack", "Slack direct messages"
        SLACK_STUB = "slack_stub", "Slack channel stub"

    request = models.ForeignKey("approvals.ApprovalRequest", on_delete=models.CASCADE, related_name="notifications")
    event = models.CharField(max_length=10, choices=Event.choices)
    channel = models.CharField(max_length=10, choices=Channel.choices)

    class Meta(Delivery.Meta):
        constraints = [
            models.UniqueConstraint(fields=["request", "event", "channel"], name="one_notification_per_event_channel"),
        ]

    def __str__(self) -> str:
        return f"{self.event} by {self.channel} for {self.request_id} ({self.status})"


class DeliveryAttempt(DeliveryTry):
    """One try at delivering a notification."""

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="delivery_attempts")

    class Meta:
        ordering = ["notification", "number"]
        constraints = [
            models.UniqueConstraint(fields=["notification", "number"], name="one_delivery_attempt_number"),
        ]


class DeadlineExtension(models.Model):
    """A reviewer pushed a request's decide_by back. At most one per request (a
    unique constraint, not a check). Made only by `services.extend_decision_deadline`."""

    request = models.OneToOneField(
        "approvals.ApprovalRequest", on_delete=models.CASCADE, related_name="deadline_extension"
    )
    extended_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    extended_by_label = models.CharField(max_length=150)
    previous_decide_by = models.DateTimeField()
    new_decide_by = models.DateTimeField()
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
