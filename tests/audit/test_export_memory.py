"""An export streamed through a real daphne server holds one chunk at a time:
the server's peak memory does not grow with the number of rows exported."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from django.test import Client

from audit.chain import Actor, audited_atomic, record

PADDING = "x" * 1500  # ~1.7 KB a row, so buffering a whole export would show plainly


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


def append_events(count: int) -> None:
    for start in range(0, count, 500):
        with audited_atomic():
            for index in range(start, min(count, start + 500)):
                record("policy.changed", actor=Actor.system(), metadata={"n": index, "padding": PADDING})


def export_size(server, cookie: str) -> int:
    request = urllib.request.Request(f"{server.url}/audit/export.jsonl", headers={"Cookie": f"sessionid={cookie}"})
    size = 0
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200
        while chunk := response.read(1 << 20):
            size += len(chunk)
    return size


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_peak_memory_of_the_server_does_not_grow_with_the_export(require_postgres, auditor_ann):
    """Measured on PostgreSQL, the production database: on the embedded SQLite default
    the in-process database's own memory made the peak too noisy to bound reliably."""
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to read a process's peak memory")
    from tests.live import DaphneServer

    client = Client()
    client.force_login(auditor_ann)
    cookie = client.cookies["sessionid"].value
    server = DaphneServer()  # its own process, so earlier tests' requests do not set its peak
    try:
        append_events(2000)
        export_size(server, cookie)  # warm up: imports, first connection, first chunk buffers
        small_bytes = export_size(server, cookie)
        small_peak = peak_rss_kib(server.process.pid)
        append_events(6000)
        large_bytes = export_size(server, cookie)
        large_peak = peak_rss_kib(server.process.pid)
    finally:
        server.stop()
    extra_data_kib = (large_bytes - small_bytes) // 1024
    growth_kib = large_peak - small_peak
    assert extra_data_kib > 9000, "the larger export really is ~10 MB larger"
    # A buffered export would grow the peak by at least the extra data (in practice 2-3x it).
    assert growth_kib < extra_data_kib // 3, (
        f"peak RSS grew {growth_kib} KiB for {extra_data_kib} KiB more exported data"
    )
