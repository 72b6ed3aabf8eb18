"""Benchmark: audit export rows/s against PostgreSQL `COPY ... TO STDOUT`, and peak memory.

    DATABASE_URL=postgres://... .venv/bin/python tests/perf/bench_audit_export.py [--rows 1000000]

Creates a throwaway database (the test database of DATABASE_URL), fills the
audit log with --rows chained events, then measures, on the same rows:
  * baseline: `COPY (SELECT seq, prev_hash, hash, canonical ... ORDER BY seq) TO STDOUT`
    read through psycopg (what PostgreSQL itself can stream);
  * export: GET /audit/export.jsonl through a real daphne process, read to the end,
    and the daphne process's peak RSS (VmHWM) before and after.
Prints the summary on stderr and, as its last stdout line, the tests/perf/common.py
result document (`ratio` = export rows/s over COPY rows/s, target >= 0.5).
Not collected by pytest (the file name starts with bench_).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")


def fill(rows: int, batch: int = 5000) -> float:
    """Append `rows` chained events quickly (one COPY-free bulk append per batch)."""
    from audit.chain import Actor, audited_atomic, record

    started = time.perf_counter()
    actor = Actor.system("bench")
    for start in range(0, rows, batch):
        with audited_atomic():
            for index in range(start, min(rows, start + batch)):
                record("policy.changed", actor=actor,
                       metadata={"n": index, "params": {"hmac": "ab" * 32, "size": 1234}, "note": "benchmark row"})
    return time.perf_counter() - started


def copy_rate() -> tuple[float, int]:
    from django.db import connection

    connection.ensure_connection()
    started, size = time.perf_counter(), 0
    with connection.connection.cursor() as cursor:
        with cursor.copy(
            "COPY (SELECT seq, prev_hash, hash, canonical FROM audit_auditevent ORDER BY seq) TO STDOUT"
        ) as copy:
            for block in copy:
                size += len(block)
    return time.perf_counter() - started, size


def peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def export_rate(server, cookie: str) -> tuple[float, int]:
    request = urllib.request.Request(f"{server.url}/audit/export.jsonl", headers={"Cookie": f"sessionid={cookie}"})
    started, size = time.perf_counter(), 0
    with urllib.request.urlopen(request, timeout=3600) as response:
        while block := response.read(1 << 20):
            size += len(block)
    return time.perf_counter() - started, size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--smoke", action="store_true", help="tiny size so CI keeps the script working")
    arguments = parser.parse_args()
    if arguments.smoke:
        arguments.rows = 2000

    import django

    from tests.perf.common import bench_database_url

    # The throwaway database is test_<BENCH_DB>, never the test database of another run.
    os.environ["DATABASE_URL"] = bench_database_url()
    django.setup()
    from django.contrib.auth.models import Group
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    if connection.vendor != "postgresql":
        sys.exit("set DATABASE_URL to PostgreSQL: the baseline is COPY ... TO STDOUT")
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        from django.contrib.auth import get_user_model

        from audit.db import maintenance
        from tests.live import DaphneServer

        with maintenance(), connection.cursor() as cursor:
            cursor.execute("DELETE FROM audit_auditevent")
        fill_seconds = fill(arguments.rows)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE audit_auditevent")
        auditor = get_user_model().objects.create_user("bench-auditor", password="unused-bench-pw")
        auditor.groups.add(Group.objects.get(name="auditors"))
        client = Client()
        client.force_login(auditor)
        cookie = client.cookies["sessionid"].value

        copy_rate()  # warm the cache for both
        copy_seconds, copy_bytes = copy_rate()
        server = DaphneServer()
        try:
            idle_peak = peak_kib(server.process.pid)
            export_seconds, export_bytes = export_rate(server, cookie)
            export_peak = peak_kib(server.process.pid)
        finally:
            server.stop()
        rows = arguments.rows
        summary = {
            "benchmark": "audit_export",
            "rows": rows,
            "fill_seconds": round(fill_seconds, 2),
            "copy_rows_per_s": round(rows / copy_seconds),
            "copy_mb": round(copy_bytes / 1e6, 1),
            "export_rows_per_s": round(rows / export_seconds),
            "export_mb": round(export_bytes / 1e6, 1),
            "ratio": round(copy_seconds / export_seconds, 3),
            "target_ratio": 0.5,
            "daphne_peak_rss_idle_mib": round(idle_peak / 1024, 1),
            "daphne_peak_rss_after_export_mib": round(export_peak / 1024, 1),
        }
        from tests.perf.common import Result, emit

        print(json.dumps(summary), file=sys.stderr)
        emit("audit_export", [
            Result("export_rows_per_s", summary["export_rows_per_s"], "rows/s",
                   baseline=summary["copy_rows_per_s"], baseline_name="COPY ... TO STDOUT",
                   target="ratio >= 0.5", details=summary),
            Result("daphne_peak_rss_after_export", summary["daphne_peak_rss_after_export_mib"], "MiB",
                   baseline=summary["daphne_peak_rss_idle_mib"], baseline_name="daphne idle peak",
                   target="flat from 10k to 1M rows", details={"rows": rows}),
        ])
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
