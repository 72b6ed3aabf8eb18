"""Dry-run and decision metrics at volume: 100k requests replayed, 1M requests
aggregated (`make bench`; `--smoke` uses tiny sizes; `--dry-run-rows` and
`--metrics-rows` override).

    BENCH_DB=cp_bench .venv/bin/python -m tests.perf.bench_tuning

Baselines measured in the same run on the same rows: for the dry-run, fetching the
rows it reads (its one query, without classifying); for metrics, one plain
GROUP BY count over the period. Query counts are reported too: both must stay
constant whatever the number of requests.
"""

from __future__ import annotations

import argparse
import time
import uuid
from datetime import timedelta

from .common import SMOKE, Result, django_setup, emit, fresh_database, progress

BATCH = 10_000
CALLS = [
    ("send_email", {"to": ["dana@example.com"], "subject": "Hi", "body": "Hello"}, "send_email_default", "medium"),
    ("send_email", {"to": [f"u{i}@example.com" for i in range(12)], "subject": "News", "body": "All"},
     "send_email_many_recipients_or_sensitive", "high"),
    ("read_file", {"path": "/srv/report.txt"}, "read_low", "low"),
    ("update_document", {"content": "v2"}, "update_document", "medium"),
]


def insert(agent, reviewers, count: int, *, with_params: bool, now) -> None:
    """Bulk-insert `count` requests spread over 30 days with mixed outcomes (and the
    people's decisions); the newest rows are inserted last."""
    from approvals.models import DECIDED_BY_POLICY, ApprovalRequest, Decision, ParamsRevision
    from approvals.states import Kind, State

    for offset in range(0, count, BATCH):
        rows, revisions, decisions = [], [], []
        for index in range(offset, min(offset + BATCH, count)):
            action_type, params, rule, level = CALLS[index % len(CALLS)]
            created = now - timedelta(seconds=((count - index) * 2_592_000) // count)
            people, outcome = level != "low", index % 10
            decided = not people or outcome < 8
            request = ApprovalRequest(
                id=uuid.uuid4(), kind=Kind.ACTION, agent=agent, action_type=action_type, target={"mailbox": "x"},
                target_hash="0" * 64, risk_level=level, rule_name=rule, created_at=created,
                decide_by=created + timedelta(hours=1) if people else None,
                decided_at=created + timedelta(seconds=30 + outcome * 97) if decided else None,
                decided_by_label=(DECIDED_BY_POLICY if not people
                                  else reviewers[outcome % len(reviewers)].username if decided else ""),
                state=(State.SUCCEEDED if not people or outcome < 6 else State.REJECTED if decided else State.EXPIRED),
            )
            rows.append(request)
            if with_params:
                revisions.append(ParamsRevision(request_id=request.id, number=1, params=params))
            if people and decided:
                decisions.append(Decision(request_id=request.id, revision=1, reviewer=reviewers[outcome % len(reviewers)],
                                          verdict="approve" if outcome < 6 else "reject", created_at=request.decided_at))
        ApprovalRequest.objects.bulk_create(rows)
        ParamsRevision.objects.bulk_create(revisions)
        Decision.objects.bulk_create(decisions)


def timed(function):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        result = function()
        elapsed = time.perf_counter() - started
    return result, elapsed, len(queries.captured_queries)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--dry-run-rows", type=int, default=2_000 if SMOKE else 100_000)
    parser.add_argument("--metrics-rows", type=int, default=5_000 if SMOKE else 1_000_000)
    args = parser.parse_args()
    fresh_database()
    django_setup()
    from django.contrib.auth import get_user_model
    from django.db.models import Count
    from django.utils import timezone

    from agents.models import Agent
    from approvals.models import ApprovalRequest
    from approvals.tuning import dry_run, metrics

    User = get_user_model()
    owner = User.objects.create_user("bench-owner")
    reviewers = [User.objects.create_user(f"reviewer{i}") for i in range(3)]
    agent = Agent.objects.create(name="bench-agent", owner=owner)
    now = timezone.now()
    older = max(args.metrics_rows - args.dry_run_rows, 0)
    started = time.perf_counter()
    insert(agent, reviewers, older, with_params=False, now=now - timedelta(days=1))
    insert(agent, reviewers, args.dry_run_rows, with_params=True, now=now)
    progress(f"inserted {older + args.dry_run_rows} requests in {time.perf_counter() - started:.0f} s")

    results = []
    proposal = dry_run.propose_rule({"name": "send_email_low", "priority": 15, "action_type": "send_email",
                                     "risk_level": "low",
                                     "conditions": [{"path": "impact.recipient_count", "op": "lte", "value": 3}]})
    _, fetch_seconds, _ = timed(lambda: dry_run.recent_requests(args.dry_run_rows))
    report, seconds, queries = timed(lambda: dry_run.dry_run(proposal, limit=args.dry_run_rows))
    results.append(Result(
        f"dry-run of {report.sample_size} requests", round(seconds, 3), "s", baseline=round(fetch_seconds, 3),
        baseline_name="fetching the same rows", target="bounded queries",
        details={"queries": queries, "level_changes": report.level_changes,
                 "per_request_us": round(seconds / max(report.sample_size, 1) * 1e6, 1)},
    ))
    progress(f"dry-run {seconds:.2f} s, {queries} queries")

    period = metrics.Period.last_days(31, now=now + timedelta(minutes=1))
    _, baseline, _ = timed(lambda: list(
        ApprovalRequest.objects.filter(created_at__gte=period.start, created_at__lt=period.end)
        .order_by().values("rule_name").annotate(n=Count("pk"))))
    total = older + args.dry_run_rows
    for name, run in [
        *[(f"metrics by {d}", (lambda d=d: metrics.outcome_table(d, period))) for d in metrics.DIMENSIONS],
        ("metrics by reviewer", lambda: metrics.reviewer_table(period)),
        ("metrics daily series", lambda: metrics.time_series(period)),
    ]:
        rows, seconds, queries = timed(run)
        results.append(Result(f"{name} over {total} requests", round(seconds, 3), "s", baseline=round(baseline, 3),
                              baseline_name="one GROUP BY count", target="aggregate queries only",
                              details={"queries": queries, "rows": len(rows)}))
        progress(f"{name}: {seconds:.2f} s, {queries} queries")
    emit("tuning", results)


if __name__ == "__main__":
    main()
