"""Executing approved requests: server-side executors, the runner that claims and reports, and the
Celery tasks and sweeps around them (the database, not the broker, carries retries)."""
