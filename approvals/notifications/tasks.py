"""Celery tasks for notifications: thin wrappers of `approvals.notifications.dispatch`.

Beat schedule entries (owned by controlplane/celery.py; see `beat_schedule()`):
reminders, escalation and due deliveries every NOTIFICATION_SWEEP_SECONDS (60).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings


@shared_task(name="approvals.notifications.deliver", ignore_result=True, acks_late=True)
def deliver_notification(notification_id: int) -> str:
    """One delivery attempt (a no-op if it was sent, gave up or is not due)."""
    from .dispatch import deliver

    return deliver(notification_id)


@shared_task(name="approvals.notifications.queue_arrival", ignore_result=True)
def queue_arrival(request_id: str) -> int:
    from .dispatch import queue_arrival as run

    return len(run(request_id))


@shared_task(name="approvals.notifications.send_due_reminders", ignore_result=True)
def send_due_reminders() -> int:
    from .dispatch import send_due_reminders as run

    return run()


@shared_task(name="approvals.notifications.escalate_overdue", ignore_result=True)
def escalate_overdue() -> int:
    from .dispatch import escalate_overdue as run

    return run()


@shared_task(name="approvals.notifications.deliver_due", ignore_result=True)
def deliver_due() -> int:
    from .dispatch import deliver_due as run

    return run()


def beat_schedule() -> dict[str, dict[str, Any]]:
    """The notification sweeps, for controlplane/celery.py to merge into beat."""
    every = float(settings.NOTIFICATION_SWEEP_SECONDS)
    return {
        name: {"task": name, "schedule": every}
        for name in (
            "approvals.notifications.send_due_reminders",
            "approvals.notifications.escalate_overdue",
            "approvals.notifications.deliver_due",
        )
    }
