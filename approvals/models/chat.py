"""Chat identities (DESIGN.md "Decisions from chat"): a Slack account linked to a user,
and the one-time link a Slack user starts, which the signed-in web session confirms."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SlackLink(models.Model):
    """The Slack identity (enterprise, workspace, user) that decides as `user`."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_links")
    enterprise_id = models.CharField(max_length=32, blank=True, default="")
    team_id = models.CharField(max_length=32)
    slack_user_id = models.CharField(max_length=32)
    linked_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["enterprise_id", "team_id", "slack_user_id"], name="one_user_per_slack_id")
        ]


class SlackLinkStart(models.Model):
    """A link started in Slack: the sha256 of its one-time token, the Slack identity that
    asked, until when it may be confirmed and when it was."""

    token_sha256 = models.CharField(max_length=64, unique=True)
    enterprise_id = models.CharField(max_length=32, blank=True, default="")
    team_id = models.CharField(max_length=32)
    slack_user_id = models.CharField(max_length=32)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)


class SlackMessage(models.Model):
    """A direct message showing a request, and its outbox of updates (approvals.chat.live):
    every change of the request bumps `wanted`; a sender holding `lease_until` renders the
    request from the database, chat.updates it and sets `sent` to the `wanted` it read, so a
    change made meanwhile is sent again and an older rendering never lands after a newer one."""

    request = models.ForeignKey("approvals.ApprovalRequest", on_delete=models.CASCADE, related_name="slack_messages")
    slack_user_id = models.CharField(max_length=32, blank=True, default="")
    channel = models.CharField(max_length=32)
    ts = models.CharField(max_length=32)
    shown_state = models.CharField(max_length=32, blank=True, default="")
    wanted = models.PositiveIntegerField(default=0)
    sent = models.PositiveIntegerField(default=0)
    lease_until = models.DateTimeField(null=True, blank=True)
    retry_at = models.DateTimeField(null=True, blank=True)  # Slack's Retry-After, or the backoff
    attempts = models.PositiveSmallIntegerField(default=0)  # failures since the last update sent
    last_error = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["channel", "ts"], name="one_row_per_slack_message")]
