"""Agent identities, their hashed API tokens, and callback deliveries.

Tokens are shown once and stored as (public prefix, sha256 of the secret): the
prefix finds the row with one indexed lookup, the hash proves the secret.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from approvals.models import Delivery, DeliveryTry


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
        # Approvals (a lower layer) names this model through the setting, never by label.
        swappable = "APPROVALS_AGENT_MODEL"

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


class CallbackDelivery(Delivery):
    """One decision to POST to a request's `callback_url` (the `destination`), retried with backoff."""

    request = models.ForeignKey("approvals.ApprovalRequest", on_delete=models.CASCADE, related_name="callbacks")
    state = models.CharField(max_length=20, help_text="The request state this delivery announces.")

    class Meta(Delivery.Meta):
        constraints = [
            models.UniqueConstraint(fields=["request", "state"], name="one_callback_per_request_state"),
        ]


class CallbackAttempt(DeliveryTry):
    """One HTTP attempt of a callback delivery, kept for the record."""

    delivery = models.ForeignKey(CallbackDelivery, on_delete=models.CASCADE, related_name="attempt_log")

    class Meta:
        ordering = ["delivery", "number"]


class RequestCallback(models.Model):
    """The `callback_url` an agent gave with a submission (checked against the outbound allow-list)."""

    request = models.OneToOneField("approvals.ApprovalRequest", on_delete=models.CASCADE, related_name="callback")
    url = models.URLField(max_length=2000)
