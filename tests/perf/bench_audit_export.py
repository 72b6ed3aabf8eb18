"""Benchmark: audit export rows/s against PostgreSQL `COPY ... TO STDOUT`, and peak memory.

    BENCH_DB=cp_bench_<you> .venv/bin/python -m tests.perf.bench_audit_export [--rows 10000 100000 1000000]

Creates a throwaway database (test_<BENCH_DB>) and, for each size in --rows (growing),
appends chained events up to that size (through COPY: tests/perf/common.py
fill_audit_chain), then measures, on the same rows, alternating, the median of three
rounds (one round at 1M):
  * baseline: `COPY (SELECT seq, prev_hash, hash, key_id, signature, canonical ... ORDER BY seq) TO STDOUT`
    read through psycopg (what PostgreSQL itself can stream);
  * export: GET /audit/export.jsonl through a fresh daphne process, read to the end,
    and that process's peak RSS (VmHWM) before and after.
`--smoke` (2,000 rows) also verifies the filled chain and the downloaded export
with the offline verifier, so the fill and the format cannot drift apart unseen.
Prints a summary per size on stderr and, as its last stdout line, the
tests/perf/common.py result document (`ratio` = export rows/s over COPY rows/s,
target >= 0.5). Not collected by pytest (the file name starts with bench_).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.perf.settings")


REPEATS = 3  # alternating COPY / export rounds per size up to 100k rows (1M: one round)


def copy_rate() -> tuple[float, int]:
    from django.db import connection

    connection.ensure_connection()
    started, size = time.perf_counter(), 0
    with connection.connection.cursor() as cursor:
        with cursor.copy(
            # The same columns the export writes (each row's signature included).
            "COPY (SELECT seq, prev_hash, hash, key_id, signature, canonical FROM audit_auditevent ORDER BY seq)"
            " TO STDOUT"
        ) as copy:
            for block in copy:
                size += len(block)
    return time.perf_counter() - started, size


def peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def export_rate(server, cookie: str, keep: Path | None = None, query: str = "") -> tuple[float, int]:
    """Download the whole JSONL export; `keep` writes it to a file (for --smoke's verification)."""
    request = urllib.request.Request(
        f"{server.url}/audit/export.jsonl{query}", headers={"Cookie": f"sessionid={cookie}"}
    )
    started, size = time.perf_counter(), 0
    with (
        urllib.request.urlopen(request, timeout=3600) as response,
        keep.open("wb") if keep else open(os.devnull, "wb") as sink,
    ):
        while block := response.read(1 << 20):
            size += len(block)
            if keep:
                sink.write(block)
    return time.perf_counter() - started, size


def measure(rows: int, cookie: str, *, verify: bool) -> dict:
    """COPY and the export over the `rows` rows now in the audit log."""
    from django.db import connection

    from audit import notes, tree
    from tests.live import DaphneServer

    # The fill bypasses the append: bring the tree to the head and checkpoint it, so the
    # export carries its checkpoint and range proof (audit.export_evidence) as in production.
    tree.catch_up()
    notes.issue_checkpoint()
    evidence_ms = evidence_cost_ms()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE audit_auditevent")
    copy_rate()  # warm the cache for both
    keep = Path(tempfile.mkdtemp()) / "export.jsonl" if verify else None
    server = DaphneServer()  # a fresh process per size, so its peak is this export's
    copies, exports = [], []
    try:
        idle_peak = peak_kib(server.process.pid)
        export_rate(server, cookie, query="?verb=request.expired&agent=0")  # warm-up: imports, first connection
        # COPY and the export alternate, and each side's median counts: on a shared
        # machine one COPY run alone swung from 230k to 790k rows/s.
        for _ in range(REPEATS if rows <= 100_000 else 1):
            copies.append(copy_rate())
            exports.append(export_rate(server, cookie, keep))
        export_peak = peak_kib(server.process.pid)
    finally:
        server.stop()
    copy_seconds, copy_bytes = sorted(copies)[len(copies) // 2]
    export_seconds, export_bytes = sorted(exports)[len(exports) // 2]
    if keep:
        verify_export_file(keep)
    return {
        "benchmark": "audit_export",
        "rows": rows,
        "copy_rows_per_s": round(rows / copy_seconds),
        "copy_mb": round(copy_bytes / 1e6, 1),
        "export_rows_per_s": round(rows / export_seconds),
        "export_mb": round(export_bytes / 1e6, 1),
        "ratio": round(copy_seconds / export_seconds, 3),
        "evidence_ms": evidence_ms,
        "target_ratio": 0.5,
        "daphne_peak_rss_idle_mib": round(idle_peak / 1024, 1),
        "daphne_peak_rss_after_export_mib": round(export_peak / 1024, 1),
    }


def evidence_cost_ms() -> float:
    """What the checkpoint and range proof cost an unfiltered export, once at its end (median of 5)."""
    from audit.chain import head
    from audit.export_evidence import evidence_fields
    from hitl_controlplane.manifest import ExportDigests

    head_seq = head()[0]
    digests = ExportDigests()
    digests.first_seq, digests.last_seq, digests.row_count = 1, head_seq, head_seq
    times = []
    for _ in range(5):
        started = time.perf_counter()
        evidence_fields(head_seq, digests)
        times.append(time.perf_counter() - started)
    return round(sorted(times)[2] * 1000, 2)


def verify_export_file(path: Path) -> None:
    """The chain in the database and the downloaded export both verify (smoke only)."""
    from audit.chain import verify_chain
    from audit.signing import signer
    from hitl_controlplane.verify import verify_export

    in_database = verify_chain()
    if not in_database.ok:
        sys.exit(f"the filled chain does not verify: seq {in_database.bad_seq}: {in_database.reason}")
    verdict = verify_export(path, key=[signer().current.public])
    if not verdict.ok:
        sys.exit(f"the export does not verify: {verdict.message}")
    if verdict.assurance != "signed" or "range proof: seq 1-" not in verdict.message:
        sys.exit(f"the export's checkpoint and range proof did not verify: {verdict.message}")
    path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--rows",
        type=int,
        nargs="+",
        default=[10_000, 100_000, 1_000_000],
        help="audit log sizes to measure, growing (default: 10k 100k 1M)",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny size so CI keeps the script working")
    arguments = parser.parse_args()
    sizes = [2000] if arguments.smoke else sorted(arguments.rows)

    import django

    from tests.perf.common import bench_database_url, fill_audit_chain, progress

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

        from audit.chain import head
        from audit.db import maintenance

        with maintenance(), connection.cursor() as cursor:
            cursor.execute("DELETE FROM audit_auditevent")
        auditor = get_user_model().objects.create_user("bench-auditor", password="unused-bench-pw")
        auditor.groups.add(Group.objects.get(name="auditors"))
        client = Client()
        client.force_login(auditor)
        cookie = client.cookies["sessionid"].value

        summaries = []
        for rows in sizes:
            started = time.perf_counter()
            # Up to `rows` in all: each export appended its own audit.exported event.
            fill_audit_chain(rows - head()[0])
            fill_seconds = time.perf_counter() - started
            summary = {**measure(rows, cookie, verify=arguments.smoke), "fill_seconds": round(fill_seconds, 2)}
            summaries.append(summary)
            progress(json.dumps(summary))
        from tests.perf.common import Result, emit

        results = []
        for summary in summaries:
            rows = summary["rows"]
            results.append(
                Result(
                    f"export_rows_per_s at {rows} rows",
                    summary["export_rows_per_s"],
                    "rows/s",
                    baseline=summary["copy_rows_per_s"],
                    baseline_name="COPY ... TO STDOUT",
                    target="ratio >= 0.5",
                    details=summary,
                )
            )
        for summary in summaries:
            results.append(
                Result(
                    f"daphne_peak_rss_after_export at {summary['rows']} rows",
                    summary["daphne_peak_rss_after_export_mib"],
                    "MiB",
                    baseline=summary["daphne_peak_rss_idle_mib"],
                    baseline_name="daphne idle peak",
                    target="flat from 10k to 1M rows",
                    details={"rows": summary["rows"]},
                )
            )
        emit("audit_export", results)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
