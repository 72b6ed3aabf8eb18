"""`flush`, run inside the audit maintenance exemption.

Django's own flush TRUNCATEs (PostgreSQL) or DELETEs (SQLite) every table, which the
audit table's append-only triggers refuse. This app command shadows the core one
(app commands take precedence) so that `manage.py flush` and the test runner's
flush between transactional tests work for the table owner. The production runtime
role is still refused on PostgreSQL: the triggers also require table ownership.
"""

from __future__ import annotations

from typing import Any

from django.core.management.commands import flush

from audit.db import maintenance


class Command(flush.Command):
    def handle(self, **options: Any) -> None:
        with maintenance(using=options["database"]):
            super().handle(**options)
