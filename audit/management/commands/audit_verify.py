"""`manage.py audit_verify [--since-seq N]`: walk the audit chain and report the first break.

Compares the database with the signed checkpoints outside it first (a deleted tail
shows there), then walks the chain checking every row's signature (audit.signing).
Prints "OK: N events verified, head seq S hash H" and the newest checkpoint's age, and exits 0, or
"BROKEN at seq S: <reason>" and exits 1. Progress goes to stderr: a live counter
on a terminal, otherwise a line every 10%. Unless --no-record is given, the outcome
is itself recorded as an `audit.verified` or `audit.chain_broken` event and a
ChainVerification row (shown on the auditors' status panel).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from audit.chain import verify_chain
from audit.checkpoint import latest_checkpoint, write_checkpoint
from audit.verification import checkpoint_problem, record_outcome

PROGRESS_STEP_PERCENT = 10


class Command(BaseCommand):
    help = "Verify the audit hash chain; exit 1 at the first broken event."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since-seq",
            type=int,
            default=1,
            help="Verify from this seq on, trusting the stored hash of the seq before it.",
        )
        parser.add_argument(
            "--no-record",
            action="store_true",
            help="Do not append an audit.verified / audit.chain_broken event (read-only databases).",
        )

    def handle(self, *args: Any, since_seq: int, no_record: bool, **options: Any) -> None:
        if since_seq < 1:
            raise CommandError("--since-seq must be 1 or more")
        started_at = timezone.now()
        # Signed checkpoints outside the database first: a deleted tail shows there.
        result = checkpoint_problem() or verify_chain(since_seq=since_seq, progress=self._progress_reporter())
        if self.stderr.isatty():
            self.stderr.write("")  # end the live counter's line
        if not no_record:
            # Stored like a scheduled run (with a new signed checkpoint when the chain holds),
            # so the auditors' status panel shows it too.
            checkpoint_file = (
                write_checkpoint(result.head_seq, result.head_hash).name if (result.ok and result.head_seq > 0) else ""
            )
            record_outcome(
                result,
                from_seq=since_seq,
                full=since_seq == 1,
                trigger="manual",
                started_at=started_at,
                checkpoint_file=checkpoint_file,
            )
        if not result.ok:
            self.stdout.write(f"BROKEN at seq {result.bad_seq}: {result.reason}")
            raise CommandError(f"audit chain broken at seq {result.bad_seq}", returncode=1)
        self.stdout.write(f"OK: {result.checked} events verified, head seq {result.head_seq} hash {result.head_hash}")
        self.stdout.write(_checkpoint_age())

    def _progress_reporter(self) -> Callable[[int, int], None]:
        if self.stderr.isatty():

            def live(done: int, total: int) -> None:
                self.stderr.write(f"\rverified {done}/{total}", ending="")

            return live

        next_percent = [PROGRESS_STEP_PERCENT]

        def stepped(done: int, total: int) -> None:
            percent = 100 if total == 0 else done * 100 // total
            if percent >= next_percent[0]:
                self.stderr.write(f"verified {done}/{total} ({percent}%)")
                next_percent[0] = (percent // PROGRESS_STEP_PERCENT + 1) * PROGRESS_STEP_PERCENT

        return stepped


def _checkpoint_age() -> str:
    newest = latest_checkpoint()
    if newest is None or "problem" in newest:
        return "No signed checkpoint yet: a deleted tail cannot be detected until one is written."
    written = datetime.strptime(newest["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    hours = (timezone.now() - written).total_seconds() / 3600
    return f"Newest signed checkpoint: seq {newest['seq']}, written {hours:.1f} h ago ({newest['file']})."
