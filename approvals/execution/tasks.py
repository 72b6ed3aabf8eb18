"""Celery tasks of the execution engine and their beat schedule.

Tasks are thin: the logic is in `approvals.execution.runner` (and the services it
calls), so a redelivered or duplicated task is harmless. Results are not stored.
`BEAT_SCHEDULE` is merged into the app's schedule by `controlplane.celery`; run
exactly one beat process per deployment.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings


@shared_task(name="approvals.execute_request", ignore_result=True, acks_late=True)
def execute_request(request_id: str) -> str:
    """Run one due attempt of an approved, server-executed request (idempotent)."""
    from ..permissions import clear_permission_cache
    from .runner import execute

    # A worker lives longer than any one database: after a restore (or a test
    # flush) permission ids change, and re-validation must not count with stale ones.
    clear_permission_cache()
    return execute(request_id)


@shared_task(name="approvals.expire_overdue", ignore_result=True)
def expire_overdue() -> int:
    """Persist expiries whose `decide_by` or `execute_by` has passed."""
    from .. import services

    return services.expire_overdue()


@shared_task(name="approvals.enqueue_pending", ignore_result=True)
def enqueue_pending() -> int:
    """Publish approved requests whose execution task was never published or was lost."""
    from .runner import enqueue_pending as run

    return run()


@shared_task(name="approvals.resolve_executions", ignore_result=True)
def resolve_executions() -> dict[str, int]:
    """Retry due attempts; settle executions whose lease ran out."""
    from .runner import resolve_executions as run

    return run()


def beat_schedule() -> dict[str, dict[str, Any]]:
    """The sweeps, every EXECUTION_SWEEP_SECONDS."""
    every = float(settings.EXECUTION_SWEEP_SECONDS)
    return {
        "approvals.expire_overdue": {"task": "approvals.expire_overdue", "schedule": every},
        "approvals.enqueue_pending": {"task": "approvals.enqueue_pending", "schedule": every},
        "approvals.resolve_executions": {"task": "approvals.resolve_executions", "schedule": every},
    }
