"""`manage.py audit_checkpoint`: issue a signed-note checkpoint of the audit tree and print it.

`--vkey` prints only the log's note verifier key (`<origin>+<key hash>+<base64>`), the
line witnesses and Go's `note.NewVerifier` pin; like `audit_public_key`, pin it from a
server you trust.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from audit.notes import issue_checkpoint, log_key


class Command(BaseCommand):
    help = "Issue a C2SP signed-note checkpoint of the audit tree (recorded as audit.checkpoint) and print it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--vkey", action="store_true", help="Print the log's verifier key and issue nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["vkey"]:
            self.stdout.write(log_key().vkey)
            return
        self.stdout.write(issue_checkpoint(), ending="")
