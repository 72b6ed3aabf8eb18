"""The emergency stop's switches."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class EmergencyStop(models.Model):
    """The run-time emergency stop switches: one global row (agent null) and one per
    stopped agent. Flip them only through `approvals.emergency.set_emergency_stop`,
    which audits the change and tells reviewers' screens; read them only through
    `approvals.emergency.is_stopped`.
    """

    GLOBAL = "global"

    # "global", or "agent:<id>": a unique key, so a scope never has two switches.
    scope = models.CharField(max_length=40, unique=True, editable=False)
    agent = models.OneToOneField(
        settings.APPROVALS_AGENT_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="emergency_switch"
    )
    on = models.BooleanField(default=False)
    reason = models.TextField(blank=True)
    changed_at = models.DateTimeField(default=timezone.now)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_by_label = models.CharField(max_length=150, blank=True)

    def __str__(self) -> str:
        scope = f"agent {self.agent}" if self.agent_id else "global"
        return f"emergency stop ({scope}): {'ON' if self.on else 'off'}"

    @staticmethod
    def scope_for(agent) -> str:
        return EmergencyStop.GLOBAL if agent is None else f"agent:{agent.pk}"
