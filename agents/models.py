"""Agent identities. The agent API issue adds hashed, scoped API tokens."""

from __future__ import annotations

from django.conf import settings
from django.db import models


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
    emergency_stop = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
