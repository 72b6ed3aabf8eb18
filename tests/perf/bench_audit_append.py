"""Benchmark: audit appends per second with the Merkle tree maintained, against without it.

    BENCH_DB=cp_bench_<you> .venv/bin/python -m tests.perf.bench_audit_append [--prefill 100000] [--appends 2000]

Creates a throwaway database (test_<BENCH_DB>), fills the log to --prefill events
(through COPY, tests/perf/common.py fill_audit_chain, tree caught up) so the tree is
realistically deep, then times, alternating, the median of three rounds of --appends
appends, each one `audited_atomic()` recording one event on one connection (the
smallest append, where the tree's share is largest):
  * baseline: the tree switched off for the round (the head read without the tree's
    size, no tree INSERT), then caught up untimed so the next tree round starts at the head;
  * tree: the append as it runs in production;
  * tree, edge read: as if another process had appended before each append (several
    web processes appending in turn), so each append also reads the tree's right edge.
`ratio` = tree appends/s over baseline appends/s, target >= 0.9. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.perf.settings")

ROUNDS = 3


@contextmanager
def tree_switched_off() -> Iterator[None]:
    """The append as it was before the tree: the head query alone, no tree rows."""
    from audit import tree

    size_sql, extend = tree.size_sql, tree.extend
    tree.size_sql = lambda: "NULL"  # type: ignore[assignment]
    tree.extend = lambda *args, **kwargs: None  # type: ignore[assignment]
    try:
        yield
    finally:
        tree.size_sql, tree.extend = size_sql, extend


def appends_per_second(count: int, *, forget_edge: bool = False) -> float:
    from audit import tree
    from audit.chain import Actor, audited_atomic, record

    actor = Actor.system("bench")
    started = time.perf_counter()
    for n in range(count):
        if forget_edge:  # as if another process had appended since: the edge is read
            tree._last_edge = None
        with audited_atomic():
            record("request.queued", actor=actor, metadata={"n": n})
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefill", type=int, default=100_000, help="events in the log before timing")
    parser.add_argument("--appends", type=int, default=2000, help="appends per round")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes so CI keeps the script working")
    arguments = parser.parse_args()
    prefill, appends = (1000, 100) if arguments.smoke else (arguments.prefill, arguments.appends)

    import django

    from tests.perf.common import Result, bench_database_url, emit, fill_audit_chain, progress

    os.environ["DATABASE_URL"] = bench_database_url()
    django.setup()
    from django.db import connection
    from django.test.utils import setup_test_environment

    if connection.vendor != "postgresql":
        sys.exit("set DATABASE_URL to PostgreSQL: the production shape")
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        from audit import tree
        from audit.chain import head
        from audit.db import maintenance
        from hitl_controlplane import merkle

        with maintenance(), connection.cursor() as cursor:
            cursor.execute("DELETE FROM audit_auditevent")
            cursor.execute("DELETE FROM audit_audittreenode")
        fill_audit_chain(prefill)
        appends_per_second(200)  # warm: the first append pays for connection and import setup
        baseline, maintained, edge_read = [], [], []
        for round_number in range(ROUNDS):
            with tree_switched_off():
                baseline.append(appends_per_second(appends))
            tree.catch_up()
            maintained.append(appends_per_second(appends))
            edge_read.append(appends_per_second(appends, forget_edge=True))
            progress(
                f"round {round_number + 1}: without tree {baseline[-1]:.0f}/s, with tree {maintained[-1]:.0f}/s, "
                f"with tree and the edge read {edge_read[-1]:.0f}/s"
            )
        size = head()[0]
        # The tree the timed rounds built is the RFC's tree over every event.
        assert tree.size() == size
        if arguments.smoke:
            from audit.models import AuditEvent

            hashes = AuditEvent.objects.order_by("seq").values_list("hash", flat=True)
            assert tree.root(size) == merkle.root([merkle.event_leaf_hash(h) for h in hashes])
        details = {
            "prefill": prefill,
            "appends_per_round": appends,
            "rounds": ROUNDS,
            "without_tree_per_s": [round(v) for v in baseline],
            "with_tree_per_s": [round(v) for v in maintained],
            "with_tree_edge_read_per_s": [round(v) for v in edge_read],
            "final_tree_size": size,
        }
        emit(
            "audit_append",
            [
                Result(
                    "audit appends/s with the Merkle tree",
                    round(statistics.median(maintained), 1),
                    "appends/s",
                    baseline=round(statistics.median(baseline), 1),
                    baseline_name="the same appends without the tree, same run",
                    target="ratio >= 0.9",
                    details=details,
                ),
                Result(
                    "audit appends/s with the Merkle tree, its edge read every append",
                    round(statistics.median(edge_read), 1),
                    "appends/s",
                    baseline=round(statistics.median(baseline), 1),
                    baseline_name="the same appends without the tree, same run",
                    target="informative: several processes appending in turn",
                    details={"prefill": prefill, "appends_per_round": appends},
                ),
            ],
        )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
