"""`manage.py audit_public_key`: print the public keys this server signs audit events with.

For pinning: copy the line into the deploy-time AUDIT_PUBLIC_KEYS_FILE, give it to
auditors (`python -m audit.verify --public-key ...`) and to agent developers (the
client's `public_keys=` / $CONTROLPLANE_PUBLIC_KEYS: decisions are signed with it). Printing it here is a
convenience, never a source of trust: pin it from a server you trust.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from audit.signing import signer


class Command(BaseCommand):
    help = "Print the audit signing public key(s), for pinning."

    def handle(self, *args: Any, **options: Any) -> None:
        keys = signer()
        self.stdout.write(f"{keys.current.public_text}  # key id {keys.current.key_id} (current)")
        if keys.previous is not None:
            self.stdout.write(f"{keys.previous.public_text}  # key id {keys.previous.key_id} (previous)")
