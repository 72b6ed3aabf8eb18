"""Celery tasks for the audit log: scheduled chain verification and checkpoints.

The beat schedule (owned by controlplane's Celery app) should run:

    "audit-verify-incremental": {"task": "audit.verify_chain", "schedule": 300.0},
    "audit-verify-full": {"task": "audit.verify_chain", "schedule": crontab(hour=3, minute=17),
                          "kwargs": {"full": True}},

Each run stores a ChainVerification row, appends `audit.verified` or
`audit.chain_broken`, and writes a signed checkpoint of the verified head to
settings.AUDIT_CHECKPOINT_DIR when the chain is intact.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from .verification import run_verification

__all__ = ["verify_chain_task"]


@shared_task(name="audit.verify_chain", ignore_result=True)
def verify_chain_task(full: bool = False) -> dict[str, Any]:
    """Verify the chain (incrementally unless `full`), record the outcome, checkpoint the head."""
    run = run_verification(full=full, trigger="scheduled")
    return {"ok": run.ok, "head_seq": run.head_seq, "bad_seq": run.bad_seq, "checkpoint": run.checkpoint_file}
