"""Celery tasks for the audit log: scheduled chain verification and checkpoints.

The beat schedule (owned by controlplane's Celery app) should run:

    "audit-verify-incremental": {"task": "audit.verify_chain", "schedule": 300.0},
    "audit-verify-full": {"task": "audit.verify_chain", "schedule": crontab(hour=3, minute=17),
                          "kwargs": {"full": True}},

and, every few minutes, a C2SP checkpoint for the witnesses (`audit.checkpoint`, only when
the log grew: audit.notes.checkpoint_if_grown):

    "audit-checkpoint": {"task": "audit.issue_checkpoint", "schedule": 300.0},

Each verification run stores a ChainVerification row, appends `audit.verified` or
`audit.chain_broken`, and writes a signed checkpoint of the verified head to
settings.AUDIT_CHECKPOINT_DIR when the chain is intact.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from .notes import checkpoint_if_grown
from .verification import run_verification

__all__ = ["issue_checkpoint_task", "verify_chain_task"]


@shared_task(name="audit.verify_chain", ignore_result=True)
def verify_chain_task(full: bool = False) -> dict[str, Any]:
    """Verify the chain (incrementally unless `full`), record the outcome, checkpoint the head."""
    run = run_verification(full=full, trigger="scheduled")
    return {"ok": run.ok, "head_seq": run.head_seq, "bad_seq": run.bad_seq, "checkpoint": run.checkpoint_file}


@shared_task(name="audit.issue_checkpoint", ignore_result=True)
def issue_checkpoint_task() -> bool:
    """Issue a signed-note checkpoint if the log grew since the newest one; whether one was issued."""
    return checkpoint_if_grown() is not None
