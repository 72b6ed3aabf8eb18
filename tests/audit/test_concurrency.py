"""Concurrent writers never fork the chain (PostgreSQL: the advisory lock is the point)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from audit.chain import Actor, audited_atomic, record, verify_chain
from audit.models import AuditEvent
from hitl_controlplane.canonical import GENESIS_HASH

THREADS = 8
BLOCKS_PER_THREAD = 10
EVENTS_PER_BLOCK = 2


@pytest.mark.django_db(transaction=True)
def test_eight_concurrent_writers_keep_one_contiguous_chain(require_postgres):
    run_concurrent_writers_and_check_the_chain()


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_on_sqlite_queue_behind_immediate_transactions():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: PostgreSQL has its own test above")
    run_concurrent_writers_and_check_the_chain()


def run_concurrent_writers_and_check_the_chain() -> None:
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def writer(worker: int) -> None:
        actor = Actor.system(f"worker-{worker}")
        try:
            start.wait()
            for block in range(BLOCKS_PER_THREAD):
                with audited_atomic():
                    for event in range(EVENTS_PER_BLOCK):
                        record("request.submitted", actor=actor, metadata={"block": block, "event": event})
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(worker,)) for worker in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    rows = list(AuditEvent.objects.values_list("seq", "prev_hash", "hash", "actor_label", "metadata"))
    total = THREADS * BLOCKS_PER_THREAD * EVENTS_PER_BLOCK
    assert [seq for seq, *_ in rows] == list(range(1, total + 1))
    previous = GENESIS_HASH
    for _seq, prev_hash, digest, *_ in rows:
        assert prev_hash == previous, "the chain forked"
        previous = digest
    # A block's events are appended together, so they sit next to each other.
    for first, second in zip(rows[::2], rows[1::2]):
        assert first[3] == second[3] and first[4]["block"] == second[4]["block"]
    assert verify_chain().ok
