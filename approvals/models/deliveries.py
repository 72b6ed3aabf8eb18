"""The one shape of an outbound delivery record: agent callbacks (agents.CallbackDelivery)
and notifications (Notification) alike.

The database, not the broker, drives every retry: `next_attempt_at` is when the
next try is due (empty once delivered or given up), each try is an attempt row,
and the status is read from when it was delivered or given up, never stored twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Required, TypedDict

from django.db import models
from django.utils import timezone

__all__ = ["Delivery", "DeliveryStatus", "DeliveryTry", "SettledFields"]


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    GAVE_UP = "gave_up", "Gave up"


class SettledFields(TypedDict, total=False):
    """What `Delivery.settled_fields` sets: always the next try (None: no more) and the error."""

    next_attempt_at: Required[datetime | None]
    last_error: Required[str]
    delivered_at: datetime
    gave_up_at: datetime


class Delivery(models.Model):
    """One message to deliver to one destination, retried with backoff until delivered or given up."""

    destination = models.CharField(max_length=2000, help_text="The URL posted to, or the group emailed.")
    payload = models.JSONField(help_text="What is sent; masked params are already masked.")
    created_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True, help_text="The last HTTP status, if any.")
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    gave_up_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["created_at"]

    @property
    def status(self) -> str:
        if self.delivered_at is not None:
            return DeliveryStatus.DELIVERED
        if self.gave_up_at is not None:
            return DeliveryStatus.GAVE_UP
        return DeliveryStatus.PENDING

    def settled_fields(self, *, now: datetime, error: str, give_up: bool, retry_at: datetime | None) -> SettledFields:
        """The fields an attempt's outcome sets: delivered, given up, or due again at `retry_at`."""
        if not error:
            return {"delivered_at": now, "next_attempt_at": None, "last_error": ""}
        if give_up:
            return {"gave_up_at": now, "next_attempt_at": None, "last_error": error}
        return {"next_attempt_at": retry_at, "last_error": error}


class DeliveryTry(models.Model):
    """One try at a delivery, kept so an admin can see why it failed."""

    number = models.PositiveSmallIntegerField()
    attempted_at = models.DateTimeField(default=timezone.now)
    succeeded = models.BooleanField(default=False)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, help_text="When the next try is due; empty if none.")

    class Meta:
        abstract = True
