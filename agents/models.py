"""Agent identities, their hashed API tokens, and callback deliveries.

Tokens are shown once and stored as (public prefix, sha256 of the secret): the
prefix finds the row with one indexed lookup, the hash proves the secret.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone


def _new_callback_secret() -> str:
    return secrets.token_urlsafe(32)


class Agent(models.Model):
    """An automated caller that submits actions and plans on someone's behalf.

    The owner is accountable for the agent, so separation of duties keeps them
    from approving its requests.
    """

    name = models.CharField(max_length=100, unique=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_agents",
    )
    is_active = models.BooleanField(default=True)
    # The agent's own emergency stop: its claims, executions and auto-approvals halt.
    created_at = models.DateTimeField(auto_now_add=True)
    # Keys the HMAC-SHA256 signature on callbacks POSTed to this agent. Kept in
    # clear because the server must sign with it; it authorizes nothing here.
    callback_secret = models.CharField(max_length=64, default=_new_callback_secret)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Scope(models.TextChoices):
    """What a token may do (per HTTP method and endpoint, see agents/api/permissions.py)."""

    SUBMIT = "submit", "Submit actions and plans, cancel them"
    READ = "read", "Read its own requests and wait for decisions"
    CLAIM = "claim", "Claim and complete approved executions"


ALL_SCOPES: tuple[str, ...] = tuple(Scope.values)


class AgentToken(models.Model):
    """One API token of one agent. The secret itself is never stored."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tokens")
    label = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, unique=True, help_text="Public part of the token, for lookup.")
    secret_hash = models.CharField(max_length=64, help_text="sha256 hex of the secret part.")
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.agent.name} token {self.prefix}"

    def is_usable(self, now=None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


class CallbackDelivery(models.Model):
    """One decision to POST to a request's `callback_url`, retried with backoff.

    The database drives retries: `next_attempt_at` is when the next try is due
    (NULL once delivered or given up), and every try is a CallbackAttempt row.
    """

    request = models.ForeignKey("approvals.ApprovalRequest", on_delete=models.CASCADE, related_name="callbacks")
    url = models.URLField(max_length=2000)
    state = models.CharField(max_length=20, help_text="The request state this delivery announces.")
    payload = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    gave_up_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["request", "state"], name="one_callback_per_request_state"),
        ]


class CallbackAttempt(models.Model):
    """One HTTP attempt of a callback delivery, kept for the record."""

    delivery = models.ForeignKey(CallbackDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveSmallIntegerField()
    attempted_at = models.DateTimeField(default=timezone.now)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["delivery", "number"]


class RequestCallback(models.Model):
    """The `callback_url` an agent gave with a submission (checked against the outbound allow-list)."""

    request = models.OneToOneField("approvals.ApprovalRequest", on_delete=models.CASCADE, related_name="callback")
    url = models.URLField(max_length=2000)
