"""Periodic identity work: the user-info re-check of provider sessions (`recheck`)."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

__all__ = ["beat_schedule", "recheck_provider_sessions"]


@shared_task(name="accounts.recheck_provider_sessions", ignore_result=True)
def recheck_provider_sessions() -> dict[str, int]:
    from .recheck import recheck_provider_sessions as run

    return run()


def beat_schedule() -> dict[str, dict[str, Any]]:
    return {
        "accounts.recheck_provider_sessions": {
            "task": "accounts.recheck_provider_sessions",
            "schedule": float(settings.SSO_RECHECK_SWEEP_SECONDS),
        }
    }
