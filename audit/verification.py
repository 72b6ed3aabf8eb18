"""Chain verification runs: scheduled (Celery beat) or manual (`audit_verify`).

A run verifies the chain, compares the database with the signed checkpoints
outside it, stores a `ChainVerification` row for the auditors' status panel,
appends an `audit.verified` or `audit.chain_broken` event (the alert) and, when
the chain is intact, writes a new signed checkpoint of the verified head.

Incremental runs start after the last good run's head, trusting what that run
verified but checking that the row at its head still has the hash it had; a
consistent rewrite of older rows still changes that hash and every checkpoint's.
Full runs walk from seq 1 and catch any edit; schedule one daily.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.utils import timezone

from hitl_controlplane.canonical import VerifyResult

from .chain import Actor, audited_atomic, record, verify_chain
from .checkpoint import read_checkpoints, write_checkpoint
from .models import AuditEvent, ChainVerification

__all__ = ["CHECKPOINTS_COMPARED", "checkpoint_problem", "record_outcome", "run_verification"]

logger = logging.getLogger("audit.verification")

# Every rewrite of rows before a checkpoint changes the hash at it, so a few recent
# checkpoints suffice; older ones are still checked by the offline verifier on request.
CHECKPOINTS_COMPARED = 5


def run_verification(*, full: bool = False, trigger: str = "scheduled", checkpoint: bool = True) -> ChainVerification:
    """Verify the chain (from the last good head, or from seq 1 when `full`) and record the outcome."""
    started_at = timezone.now()
    since_seq, problem = 1, None
    if not full:
        last_good = ChainVerification.objects.filter(ok=True).order_by("-head_seq").first()
        if last_good is not None and last_good.head_seq > 0:
            since_seq = last_good.head_seq + 1
            stored = AuditEvent.objects.filter(seq=last_good.head_seq).values_list("hash", flat=True).first()
            if stored != last_good.head_hash:
                problem = VerifyResult(
                    ok=False,
                    checked=0,
                    head_seq=last_good.head_seq - 1,
                    head_hash="",
                    bad_seq=last_good.head_seq,
                    reason=f"seq {last_good.head_seq} no longer has the hash verified on {last_good.finished_at:%Y-%m-%d %H:%M} UTC",
                )
    result = problem or checkpoint_problem() or verify_chain(since_seq=since_seq)
    checkpoint_file = ""
    if result.ok and checkpoint and result.head_seq > 0:
        checkpoint_file = write_checkpoint(result.head_seq, result.head_hash).name
    return record_outcome(
        result,
        from_seq=since_seq,
        full=full or since_seq == 1,
        trigger=trigger,
        started_at=started_at,
        checkpoint_file=checkpoint_file,
    )


def checkpoint_problem() -> VerifyResult | None:
    """A failed result when the database disagrees with a signed checkpoint (or a checkpoint is forged)."""
    checkpoints = read_checkpoints(limit=CHECKPOINTS_COMPARED)
    if not checkpoints:
        return None
    stored = dict(
        AuditEvent.objects.filter(seq__in=[c["seq"] for c in checkpoints if isinstance(c.get("seq"), int)]).values_list(
            "seq", "hash"
        )
    )
    for found in checkpoints:
        seq = found.get("seq")
        if "problem" in found:
            reason = f"checkpoint {found['file']} is not trustworthy: {found['problem']}"
        elif not isinstance(seq, int):  # read_checkpoints already gives such a file a problem
            reason = f"checkpoint {found['file']} is not trustworthy: it names no seq"
        elif seq not in stored:
            first_missing = _first_missing_seq(seq)
            reason = (
                f"rows from seq {first_missing} on are gone: signed checkpoint {found['file']} names seq "
                f"{seq}, which the database no longer has"
            )
            seq = first_missing
        elif stored[seq] != found["hash"]:
            reason = f"seq {seq} differs from signed checkpoint {found['file']}: the chain was rewritten"
        else:
            continue
        return VerifyResult(
            ok=False, checked=0, head_seq=0, head_hash="", bad_seq=seq if isinstance(seq, int) else None, reason=reason
        )
    return None


def _first_missing_seq(up_to: int) -> int:
    """The first seq at or before `up_to` the database lacks (a deleted tail, or a gap)."""
    kept = AuditEvent.objects.filter(seq__lte=up_to)
    head = kept.order_by("-seq").values_list("seq", flat=True).first() or 0
    if kept.count() == head:  # contiguous from 1: the tail is what is gone
        return head + 1
    expected = 1
    for seq in kept.order_by("seq").values_list("seq", flat=True).iterator():
        if seq != expected:
            break
        expected += 1
    return expected


def record_outcome(
    result: VerifyResult,
    *,
    from_seq: int,
    full: bool,
    trigger: str,
    started_at: datetime,
    checkpoint_file: str = "",
) -> ChainVerification:
    """Store the run for the status panel and append `audit.verified` / `audit.chain_broken`."""
    actor = Actor.system("audit_verify")
    with audited_atomic():
        run = ChainVerification.objects.create(
            started_at=started_at,
            finished_at=timezone.now(),
            from_seq=from_seq,
            head_seq=result.head_seq,
            head_hash=result.head_hash,
            checked=result.checked,
            ok=result.ok,
            bad_seq=result.bad_seq,
            reason=result.reason or "",
            full=full,
            trigger=trigger,
            checkpoint_file=checkpoint_file,
        )
        if result.ok:
            record(
                "audit.verified",
                actor=actor,
                metadata={
                    "since_seq": from_seq,
                    "checked": result.checked,
                    "head_seq": result.head_seq,
                    "head_hash": result.head_hash,
                    "full": full,
                    "trigger": trigger,
                    "checkpoint": checkpoint_file,
                },
            )
        else:
            record(
                "audit.chain_broken",
                actor=actor,
                metadata={
                    "since_seq": from_seq,
                    "bad_seq": result.bad_seq,
                    "reason": result.reason or "",
                    "full": full,
                    "trigger": trigger,
                },
            )
    if not result.ok:
        # The event is the durable alert; the log line reaches whoever watches the workers.
        logger.critical("audit chain broken at seq %s: %s", result.bad_seq, result.reason)
    return run
