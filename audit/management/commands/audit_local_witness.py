"""`manage.py audit_local_witness --url URL`: the one local witness `make run` starts (a demo, not a witness).

A real witness runs elsewhere, under someone else's control (`hitl-witness`, docs/audit.md
"Witnesses"). This one runs the same command in its own process, with its key and state
under VAR_DIR/witness, so the demo's checkpoints read `witnessed`. It issues the first
checkpoint when there is none (beat issues the later ones: `audit.issue_checkpoint`).
`--vkey` creates the key if needed and prints its vkey (for AUDIT_WITNESSES), nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.notes import issue_checkpoint, log_key, newest_note
from hitl_controlplane import witness

NAME = "local-witness.localhost"


def key_path() -> Path:
    return Path(settings.VAR_DIR) / "witness" / "local-witness.key"


def local_vkey() -> str:
    """The local witness's vkey, creating its key file (mode 0600) the first time."""
    path = key_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        witness.create_key(path, NAME)
    return witness.load_key(path).vkey


class Command(BaseCommand):
    help = "Run the local demo witness against this server (make run starts it)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000")
        parser.add_argument("--interval", type=float, default=10.0)
        parser.add_argument("--vkey", action="store_true", help="Print the local witness's vkey and run nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        vkey = local_vkey()
        if options["vkey"]:
            self.stdout.write(vkey)
            return
        if newest_note() is None:
            issue_checkpoint()
        state = key_path().with_name("local-witness.state")
        argv = ["run", "--url", options["url"], "--log-vkey", log_key().vkey, "--key", str(key_path())]
        status = witness.main([*argv, "--state", str(state), "--interval", str(options["interval"])])
        if status:
            raise CommandError(f"the local witness stopped with status {status}")
