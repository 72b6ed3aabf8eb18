"""A table shaped like approval requests, for the bare-DRF baseline of the submit benchmark."""

import uuid

from django.db import models
from django.utils import timezone


class BaselineRequest(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=6, default="action")
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="+")
    state = models.CharField(max_length=20, default="draft", db_index=True)
    action_type = models.CharField(max_length=200, db_index=True)
    target = models.JSONField(default=dict)
    params = models.JSONField(default=dict)
    declared = models.JSONField(default=dict)
    run_id = models.CharField(max_length=200, blank=True, db_index=True)
    tool_call_id = models.CharField(max_length=200, blank=True)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 (as ApprovalRequest)
    risk_level = models.CharField(max_length=12, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="baseline_one_per_key",
            )
        ]
