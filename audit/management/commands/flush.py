"""`flush`, run inside the audit maintenance exemption.

Django's own flush TRUNCATEs (PostgreSQL) or DELETEs (SQLite) every table, which the
audit table's append-only triggers refuse. This app command shadows the core one
(app commands take precedence) so that `manage.py flush` and the test runner's
flush between transactional tests work for the table owner. The production runtime
role is still refused on PostgreSQL: the triggers also require table ownership.

TRUNCATE takes an exclusive lock on every table at once; a process still finishing a
request (a live server answering a page's last poll, a worker) can hold a share lock
on one of them and wait for another, and PostgreSQL then aborts one side as a
deadlock. When the flush is the side aborted, nothing was truncated, so it is run
again after the other side has finished.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import CommandError
from django.core.management.commands import flush
from django.db import OperationalError

from audit.db import maintenance

DEADLOCK_RETRIES = 5


def _is_deadlock(error: CommandError) -> bool:
    cause = error.__cause__
    return isinstance(cause, OperationalError) and type(cause.__cause__).__name__ == "DeadlockDetected"


class Command(flush.Command):
    def handle(self, **options: Any) -> None:
        for attempt in range(DEADLOCK_RETRIES):
            try:
                with maintenance(using=options["database"]):
                    super().handle(**options)
                return
            except CommandError as error:
                if not _is_deadlock(error) or attempt == DEADLOCK_RETRIES - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))
