"""`manage.py audit_seal`: verify the rows written before signing began and seal them.

Those rows carry no signature (re-signing them would bless any forgery already made,
and needs UPDATE). This command walks them once (linkage, hashes, columns) and, if
they hold, appends one signed `audit.sealed` event naming their head; from then on
`audit_verify` accepts them. Run it once after upgrading, after checking the
database's history (and any older export) for tampering.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from audit.chain import Actor, record
from audit.models import AuditEvent
from audit.signing import SEALED
from audit.walk import verify_unsigned_prefix


class Command(BaseCommand):
    help = "Verify the audit rows written before signing began and seal them with one signed event."

    def handle(self, *args: Any, **options: Any) -> None:
        result = verify_unsigned_prefix()
        if not result.ok:
            self.stdout.write(f"NOT SEALED: seq {result.bad_seq}: {result.reason}")
            raise CommandError("the unsigned rows do not verify; nothing was sealed", returncode=1)
        if result.checked == 0:
            self.stdout.write("Nothing to seal: every row is signed.")
            return
        already = AuditEvent.objects.filter(verb=SEALED, metadata__sealed_seq=result.head_seq).exists()
        if already:
            self.stdout.write(f"Already sealed: rows 1..{result.head_seq}.")
            return
        record(
            SEALED,
            actor=Actor.system("audit_seal"),
            metadata={
                "sealed_seq": result.head_seq,
                "sealed_hash": result.head_hash,
                "checked": result.checked,
            },
        )
        self.stdout.write(f"Sealed rows 1..{result.head_seq} (head hash {result.head_hash}).")
