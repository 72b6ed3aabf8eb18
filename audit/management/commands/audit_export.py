"""`manage.py audit_export --format csv|jsonl [filters] --out FILE`: the web export, from a shell.

Writes the same file and the same signed manifest as GET /audit/export.<format>
(JSONL: the last line; CSV: a sidecar FILE.manifest.json), records the same
`audit.exported` event, and shows a progress bar on stderr. Prints the export id
and the manifest's path on stdout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.chain import Actor
from audit.export import FORMATS, begin_export, count_rows, iter_export
from audit.filters import AuditEventFilterSet, FilterError

BAR_WIDTH = 30


class Command(BaseCommand):
    help = "Export the audit log (filtered) as CSV or JSON Lines with a signed manifest."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", choices=sorted(FORMATS), required=True)
        parser.add_argument(
            "--out", required=True, help="File to write ('-' is not supported: the manifest needs a path)."
        )
        parser.add_argument("--since", help="ISO-8601 date or date-time, inclusive (UTC when no offset).")
        parser.add_argument("--until", help="ISO-8601 date or date-time, exclusive.")
        parser.add_argument("--verb", help="A registered verb, e.g. request.approved.")
        parser.add_argument("--actor", help="Actor label (username, agent name or system label).")
        parser.add_argument("--actor-kind", choices=["user", "agent", "system"])
        parser.add_argument("--agent", help="Agent id.")
        parser.add_argument("--request", help="Request UUID.")
        parser.add_argument("--risk", help="Risk level the request was classified at.")
        parser.add_argument("--rule", help="Name of the rule that classified the request.")
        parser.add_argument("--as", dest="label", default="audit_export", help="Label of the system actor recorded.")

    def handle(self, *args: Any, **options: Any) -> None:
        query = {
            name: options.get(name)
            for name in ("since", "until", "verb", "actor", "actor_kind", "agent", "request", "risk", "rule")
        }
        try:
            filters = AuditEventFilterSet.from_query({k: v for k, v in query.items() if v is not None})
        except FilterError as exc:
            raise CommandError(f"--{exc.field.replace('_', '-')}: {exc.message}") from None
        out = Path(options["out"])
        plan = begin_export(filters, options["format"], actor=Actor.system(options["label"]))
        total = count_rows(plan)
        done = 0
        with out.open("w", encoding="utf-8", newline="") as handle:
            for text, rows in iter_export(plan):
                handle.write(text)
                done += rows
                self._progress(done, total)
        self.stderr.write("")
        manifest_path = out
        if plan.fmt == "csv":
            manifest_path = out.with_name(out.name + ".manifest.json")
            manifest_path.write_text(json.dumps(plan.manifest, sort_keys=True, indent=2) + "\n", encoding="utf-8")
        self.stdout.write(f"exported {done} rows to {out} (export {plan.export_id}); manifest: {manifest_path}")

    def _progress(self, done: int, total: int) -> None:
        filled = BAR_WIDTH if total == 0 else min(BAR_WIDTH, done * BAR_WIDTH // total)
        percent = 100 if total == 0 else min(100, done * 100 // total)
        self.stderr.write(
            f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {percent:3d}% {done}/{total} rows", ending=""
        )
        self.stderr.flush()
