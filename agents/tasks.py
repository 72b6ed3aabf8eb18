"""Celery tasks of the agents app and their beat schedule."""

from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(name="agents.deliver_due_callbacks", ignore_result=True)
def deliver_due_callbacks_task() -> int:
    """Send due agent callbacks (retries are driven by CallbackDelivery.next_attempt_at)."""
    from .callbacks import deliver_due_callbacks

    return deliver_due_callbacks()


def beat_schedule() -> dict[str, dict[str, Any]]:
    """The callback sweep: picks up retries and anything the post-commit nudge missed."""
    return {"agents.deliver_due_callbacks": {"task": "agents.deliver_due_callbacks", "schedule": 5.0}}
